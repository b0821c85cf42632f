package e2e

import (
	"context"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	pb "github.com/floodgate/floodgate/proto/floodgate/v1"
)

// A group leader whose clock steps an hour ahead (an NTP step, an
// operator's date) never stamps a check with the jump: the key it denied
// stays denied until its window truly ends, not at once (every window
// would end at the step, admitting a whole limit again), and it is admitted
// again when its window ends, not an hour later (a group's log time never
// goes back, so one entry stamped ahead would have held its windows still
// for the hour, whatever clock its next leader has). The leader stops
// itself once its clock watch has its strikes, saying it stamps by its
// monotonic clock meanwhile.
func TestClockStepIsNotStamped(t *testing.T) {
	skewed := skewedBuild(t)
	c := startCluster(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if err := c.WaitSettled(ctx); err != nil {
		t.Fatal(err)
	}
	n1, n2 := c.Nodes[0], c.Nodes[1]
	// n1 again, on a test build whose clock SIGUSR1 steps an hour ahead.
	n1.Stop()
	n1.Use(skewed)
	n1.Env = []string{"FLOODGATE_TEST_CLOCK_STEP=1h"}
	if err := n1.Start(); err != nil {
		t.Fatal(err)
	}
	if err := n1.WaitServing(ctx); err != nil {
		t.Fatal(err)
	}
	// The guard holds a step from the cluster's first reading of n1's clock
	// on (before it, a node's clock is its own: one that starts off is the
	// clock watch's to stop). On a busy machine that reading came after the
	// step, which was then stamped and the test failed.
	waitFor(t, ctx, "n1's clock read against its peers'", func() error {
		if len(seriesOf(scrape(t, n1), "floodgate_clock_offset_seconds", nil)) == 0 {
			return fmt.Errorf("no reading yet")
		}
		return nil
	})
	// A key of a group n1 leads: the leader stamps its checks.
	var key string
	group := -1
	waitFor(t, ctx, "n1 to lead a group again", func() error {
		st, err := c.Status(ctx)
		if err != nil {
			return err
		}
		for _, g := range st.ShardStatus {
			if g.Leader == n1.ID {
				group = int(g.Id)
				key = keysInShard(st, "step", group, 1)[0]
				return nil
			}
		}
		return fmt.Errorf("n1 leads none of %d groups", len(st.ShardStatus))
	})
	leads := func() bool {
		st, err := c.Status(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, g := range st.ShardStatus {
			if int(g.Id) == group {
				return g.Leader == n1.ID
			}
		}
		return false
	}

	const window = 20 * time.Second
	lim := &pb.Limit{Algorithm: pb.Algorithm_SLIDING_LOG, Limit: 5, WindowMs: window.Milliseconds()}
	allow := func(n *Node) (bool, error) {
		cctx, ccancel := context.WithTimeout(ctx, 5*time.Second)
		defer ccancel()
		resp, err := n.Limiter().Allow(cctx, &pb.AllowRequest{Key: key, Limit: lim})
		if err != nil {
			return false, err
		}
		return resp.Allowed, nil
	}
	first := time.Now()
	for i := range 5 {
		if ok, err := allow(n1); err != nil || !ok {
			t.Fatalf("check %d of 5: allowed %v, %v", i+1, ok, err)
		}
	}
	last := time.Now()
	if ok, err := allow(n1); err != nil || ok {
		t.Fatalf("the 6th check: allowed %v, %v", ok, err)
	}

	// n1 must stamp what follows: were the group led elsewhere, its checks
	// would be forwarded to a leader whose clock is right.
	if !leads() {
		t.Fatalf("n1 no longer leads group %d: the step would test nothing", group)
	}
	if err := n1.Signal(syscall.SIGUSR1); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ctx, "n1's clock to step", func() error {
		if !strings.Contains(n1.Log(), "clock stepped by 1h0m0s") {
			return fmt.Errorf("not yet")
		}
		return nil
	})
	// Until its strikes are up, n1 leads with its clock an hour ahead: the
	// key stays denied (watched until n1 stops, or until near the window's
	// true end, whichever comes first: on a slow machine n1's stop, with
	// its hand-off, may take that long).
	stepped := 0
	for !exited(n1) && time.Now().Before(first.Add(window-3*time.Second)) {
		if stepped == 0 && !leads() {
			t.Fatalf("n1 lost group %d's leadership before any check after the step", group)
		}
		stepped++
		ok, err := allow(n1)
		// Admitted and answered before the window could have ended (first
		// is before the first check was sent): a call that took its 5s
		// past the window's end may rightly be admitted.
		if err == nil && ok && time.Now().Before(first.Add(window)) {
			t.Fatalf("admitted by n1 %v after the step, %v into a window of %v: its clock's hour was stamped",
				time.Since(last).Round(time.Millisecond), time.Since(first).Round(time.Millisecond), window)
		}
		if ctx.Err() != nil {
			t.Fatalf("n1 still running with its clock an hour ahead:\n%s", tail(n1.Log(), 20))
		}
		time.Sleep(200 * time.Millisecond)
	}
	if stepped < 3 {
		t.Fatalf("only %d checks through n1 after its step", stepped)
	}
	select {
	case <-n1.Exited():
	case <-ctx.Done():
		t.Fatalf("n1 still running with its clock an hour ahead:\n%s", tail(n1.Log(), 20))
	}
	if code := n1.ExitCode(); code != 1 {
		t.Errorf("n1 exit code %d, want 1", code)
	}
	for _, want := range []string{"checks are stamped by its monotonic clock", "ahead of the clock of 2 of the 2 other nodes"} {
		if !strings.Contains(n1.Log(), want) {
			t.Errorf("n1's log does not say %q:\n%s", want, tail(n1.Log(), 20))
		}
	}

	// Through n2, once the group has failed over: denied until the window
	// of the five ends, admitted soon after, not an hour later.
	for {
		ok, err := allow(n2)
		switch {
		case err != nil && status.Code(err) != codes.Unavailable:
			t.Fatal(err)
		case err == nil && ok:
			if early := first.Add(window - time.Second); time.Now().Before(early) {
				t.Fatalf("admitted %v into a window of %v", time.Since(first).Round(time.Millisecond), window)
			}
			t.Logf("admitted again %v after the first of the five (window %v)", time.Since(first).Round(100*time.Millisecond), window)
			return
		}
		if time.Since(last) > window+15*time.Second {
			t.Fatalf("still denied %v after the last of the five, window %v: the group's time stands still", time.Since(last).Round(time.Second), window)
		}
		time.Sleep(250 * time.Millisecond)
	}
}
