package cluster

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/floodgate/floodgate/fsm"
	"github.com/floodgate/floodgate/policy"
	"github.com/floodgate/floodgate/test/freeport"
	"github.com/floodgate/floodgate/window"
)

// loopback returns a free 127.0.0.1 address for TCP and UDP.
func loopback(t *testing.T) string {
	t.Helper()
	addr, err := freeport.Addr()
	if err != nil {
		t.Fatal(err)
	}
	return addr
}

// When the strict checks of a call committed and a fast check of the same
// call is then refused, the call must not fail as "not the leader": a
// caller retries not-leader elsewhere, and would count the strict checks
// twice. Each check gets its own answer: the strict one its decision, the
// fast one the refusal, retryable alone (it counted nowhere).
func TestPartlyCountedCallIsNotRetryable(t *testing.T) {
	n := startOne(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	// A sliding log: a fixed window ends at the next epoch-aligned minute,
	// and one passing between the two calls reset the count.
	lim := policy.Limit{Limit: window.Limit{Algorithm: window.SlidingLog, Limit: 5, Window: int64(time.Minute)}}
	strict := &policy.Policy{Name: "s", Limits: []policy.Limit{lim}}
	fast := &policy.Policy{Name: "f", Consistency: policy.Fast, Limits: []policy.Limit{lim}}
	r := n.replica(0)
	if err := r.group.waitLeader(ctx); err != nil {
		t.Fatal(err)
	}
	r.fast.refuse()
	_, err := n.Submit(ctx, 0, []fsm.Check{{Key: "k", Policy: strict, Cost: 1}, {Key: "k", Policy: fast, Cost: 1}})
	var pe *PartialError
	if !errors.As(err, &pe) || Retryable(err) {
		t.Fatalf("got %v: want each check's own answer, the call not retryable", err)
	}
	if pe.Errs[0] != nil || !pe.Results[0].Allowed || pe.Results[0].Remaining != 4 {
		t.Errorf("the strict check: %+v, %v, want its decision", pe.Results[0], pe.Errs[0])
	}
	var nl *NotLeaderError
	if !errors.As(pe.Errs[1], &nl) || !Retryable(pe.Errs[1]) {
		t.Errorf("the fast check: %v, want not-leader, retryable alone", pe.Errs[1])
	}
	// The strict check did count.
	res, err := n.Submit(ctx, 0, []fsm.Check{{Key: "k", Policy: strict, Cost: 0}})
	if err != nil || res[0].Remaining != 4 {
		t.Fatalf("after: %+v %v", res, err)
	}
	// A call that counted nothing yet is refused as retryable.
	if _, err := n.Submit(ctx, 0, []fsm.Check{{Key: "k", Policy: fast, Cost: 1}}); !errors.As(err, &nl) {
		t.Fatalf("fast only: %v, want NotLeaderError", err)
	}
}

// A check whose policy the state machine would refuse at apply never
// joins a log entry: there it would fail the whole entry, every other
// caller's checks with it. The call is refused as invalid and nothing of
// it is counted.
func TestSubmitRefusesAPolicyApplyWould(t *testing.T) {
	n := startOne(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := n.replica(0).group.waitLeader(ctx); err != nil {
		t.Fatal(err)
	}
	lim := policy.Limit{Limit: window.Limit{Algorithm: window.FixedWindow, Limit: 5, Window: int64(time.Minute)}}
	good := &policy.Policy{Name: "good", Limits: []policy.Limit{lim}}
	bad := &policy.Policy{Name: "we ird!", Limits: []policy.Limit{lim}}
	before := n.replica(0).group.raft.LastIndex()
	_, err := n.Submit(ctx, 0, []fsm.Check{{Key: "k", Policy: good, Cost: 1}, {Key: "k2", Policy: bad, Cost: 1}})
	if !errors.Is(err, window.ErrInvalid) {
		t.Fatalf("got %v, want an invalid-policy error", err)
	}
	if after := n.replica(0).group.raft.LastIndex(); after != before {
		t.Errorf("the log moved from %d to %d", before, after)
	}
	res, err := n.Submit(ctx, 0, []fsm.Check{{Key: "k", Policy: good, Cost: 0}})
	if err != nil || res[0].Remaining != 5 {
		t.Fatalf("after: %+v %v, want nothing counted", res, err)
	}
}
