package cluster

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/floodgate/floodgate/cluster/hashing"
	"github.com/floodgate/floodgate/fsm"
	"github.com/floodgate/floodgate/policy"
	"github.com/floodgate/floodgate/window"
)

// A call mixing strict and fast checks of one group, one of whose strict
// checks is refused at apply (its slot was frozen between Submit's
// Vet and the entry's apply: a slot move racing the call), must
// answer every check of the call in the call's own order: callers
// (dispatch.evaluateInto, PeerServer.forwardResult) read pe.Errs[j] for
// their j-th check, and an answer indexed by the strict checks alone would
// read past its end (a panic) or give a check another's answer.
func TestMixedCallRefusedAtApplyKeepsIndices(t *testing.T) {
	n := startOne(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	r := n.replica(0)
	if err := r.group.waitLeader(ctx); err != nil {
		t.Fatal(err)
	}
	// The group owns slot 0 of 2 (as if slot 1 had just been frozen by a move).
	if err := r.group.raft.Apply(fsm.EncodeInit(0, 2, []uint32{0}), time.Second).Error(); err != nil {
		t.Fatal(err)
	}
	key := func(slot int) string {
		for i := 0; ; i++ {
			if k := fmt.Sprintf("k%d", i); hashing.ShardOf(k, 2) == slot {
				return k
			}
		}
	}
	lim := policy.Limit{Limit: window.Limit{Algorithm: window.FixedWindow, Limit: 5, Window: int64(time.Minute)}}
	strict := &policy.Policy{Name: "s", Limits: []policy.Limit{lim}}
	fast := &policy.Policy{Name: "f", Consistency: policy.Fast, Limits: []policy.Limit{lim}}
	checks := []fsm.Check{
		{Key: key(0), Policy: fast, Cost: 1},   // fast, owned
		{Key: key(1), Policy: strict, Cost: 1}, // strict, refused at apply
		{Key: key(0), Policy: strict, Cost: 1}, // strict, owned
	}
	// submit is what Submit calls once its ownership check passed.
	res, err := n.submit(ctx, 0, r, checks, nil)
	var pe *PartialError
	if errors.As(err, &pe) {
		if len(pe.Errs) != len(checks) || len(pe.Results) != len(checks) {
			t.Fatalf("partial answer has %d errs / %d results for a call of %d checks: %v",
				len(pe.Errs), len(pe.Results), len(checks), err)
		}
		if pe.Errs[1] == nil || !errors.Is(pe.Errs[1], ErrMoved) {
			t.Fatalf("check 1 (refused at apply) answered %+v, %v", pe.Results[1], pe.Errs[1])
		}
		return
	}
	if err != nil {
		t.Fatalf("submit: %v", err)
	}
	t.Fatalf("check 1 was refused at apply yet answered %+v", res)
}
