package cluster

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/floodgate/floodgate/fsm"
	"github.com/floodgate/floodgate/policy"
	"github.com/floodgate/floodgate/window"
)

// A group at --max-key-states refuses checks that would add states
// (ErrFull, final, naming the flag, nothing counted), strict and fast
// alike, each alone in a call of several, while checks of keys it holds
// and peeks go on.
func TestMaxKeyStates(t *testing.T) {
	const max = 6
	n := startOneWith(t, func(c *Config) { c.MaxKeyStates = max })
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := n.replica(0).group.waitLeader(ctx); err != nil {
		t.Fatal(err)
	}
	// A sliding log: a fixed window ends at the next epoch-aligned hour,
	// and the states expired by one passing during the test made room.
	lim := policy.Limit{Limit: window.Limit{Algorithm: window.SlidingLog, Limit: 5, Window: int64(time.Hour)}}
	strict := &policy.Policy{Name: "s", Limits: []policy.Limit{lim}}
	fast := &policy.Policy{Name: "f", Consistency: policy.Fast, Limits: []policy.Limit{lim}}
	check := func(key string, p *policy.Policy, cost int64) fsm.Check {
		return fsm.Check{Key: key, Policy: p, Cost: cost}
	}

	for i := range max - 3 {
		if _, err := n.Submit(ctx, 0, []fsm.Check{check(fmt.Sprintf("k%d", i), strict, 1)}); err != nil {
			t.Fatalf("key %d of %d: %v", i, max, err)
		}
	}
	if _, err := n.Submit(ctx, 0, []fsm.Check{check("f0", fast, 1)}); err != nil {
		t.Fatalf("room for a fast check: %v", err)
	}
	// Three new keys in one call for the room of two: each set finds the
	// states of those taken before it counted.
	_, err := n.Submit(ctx, 0, []fsm.Check{check("k3", strict, 1), check("last", strict, 1), check("one-too-many", strict, 1)})
	var pe *PartialError
	if !errors.As(err, &pe) || pe.Errs[0] != nil || pe.Errs[1] != nil || !errors.Is(pe.Errs[2], ErrFull) {
		t.Fatalf("three new keys for two rooms: %v", err)
	}
	for _, c := range []fsm.Check{check("new-strict", strict, 1), check("new-fast", fast, 1), check("k0", fast, 1)} {
		_, err := n.Submit(ctx, 0, []fsm.Check{c})
		if !errors.Is(err, ErrFull) || Retryable(err) || !strings.Contains(err.Error(), "--max-key-states (6)") {
			t.Errorf("%s (%s) at the bound: %v, want ErrFull naming the flag", c.Key, c.Policy.Name, err)
		}
	}
	res, err := n.Submit(ctx, 0, []fsm.Check{check("k0", strict, 1), check("never", strict, 0)})
	if err != nil || !res[0].Allowed || !res[1].Allowed || res[1].Remaining != 5 {
		t.Fatalf("a held key and a peek: %+v, %v", res, err)
	}
	_, err = n.Submit(ctx, 0, []fsm.Check{check("k1", strict, 1), check("new-2", strict, 1), check("f0", fast, 1)})
	if !errors.As(err, &pe) {
		t.Fatalf("a call with one new key: %v, want a partial answer", err)
	}
	if pe.Errs[0] != nil || pe.Errs[2] != nil || !errors.Is(pe.Errs[1], ErrFull) || !pe.Results[0].Allowed || !pe.Results[2].Allowed {
		t.Fatalf("partial answer %+v", pe)
	}
	// A shadow policy never denies: a new key without room is answered as
	// would-deny, and counted nowhere.
	shadow := &policy.Policy{Name: "sh", Mode: policy.Shadow, Limits: []policy.Limit{lim}}
	res, err = n.Submit(ctx, 0, []fsm.Check{check("new-shadow", shadow, 1)})
	if err != nil || len(res) != 1 || !res[0].Allowed || !res[0].WouldDeny {
		t.Fatalf("a shadow check without room: %+v, %v", res, err)
	}
	res, err = n.Submit(ctx, 0, []fsm.Check{check("new-shadow", shadow, 1), check("k2", strict, 1)})
	if err != nil || !res[0].WouldDeny || !res[1].Allowed || res[1].WouldDeny {
		t.Fatalf("a shadow check without room beside a held key: %+v, %v", res, err)
	}
	r := n.replica(0)
	r.fast.drain() // the fast counts are replicated
	if got := r.fsm.Stats().States; got != max {
		t.Fatalf("%d states held, want %d: a refused check was counted", got, max)
	}
}
