package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	pb "github.com/floodgate/floodgate/proto/floodgate/v1"
)

// A group's Raft log is kept by bytes, not only by entries: checks of
// 500-byte keys write entries of half a megabyte, and 60 of them (30 MB,
// far below raft's 4,096 entries between snapshots) are snapshotted and
// cut to about --raft-log-mib once the node looks, though the load has
// stopped (an idle group writes no entry that would make raft look):
// within one and a half budgets (a snapshot is due past that; 16 entries,
// 8 MB, are kept after it). The counts survive the snapshot and a restart
// from it.
func TestRaftLogKeptByBytes(t *testing.T) {
	t.Parallel()
	const mib = 8
	c := startCluster(t, 1, "--raft-log-mib", fmt.Sprint(mib))
	n := c.Nodes[0]
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	// A sliding log: no window boundary passes during the test.
	lim := &pb.Limit{Algorithm: pb.Algorithm_SLIDING_LOG, Limit: 1000, WindowMs: 3_600_000}
	pad := strings.Repeat("k", 500)
	for range 60 {
		req := &pb.AllowBatchRequest{}
		for k := range 1000 {
			req.Requests = append(req.Requests, &pb.AllowRequest{Key: fmt.Sprintf("%s-%d", pad, k), Limit: lim})
		}
		if _, err := n.Limiter().AllowBatch(ctx, req); err != nil {
			t.Fatal(err)
		}
	}
	logBytes := func() float64 { return value(scrape(t, n), "floodgate_raft_log_bytes", nil) }
	deadline := time.Now().Add(30 * time.Second)
	for logBytes() > 1.5*mib*(1<<20) {
		if time.Now().After(deadline) {
			t.Fatalf("the log still holds %.0f bytes, over 1.5 times --raft-log-mib (%d MiB), 30 s after the load", logBytes(), mib)
		}
		time.Sleep(500 * time.Millisecond)
	}
	t.Logf("the log holds %.0f bytes", logBytes())
	n.Stop()
	if err := n.Start(); err != nil {
		t.Fatal(err)
	}
	if err := n.WaitServing(ctx); err != nil {
		t.Fatal(err)
	}
	resp, err := n.Limiter().Allow(ctx, &pb.AllowRequest{Key: pad + "-7", Limit: lim})
	if err != nil || resp.Remaining != 1000-61 {
		t.Fatalf("a key checked 60 times, once more after the restart: %v, %v; want %d remaining", resp, err, 1000-61)
	}
}
