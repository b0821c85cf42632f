package cluster

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
)

func TestLevelOf(t *testing.T) {
	for line, want := range map[string]slog.Level{
		"2026/11/24 [ERR] memberlist: Failed to send ping":                                                                                 slog.LevelError,
		"[ERROR] shard-3: failed to appendEntries":                                                                                         slog.LevelError,
		"[WARN]  memberlist: Was able to connect to n2 over TCP":                                                                           slog.LevelWarn,
		"[WARN]  meta: failed to contact: server-id=n1":                                                                                    slog.LevelWarn,
		"[DEBUG] memberlist: Stream connection from=127.0.0.1:5000":                                                                        slog.LevelDebug,
		"[INFO]  memberlist: Marking n2 as failed":                                                                                         slog.LevelInfo,
		"[WARN]  shard-1: heartbeat timeout reached, starting election":                                                                    slog.LevelDebug,
		"[WARN]  meta: unable to get address for server, using fallback address: id=n1":                                                    slog.LevelDebug,
		`[ERROR] shard-0: failed to appendEntries to: peer="{Voter n2 127.0.0.1:7712}" error="raftnet: no group \"shard-0\" on this node"`: slog.LevelDebug,
		"no tag at all": slog.LevelWarn,
	} {
		if got := levelOf(line); got != want {
			t.Errorf("levelOf(%q) = %v, want %v", line, got, want)
		}
	}
}

func TestSlogWriterSplitsLinesIntoRecords(t *testing.T) {
	var buf bytes.Buffer
	w := &slogWriter{log: slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug})), prefix: "gossip: "}
	if _, err := w.Write([]byte("[INFO] memberlist: a\n[ERR] memberlist: b\n")); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 2 || !strings.Contains(lines[0], `"level":"INFO"`) || !strings.Contains(lines[0], `"msg":"gossip: [INFO] memberlist: a"`) ||
		!strings.Contains(lines[1], `"level":"ERROR"`) {
		t.Fatalf("records %q", lines)
	}
}
