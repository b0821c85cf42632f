package e2e

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	pb "github.com/floodgate/floodgate/proto/floodgate/v1"
)

// --log-format json: every line a node writes is a JSON record, Raft's,
// memberlist's and OpenTelemetry's own lines included (routed through the
// node's log, not discarded nor written as plain text); --pprof serves
// every profile, and a node without it none.
func TestJSONLogsAndProfiles(t *testing.T) {
	// Traces go to a collector that is not there, soon: the failed export
	// is logged.
	nowhere, err := FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("OTEL_BSP_SCHEDULE_DELAY", "100")
	t.Setenv("OTEL_EXPORTER_OTLP_TIMEOUT", "500")
	c := startCluster(t, 2, "--log-format", "json", "--log-level", "debug", "--pprof", "--otlp-endpoint", nowhere, "--otlp-insecure")
	nodes := c.Running()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := nodes[0].Limiter().Allow(ctx, &pb.AllowRequest{Key: "logs", Limit: slidingLog(5, time.Minute)}); err != nil {
		t.Fatal(err)
	}
	for !strings.Contains(nodes[0].Log(), "traces export") && ctx.Err() == nil {
		time.Sleep(100 * time.Millisecond)
	}
	for _, path := range []string{"/debug/pprof/", "/debug/pprof/cmdline", "/debug/pprof/symbol",
		"/debug/pprof/heap", "/debug/pprof/profile?seconds=1", "/debug/pprof/trace?seconds=1"} {
		if resp, body := httpGet(t, "http://"+nodes[0].HTTP+path); resp.StatusCode != http.StatusOK || body == "" {
			t.Errorf("GET %s: %d, %d bytes", path, resp.StatusCode, len(body))
		}
	}
	for _, n := range nodes {
		n.Stop() // the log is complete once the process is gone
	}
	sources := map[string]int{}
	for _, n := range nodes {
		for i, line := range strings.Split(strings.TrimSpace(n.Log()), "\n") {
			var rec struct{ Time, Level, Msg string }
			if err := json.Unmarshal([]byte(line), &rec); err != nil || rec.Time == "" || rec.Level == "" || rec.Msg == "" {
				t.Fatalf("%s line %d is not a JSON record (time, level, msg): %q", n.ID, i+1, line)
			}
			// The libraries' own lines carry their level tag: "gossip: [DEBUG]
			// memberlist: …" (floodgate's "gossip: node down" is not one).
			for _, prefix := range []string{"raft: [", "gossip: [", "tracing: "} {
				if strings.HasPrefix(rec.Msg, prefix) {
					sources[prefix]++
				}
			}
		}
	}
	if sources["raft: ["] == 0 || sources["gossip: ["] == 0 || sources["tracing: "] == 0 {
		t.Fatalf("lines from Raft %d, memberlist %d, OpenTelemetry %d: a library's log is not routed", sources["raft: ["], sources["gossip: ["], sources["tracing: "])
	}

	plain := startCluster(t, 1)
	if resp, _ := httpGet(t, "http://"+plain.Running()[0].HTTP+"/debug/pprof/cmdline"); resp.StatusCode != http.StatusNotFound {
		t.Errorf("without --pprof, /debug/pprof/cmdline answers %d, want 404", resp.StatusCode)
	}
}
