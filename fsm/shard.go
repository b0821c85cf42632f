package fsm

import (
	"fmt"
	"sync"

	"github.com/hashicorp/raft"

	"github.com/floodgate/floodgate/policy"
	"github.com/floodgate/floodgate/window"
)

// Sweep budgets: how many records the expiry sweeper looks at per applied
// entry and check, and at least per tick. Enough to reclaim keys faster
// than checks create them, small enough to keep applies short.
const (
	sweepPerEntry = 16
	sweepPerCheck = 2
	sweepPerTick  = 1024
)

// Shard is the state machine of one shard's Raft group: the state of every
// limit of every key of the shard. It never reads the clock: time is the
// leader's timestamp in each entry, clamped so it never goes backwards.
type Shard struct {
	mu  sync.Mutex
	tab *table
	now int64  // log time: the latest timestamp applied
	ids []byte // scratch: the identities of the current check's limits
}

// NewShard returns an empty shard state machine.
func NewShard() *Shard {
	return &Shard{tab: newTable()}
}

// Apply implements raft.FSM. For a cmdAllow entry it returns
// []policy.Result, one per check in order; for a corrupt entry an error
// (every replica reaches the same error, so they stay identical).
func (s *Shard) Apply(l *raft.Log) interface{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.apply(l)
}

// ApplyBatch implements raft.BatchingFSM, taking the lock once per batch.
func (s *Shard) ApplyBatch(logs []*raft.Log) []interface{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]interface{}, len(logs))
	for i, l := range logs {
		out[i] = s.apply(l)
	}
	return out
}

func (s *Shard) apply(l *raft.Log) interface{} {
	if l.Type != raft.LogCommand || len(l.Data) == 0 {
		return nil
	}
	switch l.Data[0] {
	case cmdAllow:
		e, err := decodeAllow(l.Data[1:])
		if err != nil {
			return fmt.Errorf("entry %d: %w", l.Index, err)
		}
		s.advance(e.ts)
		out := make([]policy.Result, len(e.checks))
		for i := range e.checks {
			c := &e.checks[i]
			out[i] = s.eval(&e.policies[c.policy], c.key, c.cost)
		}
		s.tab.sweep(s.now, sweepPerEntry+sweepPerCheck*len(e.checks))
		return out
	case cmdTick:
		ts, err := decodeTick(l.Data[1:])
		if err != nil {
			return fmt.Errorf("entry %d: %w", l.Index, err)
		}
		s.advance(ts)
		s.tab.sweep(s.now, max(sweepPerTick, int(s.tab.used)/32))
		return nil
	}
	return fmt.Errorf("entry %d: %w: unknown command type %d", l.Index, ErrCorrupt, l.Data[0])
}

// advance moves log time forward to ts; a new leader with a clock behind
// the old one's cannot move it back.
func (s *Shard) advance(ts int64) {
	if ts > s.now {
		s.now = ts
	}
}

// eval answers one check of the entry being applied.
func (s *Shard) eval(p *policy.Policy, key []byte, cost int64) policy.Result {
	n := len(p.Limits)
	var (
		states [policy.MaxLimits]*window.State
		fresh  [policy.MaxLimits]window.State
		recs   [policy.MaxLimits]uint32
		found  [policy.MaxLimits]bool
		ends   [policy.MaxLimits + 1]int
	)
	s.ids = s.ids[:0]
	for i := 0; i < n; i++ {
		s.ids = appendID(s.ids, key, p.Name, &p.Limits[i])
		ends[i+1] = len(s.ids)
		if rn, ok := s.tab.lookup(s.ids[ends[i]:ends[i+1]]); ok {
			r := s.tab.rec(rn)
			if r.exp <= s.now {
				// Past its expiry a state means nothing: start fresh (and
				// let go of its buffer) rather than rely on it aging well.
				r.st = window.State{}
			}
			states[i], recs[i], found[i] = &r.st, rn, true
		} else {
			states[i] = &fresh[i]
		}
	}
	res := p.Evaluate(states[:n], s.now, cost)
	if !res.Allowed || cost == 0 {
		return res
	}
	for i := 0; i < n; i++ {
		if !found[i] {
			recs[i] = s.tab.insert(s.ids[ends[i]:ends[i+1]])
			s.tab.rec(recs[i]).st = fresh[i]
		}
		r := s.tab.rec(recs[i])
		r.exp = p.Limits[i].Expiry(&r.st)
	}
	return res
}

// Stats describes the shard's state.
type Stats struct {
	// States is the number of limit states held (one per key and limit).
	States int
	// Now is the log time of the latest applied entry, Unix ns.
	Now int64
}

// Stats reports the shard's size and log time.
func (s *Shard) Stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	return Stats{States: s.tab.live, Now: s.now}
}
