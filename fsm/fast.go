package fsm

import (
	"github.com/floodgate/floodgate/policy"
	"github.com/floodgate/floodgate/window"
)

// overlay is the leader's fast-mode view: for every state with decisions
// answered but not yet committed, a copy of the committed state with those
// decisions counted. A fast check is decided on it, so checks answered
// before their batch commits still see each other. It lives only on the
// leader and never reaches a snapshot.
type overlay struct {
	// gen changes whenever the overlay is discarded (leadership changed),
	// so late releases of the old generation are ignored.
	gen     uint64
	entries map[string]*overlayState
	// now is the latest time a fast check was decided at; overlay states
	// never see time go back.
	now int64
}

type overlayState struct {
	st window.State
	// pending counts the decisions counted here and not yet committed.
	pending int
}

// FastEval decides a check of p on key at now (the leader's clock) at
// once, on the committed state plus the decisions still on their way to
// the log. The caller replicates a Hit with the returned outcome (unless it
// is policy.Denied, which counts nothing) and time (now, clamped so it
// never goes back), and calls ReleaseFast with the returned generation once
// that hit is applied.
func (s *Shard) FastEval(p *policy.Policy, key string, cost, now int64, elastic bool) (policy.Result, uint64, int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	defer s.noteOverlay()
	now = max(now, s.now, s.ov.now)
	s.ov.now = now
	t := &s.tt
	s.gather(t, p, []byte(key), false)
	var ov [policy.MaxLimits + 1]*overlayState
	for i := 0; i < t.n; i++ {
		id := s.id(t, i)
		o := s.ov.entries[string(id)]
		if o == nil {
			l, _ := limitOf(p, i)
			o = &overlayState{st: cloneState(l, t.states[i])}
			s.ov.entries[string(id)] = o
		}
		ov[i] = o
		t.states[i] = &o.st
	}
	res := p.Evaluate(t.states[:t.n], now, cost, elastic)
	for i := 0; i < t.n; i++ {
		if res.Outcome != policy.Denied {
			ov[i].pending++
		} else if ov[i].pending == 0 {
			delete(s.ov.entries, string(s.id(t, i)))
		}
	}
	return res, s.ov.gen, now
}

// FastEvalSet decides the checks of one atomic set of p at once, as
// FastEval decides one: keys[i] at costs[i], all admitted or none (the
// rule of a strict set, allOrNothing). A key given twice is decided once
// at the sum of its costs and answered alike. hits are what the caller
// replicates, one per distinct key whose outcome counts (a refused set
// counts what its denial counts); each is released with gen.
func (s *Shard) FastEvalSet(p *policy.Policy, keys []string, costs []int64, now int64, elastic bool) (out []policy.Result, hits []Hit, gen uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	defer s.noteOverlay()
	now = max(now, s.now, s.ov.now)
	s.ov.now = now
	at, distinct, cost := distinctKeys(len(keys), func(i, j int) bool { return keys[i] == keys[j] }, func(i int) int64 { return costs[i] })
	type gathered struct {
		ov     [policy.MaxLimits + 1]*overlayState
		ids    [policy.MaxLimits + 1]string
		states [policy.MaxLimits + 1]*window.State
	}
	g := make([]gathered, len(keys))
	out = make([]policy.Result, len(keys))
	n := p.States()
	allOrNothing(p, distinct, cost, out, func(d int) policy.Result {
		// Overlay states live on the heap: they stay put until counted.
		t := &s.tt
		s.gather(t, p, []byte(keys[d]), false)
		for i := 0; i < n; i++ {
			id := string(s.id(t, i))
			o := s.ov.entries[id]
			if o == nil {
				l, _ := limitOf(p, i)
				o = &overlayState{st: cloneState(l, t.states[i])}
				s.ov.entries[id] = o
			}
			g[d].ov[i], g[d].ids[i], g[d].states[i] = o, id, &o.st
		}
		return p.Decide(g[d].states[:n], now, cost[d], elastic)
	}, func(d int) {
		p.Count(g[d].states[:n], now, cost[d], elastic, &out[d])
		for i := 0; i < n; i++ {
			if out[d].Outcome != policy.Denied {
				g[d].ov[i].pending++
			} else if g[d].ov[i].pending == 0 {
				delete(s.ov.entries, g[d].ids[i])
			}
		}
		if out[d].Outcome != policy.Denied {
			hits = append(hits, Hit{Key: keys[d], Policy: p, Cost: cost[d], Time: now, Outcome: out[d].Outcome, Elastic: elastic})
		}
	})
	for i := range keys {
		out[i] = out[at[i]]
	}
	return out, hits, s.ov.gen
}

// ReleaseFast marks a fast decision of generation gen as applied: once a
// state has no decision pending, the committed state says everything and
// its overlay copy is dropped.
func (s *Shard) ReleaseFast(p *policy.Policy, key string, gen uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	defer s.noteOverlay()
	if gen != s.ov.gen {
		return
	}
	s.ids = s.ids[:0]
	for i := 0; i < p.States(); i++ {
		start := len(s.ids)
		l, scope := limitOf(p, i)
		s.ids = appendID(s.ids, []byte(key), scope, l)
		if o := s.ov.entries[string(s.ids[start:])]; o != nil {
			if o.pending--; o.pending <= 0 {
				delete(s.ov.entries, string(s.ids[start:]))
			}
		}
	}
}

// FastPendingOn reports whether a state of one of checks has fast
// decisions answered and not yet committed. A strict check of such a
// state must wait for them to commit: it is decided at apply, on the
// committed state, which does not count them yet (cluster's mixGuard).
// One lock for all: strict checks ask it for every call.
func (s *Shard) FastPendingOn(checks []Check) bool {
	if s.ovLen.Load() == 0 {
		return false // without the lock, which applies hold
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.ov.entries) == 0 {
		return false
	}
	for _, c := range checks {
		s.ids = s.ids[:0]
		for i := 0; i < c.Policy.States(); i++ {
			start := len(s.ids)
			l, scope := limitOf(c.Policy, i)
			s.ids = appendID(s.ids, []byte(c.Key), scope, l)
			if s.ov.entries[string(s.ids[start:])] != nil {
				return true
			}
		}
	}
	return false
}

// noteOverlay publishes the overlay's size, with mu held, after each
// change: FastPendingOn reads it without mu.
func (s *Shard) noteOverlay() { s.ovLen.Store(int64(len(s.ov.entries))) }

// ResetFast discards the overlay: leadership changed, and decisions a
// former leader answered but never committed are lost (the bound on fast
// mode's overshoot).
func (s *Shard) ResetFast() {
	s.mu.Lock()
	defer s.mu.Unlock()
	defer s.noteOverlay()
	s.ov.gen++
	s.ov.entries = map[string]*overlayState{}
}

// mirror counts a strict decision in the overlay copies of its states, if
// the leader holds any (a policy switched from fast to strict), so fast
// checks still in flight see it; stretched as it was decided (elastic).
func (s *Shard) mirror(t *touched, p *policy.Policy, cost int64, outcome policy.Outcome, elastic bool) {
	if len(s.ov.entries) == 0 {
		return
	}
	var (
		states [policy.MaxLimits + 1]*window.State
		scrap  [policy.MaxLimits + 1]window.State
		any    bool
	)
	for i := 0; i < t.n; i++ {
		if o := s.ov.entries[string(s.id(t, i))]; o != nil {
			states[i], any = &o.st, true
		} else {
			states[i] = &scrap[i]
		}
	}
	if any {
		s.ov.now = max(s.ov.now, s.now)
		p.Record(states[:t.n], s.ov.now, cost, outcome, elastic)
	}
}

// cloneState returns a deep copy of st (its buffer included), through the
// canonical encoding.
func cloneState(l *window.Limit, st *window.State) window.State {
	if *st == (window.State{}) {
		return window.State{}
	}
	c, _, err := l.DecodeState(l.AppendState(nil, st))
	if err != nil {
		return window.State{} // cannot happen: the encoding round-trips
	}
	return c
}

// FastPending reports how many states have fast decisions in flight.
func (s *Shard) FastPending() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.ov.entries)
}
