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

// skewClock makes n's next start run the skewed build with its clock off
// by skew (a Go duration).
func skewClock(n *Node, skewed Binaries, skew string) {
	n.Use(skewed)
	n.Env = []string{"FLOODGATE_TEST_CLOCK_SKEW=" + skew}
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
	skewClock(n4, skewed, "300ms")
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
	skewClock(n3, skewed, "3s")
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

// A leader never hands its group to a node whose clock it reads beyond
// --max-clock-offset: n2, restarted with its clock 3s ahead (and its own
// check off, so that it stays up), is not given back its home group, and
// the others warn of it at every reading. (A node off alone against a
// majority stops by itself; TestSkewedClockStopsTheNode. Two nodes apart
// are a tie: neither stops, and an election after a failure may still
// make either one leader.)
func TestSkewedNodeIsNotHandedLeadership(t *testing.T) {
	skewed := skewedBuild(t)
	c := startCluster(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := c.WaitSettled(ctx); err != nil {
		t.Fatal(err)
	}
	n1, n2, n3 := c.Nodes[0], c.Nodes[1], c.Nodes[2]
	n2.Stop() // hands its leadership over: no election follows its return
	skewClock(n2, skewed, "3s")
	n2.Args = append(n2.Args, "--max-clock-offset", "0")
	if err := n2.Start(); err != nil {
		t.Fatal(err)
	}
	if err := n2.WaitServing(ctx); err != nil {
		t.Fatal(err)
	}
	others := func() string { return n1.Log() + n3.Log() }
	for _, want := range []string{
		"leadership not handed over: the node's clock is beyond --max-clock-offset",
		"some nodes' clocks are beyond --max-clock-offset",
	} {
		for !strings.Contains(others(), want) {
			if ctx.Err() != nil {
				t.Fatalf("n1 and n3 never said %q:\n%s\n%s", want, tail(n1.Log(), 20), tail(n3.Log(), 20))
			}
			time.Sleep(200 * time.Millisecond)
		}
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
	if exited(n2) {
		t.Fatalf("n2 stopped, its clock check off:\n%s", tail(n2.Log(), 10))
	}
}
