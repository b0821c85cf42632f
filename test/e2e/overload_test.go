package e2e

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	pb "github.com/floodgate/floodgate/proto/floodgate/v1"
)

// Callers that arrive faster than a node's groups commit, past
// --max-checks-waiting: the node refuses the excess at once, Unavailable
// naming the flag, and counts none of it; the checks it took are answered
// and counted; the shed and waiting metrics say so; and once the flood
// ends the node takes checks again.
func TestMaxChecksWaitingShedsUncounted(t *testing.T) {
	t.Parallel()
	const bound, callers = 4, 64
	c := startCluster(t, 1, "--max-checks-waiting", "4")
	n := c.Running()[0]
	before := scrape(t, n)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// Every hit of the last seconds is in the window: remaining is exact.
	lim := &pb.Limit{Algorithm: pb.Algorithm_SLIDING_COUNTER, Limit: 1_000_000, WindowMs: time.Hour.Milliseconds()}
	var mu sync.Mutex
	allowed, shed := 0, 0
	var other error
	flood, stop := context.WithTimeout(ctx, 3*time.Second)
	defer stop()
	var wg sync.WaitGroup
	for range callers {
		wg.Go(func() {
			for flood.Err() == nil {
				_, err := n.Limiter().Allow(ctx, &pb.AllowRequest{Key: "overload", Limit: lim})
				mu.Lock()
				switch {
				case err == nil:
					allowed++
				case status.Code(err) == codes.Unavailable && strings.Contains(err.Error(), "--max-checks-waiting allows (4)"):
					shed++
				case other == nil:
					other = err
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if other != nil {
		t.Fatalf("a check failed otherwise: %v", other)
	}
	if allowed == 0 || shed == 0 {
		t.Fatalf("%d allowed and %d shed by %d callers against a bound of %d: want both", allowed, shed, callers, bound)
	}
	// Only what was allowed was counted: the next check finds the rest.
	r, err := n.Limiter().Allow(ctx, &pb.AllowRequest{Key: "overload", Limit: lim})
	if err != nil {
		t.Fatalf("a check after the flood: %v", err)
	}
	if want := int64(1_000_000 - allowed - 1); r.Remaining != want {
		t.Errorf("remaining %d after %d allowed and %d shed, want %d: shed checks were counted", r.Remaining, allowed, shed, want)
	}
	after := scrape(t, n)
	reason := map[string]string{"reason": "max_waiting"}
	if got := value(after, "floodgate_checks_shed_total", reason) - value(before, "floodgate_checks_shed_total", reason); got != float64(shed) {
		t.Errorf("floodgate_checks_shed_total moved by %v, want the %d shed", got, shed)
	}
	if got := value(after, "floodgate_checks_waiting", nil); got != 0 {
		t.Errorf("floodgate_checks_waiting %v with nothing in flight", got)
	}
	t.Logf("%d callers, bound %d: %d allowed, %d shed in 3 s", callers, bound, allowed, shed)
}
