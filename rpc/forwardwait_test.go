package rpc

import (
	"context"
	"fmt"
	"math"
	"testing"
	"testing/synctest"
	"time"

	peerv1 "github.com/floodgate/floodgate/proto/floodgate/peer/v1"
)

// A caller's wait goes on the wire in whole milliseconds rounded up, at
// least 1 when it has a deadline, 0 when it has none.
func TestWaitMs(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		now := time.Now()
		for _, tc := range []struct {
			left time.Duration // -1: no deadline
			want uint32
		}{
			{-1, 0},
			{20 * time.Millisecond, 20},
			{1500 * time.Microsecond, 2},
			{time.Microsecond, 1},
			{-time.Second + 1, 1}, // already past: still some wait, never "the call's"
			{math.MaxUint32 * time.Millisecond * 2, math.MaxUint32},
		} {
			ctx := context.Background()
			if tc.left != -1 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithDeadline(ctx, now.Add(tc.left))
				defer cancel()
			}
			if got := waitMs(ctx, now); got != tc.want {
				t.Errorf("%v left: wait_ms %d, want %d", tc.left, got, tc.want)
			}
		}
	})
}

// A shard's checks are split by their callers' waits within a factor of
// two, each group with its longest wait; an atomic set stays whole with
// its first check, whatever waits a sender gives the rest; waits of 0
// (older senders) make a group of their own.
func TestByWait(t *testing.T) {
	check := func(wait uint32, joined bool) *peerv1.ForwardCheck {
		return &peerv1.ForwardCheck{WaitMs: wait, Joined: joined}
	}
	for _, tc := range []struct {
		name   string
		checks []*peerv1.ForwardCheck
		want   string
	}{
		{"SDK callers a few ms apart", []*peerv1.ForwardCheck{check(1990, false), check(1996, false), check(2000, false)},
			"[{[0 1 2] 2000}]"},
		{"Envoy beside the SDK", []*peerv1.ForwardCheck{check(1990, false), check(20, false), check(2000, false), check(18, false)},
			"[{[0 2] 2000} {[1 3] 20}]"},
		{"a set stays whole", []*peerv1.ForwardCheck{check(20, false), check(2000, true), check(2000, true), check(2000, false)},
			"[{[0 1 2] 20} {[3] 2000}]"},
		{"an older sender", []*peerv1.ForwardCheck{check(0, false), check(0, false)}, "[{[0 1] 0}]"},
	} {
		idx := make([]int, len(tc.checks))
		for i := range idx {
			idx[i] = i
		}
		if got := fmt.Sprint(byWait(tc.checks, idx)); got != tc.want {
			t.Errorf("%s: %s, want %s", tc.name, got, tc.want)
		}
	}
}

// A group is bounded by its own wait from when the call came, unless its
// waits are of the call's longest (the call's deadline is its last
// caller's, whatever the shard) or it gives none.
func TestWaitContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		call, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		received := time.Now()
		for _, tc := range []struct {
			g    waitGroup
			most uint32
			want time.Duration
		}{
			{waitGroup{wait: 20}, 2000, 20 * time.Millisecond}, // alone in its shard, beside another shard's 2 s
			{waitGroup{wait: 1990}, 2000, 2 * time.Second},
			{waitGroup{wait: 0}, 2000, 2 * time.Second},
			{waitGroup{wait: 5000}, 8000, 2 * time.Second}, // never past the call's
		} {
			ctx, cancel := waitContext(call, received, tc.g, tc.most)
			d, _ := ctx.Deadline()
			if got := d.Sub(received); got != tc.want {
				t.Errorf("wait %d of a call's longest %d: deadline in %v, want %v", tc.g.wait, tc.most, got, tc.want)
			}
			cancel()
		}
	})
}
