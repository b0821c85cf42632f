package cluster_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	pb "github.com/floodgate/floodgate/proto/floodgate/v1"
	"github.com/floodgate/floodgate/test/inproc"
)

// A restarted member is a member at once (its own data dir lists it), but
// ready (CaughtUp) only once each of its replicas has applied what its
// group's leader had: a rolling restart that took it for ready as soon as
// it was a member stopped the next node while the groups still waited on
// this one's catching up (a node back from 40 s down: 2 s without a
// quorum, 4 checks failed), or while its peers could not reach it at all.
func TestARestartedNodeIsReadyOnlyOnceCaughtUp(t *testing.T) {
	nodes := inproc.SlotCluster(t, 3, 64)
	n1, n3 := nodes[0], nodes[2]
	n3.Stop()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	deadline := time.Now().Add(2 * time.Second)
	// Hundreds of entries in each group while n3 is down: its replicas
	// may take longer to catch up than the meta group's few entries.
	var wg sync.WaitGroup
	for w := range 6 {
		wg.Go(func() {
			for i := 0; time.Since(deadline) < 0; i++ {
				req := &pb.AllowRequest{Key: fmt.Sprintf("k%d-%d", w, i), Limit: &pb.Limit{Algorithm: pb.Algorithm_SLIDING_LOG, Limit: 10, WindowMs: 60_000}}
				if _, err := n1.Limiter().Allow(ctx, req); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	// What each group's leader has applied while n3 was down.
	want := map[int]uint64{}
	for _, g := range n1.Node.View().Groups {
		for _, n := range nodes[:2] {
			if info := n.Node.Progress(int(g.ID)); info.Leader {
				want[int(g.ID)] = info.Applied
			}
		}
	}
	if len(want) == 0 {
		t.Fatal("no group leader among n1 and n2")
	}

	n3.Restart()
	start := time.Now()
	behind := false
	for !n3.Node.CaughtUp() {
		for g, applied := range want {
			if info := n3.Node.Progress(g); info.Present && info.Applied < applied {
				behind = true
			}
		}
		if time.Since(start) > 30*time.Second {
			t.Fatal("n3 has not caught up 30 s after its restart")
		}
		time.Sleep(time.Millisecond)
	}
	// Three nodes, three replicas: n3 holds every group, and ready means
	// each of its replicas is open and has applied what its leader had.
	// A group the planner removed meanwhile (one that owned no slot) has
	// nothing left to hold.
	for g, applied := range want {
		if n3.Node.View().Group(uint32(g)) == nil {
			continue
		}
		switch info := n3.Node.Progress(g); {
		case !info.Present:
			t.Errorf("n3 says it caught up, but its replica of group %d is not open", g)
		case info.Applied < applied:
			t.Errorf("n3 says it caught up, but its replica of group %d applied %d of the %d its leader had before the restart", g, info.Applied, applied)
		}
	}
	t.Logf("caught up %v after its start (behind after its start, when it used to be ready: %v)", time.Since(start).Round(time.Millisecond), behind)
}
