package e2e

import (
	"context"
	"crypto/rand"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	pb "github.com/floodgate/floodgate/proto/floodgate/v1"
)

// ctlCases feeds floodgatectl bad files and flags: each fails naming the
// field or flag, and nothing changes.
func (f *badFixture) ctlCases(t *testing.T) int {
	dir := t.TempDir()
	const head = "policies:\n- name: bi-ctl\n  limits:\n"
	files := []struct{ name, yaml, want string }{
		{"YAML syntax", "policies: [\n", "yaml:"},
		{"empty file", "", "empty document"},
		{"no policies", "policies: []\n", "policies: no policies"},
		{"unknown field", head + "  - {algorithm: sliding_log, limit: 1, windw: 1s}\n", `policies[0].limits[0]: line 4: unknown field "windw"`},
		{"unknown algorithm", head + "  - {algorithm: leaky, limit: 1, window: 1s}\n", "policies[0].limits[0].algorithm:"},
		{"bad window", head + "  - {algorithm: sliding_log, limit: 1, window: 1 fortnight}\n", "policies[0].limits[0].window:"},
		{"limit not a number", head + "  - {algorithm: sliding_log, limit: ten, window: 1s}\n", "policies[0].limits[0].limit:"},
		{"fractional limit", head + "  - {algorithm: sliding_log, limit: 1.9, window: 1s}\n", "policies[0].limits[0].limit: line 4: want a whole number, got 1.9"},
		{"zero limit", head + "  - {algorithm: sliding_log, limit: 0, window: 1s}\n", "policies[0].limits[0].limit: must be between 1 and"},
		{"zero window", head + "  - {algorithm: sliding_log, limit: 1, window: 0s}\n", "policies[0].limits[0].window: missing or 0"},
		{"window over a year", head + "  - {algorithm: sliding_log, limit: 1, window: 9000h}\n", "policies[0].limits[0].window: 9000h is more than a year (8784h)"},
		{"log over --max-log-length (server)", head + "  - {algorithm: sliding_log, limit: 5000, window: 1m}\n", "policies[0].limits[0].limit: a sliding_log keeps one timestamp"},
		{"bad name (server)", "policies:\n- name: bad name\n  limits:\n  - {algorithm: sliding_log, limit: 1, window: 1s}\n", "policies[0].name:"},
	}
	addr := f.c.Nodes[0].GRPC
	n := 0
	for _, tc := range files {
		path := filepath.Join(dir, strings.ReplaceAll(tc.name, " ", "_")+".yaml")
		if err := os.WriteFile(path, []byte(tc.yaml), 0o644); err != nil {
			t.Fatal(err)
		}
		n += f.ctl(t, "policy file: "+tc.name, tc.want, addr, "policy", "set", "-f", path)
	}
	n += f.ctl(t, "missing file", "no such file", addr, "policy", "set", "-f", filepath.Join(dir, "nope.yaml"))
	n += f.ctl(t, "allow --limit -1", "--limit: must be between 1 and", addr, "allow", "bi-watch", "--limit", "-1", "--window", "1h")
	n += f.ctl(t, "allow --window garbage", "window", addr, "allow", "bi-watch", "--limit", "10", "--window", "soon")
	n += f.ctl(t, "allow --window under a millisecond", "--window: 1.5ms is not a whole number of milliseconds", addr, "allow", "bi-watch", "--limit", "10", "--window", "1500us")
	n += f.ctl(t, "allow --algorithm garbage", "--algorithm: unknown algorithm", addr, "allow", "bi-watch", "--limit", "10", "--window", "1h", "--algorithm", "leaky")
	n += f.ctl(t, "allow --descriptor garbage", "--descriptor", addr, "allow", "--policy", "bi-api", "--descriptor", "user")
	n += f.ctl(t, "join garbage", "node_addr:", addr, "join", "garbage")
	n += f.ctl(t, "leave unknown node", "node_id:", addr, "leave", "bi-ghost", "--wait", "0")
	n += f.ctl(t, "--timeout 0", "--timeout: must be positive, got 0s", addr, "--timeout", "0", "leave", "n1")
	n += f.ctl(t, "leave with an empty node id (an unset $NODE)", "NODE_ID: empty", addr, "leave", "", "--wait", "0")
	n += f.ctl(t, "policy get unknown", "name:", addr, "policy", "get", "bi-nope")
	return n
}

// ctl runs one floodgatectl command that must fail mentioning want and
// change nothing.
func (f *badFixture) ctl(t *testing.T, name, want string, addr string, args ...string) int {
	t.Run(name, func(t *testing.T) {
		before := f.capture(t)
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		out, err := f.c.Ctl(ctx, addr, args...)
		if err == nil {
			t.Fatalf("succeeded: %s", out)
		}
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%v: does not mention %q", err, want)
		}
		f.unchanged(t, before, f.capture(t))
	})
	return 1
}

// wireCases writes garbage to the Raft port and to the gossip TCP and UDP
// ports of a running node: it must stay up and serving, keep answering
// checks, and change nothing.
func (f *badFixture) wireCases(t *testing.T) int {
	node := f.c.Nodes[1]
	noise := make([]byte, 4096)
	_, _ = rand.Read(noise)
	header := func(group string, rest ...byte) []byte {
		return append(append([]byte{0xFD, byte(len(group))}, group...), rest...)
	}
	tcp := []struct {
		name, addr string
		data       []byte
	}{
		{"raft: random bytes", node.Raft, noise},
		{"raft: HTTP request", node.Raft, []byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n")},
		{"raft: half a header", node.Raft, []byte{0xFD}},
		{"raft: unknown group", node.Raft, header("shard-999", noise[:64]...)},
		{"raft: header then garbage to meta", node.Raft, header("meta", noise...)},
		{"raft: header then garbage to a shard", node.Raft, header("shard-0", 0x00, 0xff, 0xff, 0xff, 0xff)},
		{"raft: append entries of garbage", node.Raft, header("shard-1", append([]byte{0x00, 0x8f}, noise[:256]...)...)},
		{"gossip tcp: random bytes", node.Gossip, noise},
		{"gossip tcp: push-pull of garbage", node.Gossip, append([]byte{6}, noise[:512]...)},
		{"gossip tcp: compound of garbage", node.Gossip, append([]byte{7, 0xff, 0xff}, noise[:128]...)},
		{"gossip tcp: compressed garbage", node.Gossip, append([]byte{9}, noise[:128]...)},
	}
	udp := []struct {
		name string
		data []byte
	}{
		{"gossip udp: empty packet", nil},
		{"gossip udp: random bytes", noise[:1400]},
		{"gossip udp: ping of garbage", append([]byte{0}, noise[:200]...)},
		{"gossip udp: compound of garbage", append([]byte{7, 0xff}, noise[:200]...)},
		{"gossip udp: alive of garbage", append([]byte{4}, noise[:200]...)},
	}
	for _, tc := range tcp {
		t.Run(tc.name, func(t *testing.T) {
			before := f.capture(t)
			conn, err := net.DialTimeout("tcp", tc.addr, 2*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			_, _ = conn.Write(tc.data)
			// Wait for the node to hang up (or give up waiting): it has
			// then read and refused the bytes.
			_ = conn.SetReadDeadline(time.Now().Add(500 * time.Millisecond))
			_, _ = conn.Read(make([]byte, 1))
			conn.Close()
			f.unchanged(t, before, f.capture(t))
			f.stillServing(t, node)
		})
	}
	for _, tc := range udp {
		t.Run(tc.name, func(t *testing.T) {
			before := f.capture(t)
			conn, err := net.Dial("udp", node.Gossip)
			if err != nil {
				t.Fatal(err)
			}
			for i := 0; i < 10; i++ {
				_, _ = conn.Write(tc.data)
			}
			conn.Close()
			time.Sleep(100 * time.Millisecond)
			f.unchanged(t, before, f.capture(t))
			f.stillServing(t, node)
		})
	}
	return len(tcp) + len(udp)
}

// stillServing checks node is running, healthy, and answers a check.
func (f *badFixture) stillServing(t *testing.T, node *Node) {
	t.Helper()
	select {
	case <-node.Exited():
		t.Fatalf("%s exited:\n%s", node.ID, tail(node.Log(), 30))
	default:
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	h, err := healthpb.NewHealthClient(node.Conn()).Check(ctx, &healthpb.HealthCheckRequest{})
	if err != nil || h.Status != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("%s health: %v %v", node.ID, h, err)
	}
	if _, err := node.Limiter().Allow(ctx, &pb.AllowRequest{Key: "bi-watch", Limit: slidingLog(10, time.Hour), Cost: cost(0)}); err != nil {
		t.Fatalf("%s no longer answers checks: %v", node.ID, err)
	}
}
