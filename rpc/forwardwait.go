package rpc

import (
	"context"
	"math"
	"math/bits"
	"slices"
	"time"

	peerv1 "github.com/floodgate/floodgate/proto/floodgate/peer/v1"
)

// waitMs is how long, from now, the caller of ctx waits for its check, in
// whole milliseconds rounded up (ForwardCheck.wait_ms): 0 when it sets no
// deadline, at least 1 otherwise.
func waitMs(ctx context.Context, now time.Time) uint32 {
	d, ok := ctx.Deadline()
	if !ok {
		return 0
	}
	ms := (d.Sub(now) + time.Millisecond - 1) / time.Millisecond
	return uint32(min(max(ms, 1), math.MaxUint32))
}

// waitGroup is checks of one shard of a Forward whose callers wait about as
// long: submitted together, with the longest of their waits (0: the
// call's).
type waitGroup struct {
	idx  []int // into the request's checks
	wait uint32
}

// byWait splits a shard's checks (idx, into checks) by how long their
// callers wait, within a factor of two, in the order each group's first
// check came: a call carries many callers' checks with the deadline of the
// last of them, and a check judged by that one (an Envoy caller's 20 ms
// beside an SDK caller's 2 s) is written for a caller gone by its commit,
// where a group behind a backlog would refuse it unwritten. A check that
// joins an atomic set goes where the set's first check goes, whatever
// wait a sender gives it: a set is decided whole. Checks from senders that
// give no wait (older releases) make one group of wait 0.
func byWait(checks []*peerv1.ForwardCheck, idx []int) []waitGroup {
	// Mostly one group (callers of one kind): idx as it is.
	one := waitGroup{idx: idx}
	b := bits.Len32(checks[idx[0]].WaitMs)
	for _, i := range idx {
		if c := checks[i]; !c.Joined {
			if bits.Len32(c.WaitMs) != b {
				return splitByWait(checks, idx)
			}
			one.wait = max(one.wait, c.WaitMs)
		}
	}
	return []waitGroup{one}
}

// splitByWait is byWait of checks of more than one group.
func splitByWait(checks []*peerv1.ForwardCheck, idx []int) []waitGroup {
	var groups []waitGroup
	last := -1 // the group of the check before
	for _, i := range idx {
		c := checks[i]
		g := last
		if !c.Joined || g < 0 {
			b := bits.Len32(c.WaitMs)
			g = slices.IndexFunc(groups, func(w waitGroup) bool { return bits.Len32(w.wait) == b })
			if g < 0 {
				g = len(groups)
				groups = append(groups, waitGroup{})
			}
			groups[g].wait = max(groups[g].wait, c.WaitMs) // within its bucket
		}
		groups[g].idx = append(groups[g].idx, i)
		last = g
	}
	return groups
}

// waitContext bounds ctx, the Forward call's, by a group's wait from when
// the call was received. A call's deadline is its last caller's, of any
// shard: a group whose waits are of the call's longest (most, within a
// factor of two) keeps ctx, as do checks that give no wait.
func waitContext(ctx context.Context, received time.Time, g waitGroup, most uint32) (context.Context, context.CancelFunc) {
	if g.wait == 0 || bits.Len32(g.wait) == bits.Len32(most) {
		return ctx, func() {}
	}
	return context.WithDeadline(ctx, received.Add(time.Duration(g.wait)*time.Millisecond))
}

// longestWait is the longest wait of a Forward's checks.
func longestWait(checks []*peerv1.ForwardCheck) uint32 {
	var most uint32
	for _, c := range checks {
		most = max(most, c.WaitMs)
	}
	return most
}
