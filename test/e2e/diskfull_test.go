package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	pb "github.com/floodgate/floodgate/proto/floodgate/v1"
)

// A node whose disk fills stops at once, with one error that says what
// failed and what to do, exit code 1 and no panic (hashicorp/raft would
// panic at its next write of its term); the other nodes go on answering
// strict checks; started again on its data dir, it catches up, and no
// count is lost. The full disk is a cap on the size of the files the
// node writes (RLIMIT_FSIZE): a write past it fails like one on a full
// disk, without a small filesystem to mount.
func TestFullDiskStopsTheNodeCleanly(t *testing.T) {
	t.Parallel()
	c := startCluster(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	n1, n3 := c.Nodes[0], c.Nodes[2]
	lim := &pb.Limit{Algorithm: pb.Algorithm_SLIDING_LOG, Limit: 10_000, WindowMs: 3_600_000}
	pad := strings.Repeat("x", 200) // longer keys fill the log sooner
	keys := make([]string, 8)
	for i := range keys {
		keys[i] = fmt.Sprintf("full-%d-%s", i, pad)
	}
	admitted, unknown := map[string]int64{}, map[string]int64{}
	// check reports whether the cluster answered.
	check := func(i int) bool {
		k := keys[i%len(keys)]
		cctx, ccancel := context.WithTimeout(ctx, 5*time.Second)
		defer ccancel()
		resp, err := n1.Limiter().Allow(cctx, &pb.AllowRequest{Key: k, Limit: lim})
		switch {
		case status.Code(err) == codes.Unavailable || status.Code(err) == codes.DeadlineExceeded:
			unknown[k]++ // written or not: a check that fails may have counted
			return false
		case err != nil:
			t.Fatal(err)
		case resp.Allowed:
			admitted[k]++
		default:
			t.Fatalf("denied under a limit of %d", lim.Limit)
		}
		return true
	}
	for i := range 40 {
		check(i)
	}
	// The node's own log file (its stderr) stays under the cap, so its
	// last words are kept; its Raft log soon passes it.
	if err := n3.LimitFileSize(256 << 10); err != nil {
		t.Fatal(err)
	}
	i := 0
	for n3.Running() && !exited(n3) {
		if ctx.Err() != nil {
			t.Fatalf("%s still running after %d checks with its disk full:\n%s", n3.ID, i, tail(n3.Log(), 20))
		}
		check(i)
		i++
	}
	if code := n3.ExitCode(); code != 1 {
		t.Errorf("exit code %d, want 1", code)
	}
	log := n3.Log()
	for _, want := range []string{"raft log write failed", "file too large", "this node stops", "start it again on the same --data-dir"} {
		if !strings.Contains(log, want) {
			t.Errorf("its log does not say %q:\n%s", want, tail(log, 10))
		}
	}
	if strings.Contains(log, "panic:") || strings.Contains(log, "goroutine ") {
		t.Errorf("it panicked:\n%s", tail(log, 30))
	}
	// The others go on: 20 checks answered (those of n3's groups once
	// their elections are done).
	for answered := 0; answered < 20; i++ {
		if ctx.Err() != nil {
			t.Fatalf("the other nodes answered %d of the checks after %s stopped", answered, n3.ID)
		}
		if check(i) {
			answered++
		} else {
			time.Sleep(100 * time.Millisecond) // an election under way
		}
	}
	n3.Stop() // reaps the exited process
	if err := n3.Start(); err != nil {
		t.Fatal(err)
	}
	if err := n3.WaitServing(ctx); err != nil {
		t.Fatal(err)
	}
	if err := c.WaitSettled(ctx); err != nil {
		t.Fatal(err)
	}
	zero := int64(0)
	for _, k := range keys {
		resp, err := n3.Limiter().Allow(ctx, &pb.AllowRequest{Key: k, Limit: lim, Cost: &zero})
		if err != nil {
			t.Fatal(err)
		}
		used := lim.Limit - resp.Remaining
		if used < admitted[k] || used > admitted[k]+unknown[k] {
			t.Errorf("key %.12s…: %d counted, %d admitted and %d unknown", k, used, admitted[k], unknown[k])
		}
	}
}

// exited reports whether n's process has exited by itself.
func exited(n *Node) bool {
	select {
	case <-n.Exited():
		return true
	default:
		return false
	}
}
