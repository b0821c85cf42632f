package e2e

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	pb "github.com/floodgate/floodgate/proto/floodgate/v1"
)

// skewedBuilt is the test build whose clock FLOODGATE_TEST_CLOCK_SKEW moves,
// built once for the tests that need it, in bin's directory.
var skewedBuilt struct {
	once sync.Once
	bin  Binaries
	err  error
}

func skewedBuild(t *testing.T) Binaries {
	t.Helper()
	skewedBuilt.once.Do(func() {
		skewedBuilt.bin, skewedBuilt.err = BuildTagged(filepath.Join(filepath.Dir(bin.Floodgate), "skewed"), "clockskew")
	})
	if skewedBuilt.err != nil {
		t.Fatal(skewedBuilt.err)
	}
	return skewedBuilt.bin
}

// A node whose clock is off by more than --max-clock-offset from the rest
// of the cluster stops within seconds, exit 1, saying by how much and
// which way (a group leader stamps checks with its clock: one ahead slides
// windows early and admits over the limit); a node off by less than the
// bound stays, and the cluster goes on answering strict checks. The
// skewed nodes run a test build (-tags clockskew) that adds
// FLOODGATE_TEST_CLOCK_SKEW to its clock: processes on one machine share
// the system clock.
func TestSkewedClockStopsTheNode(t *testing.T) {
	skewed := skewedBuild(t)
	c := startCluster(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	n1, n3 := c.Nodes[0], c.Nodes[2]

	// Within the bound (500ms): a member like any other.
	n4, err := c.NewNode("n4")
	if err != nil {
		t.Fatal(err)
	}
	n4.Use(skewed)
	n4.Env = []string{"FLOODGATE_TEST_CLOCK_SKEW=300ms"}
	if err := n4.Start(n1.GRPC); err != nil {
		t.Fatal(err)
	}
	if err := n4.WaitServing(ctx); err != nil {
		t.Fatal(err)
	}
	if err := c.WaitSettled(ctx); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(n4.Log(), "clock is skewed on purpose") {
		t.Fatalf("the test build does not say its clock is skewed:\n%s", tail(n4.Log(), 10))
	}

	// n3's clock jumps 3s ahead: restarted on its data dir with it, as a
	// member that may lead its group at once.
	n3.Stop()
	n3.Use(skewed)
	n3.Env = []string{"FLOODGATE_TEST_CLOCK_SKEW=3s"}
	started := time.Now()
	if err := n3.Start(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-n3.Exited():
	case <-ctx.Done():
		t.Fatalf("%s still running with its clock 3s ahead:\n%s", n3.ID, tail(n3.Log(), 20))
	}
	t.Logf("%s stopped %v after its start", n3.ID, time.Since(started).Round(100*time.Millisecond))
	if code := n3.ExitCode(); code != 1 {
		t.Errorf("exit code %d, want 1", code)
	}
	log := n3.Log()
	for _, want := range []string{"clock is", "ahead of the clock of 3 of the 3 other nodes", "--max-clock-offset 500ms", "fix its time sync"} {
		if !strings.Contains(log, want) {
			t.Errorf("its log does not say %q:\n%s", want, tail(log, 10))
		}
	}
	if strings.Contains(log, "panic:") {
		t.Errorf("it panicked:\n%s", tail(log, 30))
	}

	// The others go on: strict checks on keys of every group are answered
	// once n3's groups have failed over, and n4 (300ms off) is still up.
	lim := &pb.Limit{Algorithm: pb.Algorithm_SLIDING_LOG, Limit: 100, WindowMs: 60_000}
	for i := range 32 {
		key := fmt.Sprintf("skew-%d", i)
		for {
			cctx, ccancel := context.WithTimeout(ctx, 5*time.Second)
			resp, err := n1.Limiter().Allow(cctx, &pb.AllowRequest{Key: key, Limit: lim})
			ccancel()
			if err == nil {
				if !resp.Allowed {
					t.Fatalf("%s: denied under a limit of %d", key, lim.Limit)
				}
				break
			}
			if status.Code(err) != codes.Unavailable || ctx.Err() != nil {
				t.Fatalf("%s: %v", key, err)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	if !n4.Running() || exited(n4) {
		t.Fatalf("%s, 300ms off, stopped:\n%s", n4.ID, tail(n4.Log(), 20))
	}
}

// Two nodes whose clocks disagree are a tie: neither can tell which clock
// is off, so neither stops (each warns), but a leader never hands its
// group to a node whose clock it reads beyond --max-clock-offset: n2,
// restarted with its clock 3s ahead, is not given back its home group.
func TestSkewedNodeIsNotHandedLeadership(t *testing.T) {
	skewed := skewedBuild(t)
	c := startCluster(t, 2)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	n1, n2 := c.Nodes[0], c.Nodes[1]
	n2.Stop()
	n2.Use(skewed)
	n2.Env = []string{"FLOODGATE_TEST_CLOCK_SKEW=3s"}
	if err := n2.Start(); err != nil {
		t.Fatal(err)
	}
	if err := n2.WaitServing(ctx); err != nil {
		t.Fatal(err)
	}
	const refused = "leadership not handed over: the node's clock is beyond --max-clock-offset"
	for !strings.Contains(n1.Log(), refused) {
		if ctx.Err() != nil {
			t.Fatalf("n1 never refused to hand n2 its group:\n%s", tail(n1.Log(), 20))
		}
		time.Sleep(200 * time.Millisecond)
	}
	for !strings.Contains(n2.Log(), "some nodes' clocks are beyond --max-clock-offset") {
		if ctx.Err() != nil {
			t.Fatalf("n2 never warned of the tie:\n%s", tail(n2.Log(), 20))
		}
		time.Sleep(200 * time.Millisecond)
	}
	st, err := c.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range st.ShardStatus {
		if g.Leader == n2.ID {
			t.Errorf("group %d is led by %s, whose clock is 3s ahead", g.Id, n2.ID)
		}
	}
	if exited(n1) || exited(n2) {
		t.Fatalf("a node of a tie stopped:\n%s\n%s", tail(n1.Log(), 10), tail(n2.Log(), 10))
	}
}
