package cluster

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/hashicorp/raft"

	"github.com/floodgate/floodgate/fsm"
	"github.com/floodgate/floodgate/policy"
)

// errTakeStrict is a fast lane's refusal of a check whose states have
// strict checks in flight: nothing was counted, and the check goes
// through the log as a strict one (submit).
var errTakeStrict = errors.New("strict checks of the same states in flight")

// mixGuard keeps a shard leader's strict and fast decisions on the same
// states from missing each other. They meet when a policy's consistency
// changes: for a while the nodes that take checks hold either version, and
// checks of one key under both reach the leader. A strict check is decided
// at apply, on the committed state, which lacks the fast decisions
// answered and not yet flushed; a fast decision is made on that state
// plus the overlay, which lacks the strict checks written and not yet
// applied. Each admitted up to the whole limit on top of the other (a
// limit of 50 admitted 100 under a mix of both). So a strict check waits
// for the fast decisions pending on its states to commit before it is
// written (settle), and a fast check of a key with strict checks in
// flight is written as a strict one (errTakeStrict). Checked and decided
// under mu, so one of the two always sees the other.
type mixGuard struct {
	mu sync.Mutex
	// fastSeen: this lane has decided a fast check. Until then no state
	// has fast decisions pending, and strict checks only count themselves
	// in anon (no allocation on a shard that only sees strict checks);
	// while anon is not zero every fast check is written as strict.
	fastSeen bool
	anon     int
	// strict counts the strict checks in flight by policy name and key.
	strict map[mixKey]int
}

// mixKey is the map key of a check (no allocation, unlike a joined
// string).
type mixKey struct{ policy, key string }

// holdStrict records checks as in flight, to be written through the log,
// and reports whether a state of one has fast decisions pending.
// releaseStrict, given the same checks and anon, undoes it once they are
// decided. Values, not a closure: every strict call pays for this.
func (f *fastLane) holdStrict(checks []fsm.Check) (anon, pending bool) {
	g := &f.mix
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.fastSeen {
		g.anon += len(checks)
		return true, false
	}
	if g.strict == nil {
		g.strict = map[mixKey]int{}
	}
	for _, c := range checks {
		g.strict[mixKey{c.Policy.Name, c.Key}]++
	}
	return false, f.shard.FastPendingOn(checks)
}

// releaseStrict forgets checks recorded by holdStrict.
func (f *fastLane) releaseStrict(checks []fsm.Check, anon bool) {
	g := &f.mix
	g.mu.Lock()
	defer g.mu.Unlock()
	if anon {
		g.anon -= len(checks)
		return
	}
	for _, c := range checks {
		k := mixKey{c.Policy.Name, c.Key}
		if g.strict[k]--; g.strict[k] <= 0 {
			delete(g.strict, k)
		}
	}
}

// fastAllowed reports, with g.mu held, whether fast checks of p on keys
// may be decided from memory: no strict check of theirs is in flight.
func (g *mixGuard) fastAllowed(p *policy.Policy, keys []string) bool {
	g.fastSeen = true
	if g.anon > 0 {
		return false
	}
	for _, k := range keys {
		if g.strict[mixKey{p.Name, k}] > 0 {
			return false
		}
	}
	return true
}

// settle waits until no state of checks has fast decisions pending,
// flushing them. New fast decisions on them are not made meanwhile
// (holdStrict recorded the checks). Errors mean nothing was written.
func (f *fastLane) settle(ctx context.Context, checks []fsm.Check) error {
	for {
		if !f.shard.FastPendingOn(checks) {
			return nil
		}
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("%w: fast decisions of the same keys pending: %w", ErrNoLeader, err)
		}
		// A flush that failed while this replica still leads put its hits
		// back; one that lost the leadership discarded the overlay, or
		// will (dropStale).
		if f.drain() {
			if f.r.State() != raft.Leader {
				return f.notLeader()
			}
			time.Sleep(time.Millisecond)
		}
	}
}

// submitStrict writes checks through the log (the batcher), once the fast
// decisions pending on their states have committed, and answers them.
func (r *replica) submitStrict(ctx context.Context, checks []fsm.Check, late *lateDecisions) ([]policy.Result, error) {
	return submitStrict(ctx, r.fast, r.batcher, checks, late)
}

// submitStrict is replica.submitStrict on lane f and batcher b. The checks
// stay recorded until they are decided, not only until their caller gives
// up: written and not yet applied, they must still turn fast checks of
// their keys into strict ones. A request its caller gave up on undecided
// is added to late (when not nil), for what the call holds besides.
func submitStrict(ctx context.Context, f *fastLane, b *batcher, checks []fsm.Check, late *lateDecisions) ([]policy.Result, error) {
	anon, pending := f.holdStrict(checks)
	if pending {
		if err := f.settle(ctx, checks); err != nil {
			f.releaseStrict(checks, anon)
			return nil, err
		}
	}
	res, undecided, err := b.submitReq(ctx, checks)
	if undecided == nil {
		f.releaseStrict(checks, anon)
		return res, err
	}
	go func() {
		b.undecided(undecided)
		f.releaseStrict(checks, anon)
	}()
	if late != nil {
		late.b = b
		late.reqs = append(late.reqs, undecided)
	}
	return res, err
}

// lateDecisions are the batcher requests of one call whose caller gave up
// before they were decided (written and not yet applied, or dropped later):
// what the call holds for them, the key states Vet reserved, is let go only
// once they are. Let go at once, later callers were vetted against states
// not counting them, and a slow commit's backlog went past the bound.
type lateDecisions struct {
	b    *batcher
	reqs []*request
}

// release lets go of taken, what Vet reserved in s for the call, once
// every late request is decided: at once when none is (the common case,
// with nothing allocated).
func (l *lateDecisions) release(s *fsm.Shard, taken fsm.Room) {
	if len(l.reqs) == 0 {
		s.Release(taken)
		return
	}
	b, reqs := l.b, l.reqs
	go func() {
		for _, req := range reqs {
			b.undecided(req)
		}
		s.Release(taken)
	}()
}
