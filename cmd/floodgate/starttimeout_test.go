package main

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/floodgate/floodgate/test/freeport"
)

// A start that cannot finish (a fleet of three expected, nobody else
// there) gives up at --start-timeout, and says that is what gave up.
func TestStartGivesUpAtStartTimeout(t *testing.T) {
	addr := func() string {
		a, err := freeport.Addr()
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	opts, err := parseOptions([]string{"--data-dir", t.TempDir(), "--grpc-addr", addr(), "--http-addr", "", "--raft-addr", addr(),
		"--gossip-addr", addr(), "--join", addr(), "--bootstrap-expect", "3", "--start-timeout", "10s"}, noEnv, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	start := time.Now()
	err = run(ctx, opts, slog.New(slog.DiscardHandler))
	took := time.Since(start)
	if err == nil || !strings.Contains(err.Error(), "start did not finish within --start-timeout 10s") {
		t.Fatalf("run: %v, want the start to give up naming --start-timeout", err)
	}
	if took < 9*time.Second || took > 30*time.Second {
		t.Errorf("gave up after %s, want about 10s", took)
	}
}
