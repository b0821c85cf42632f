package fsm

import "github.com/floodgate/floodgate/policy"

// Verdict is a leader's judgment of whether its group may take a set of
// checks now (Vet).
type Verdict uint8

const (
	// Take: the group owns every key, and the states the checks would add
	// fit under the bound.
	Take Verdict = iota
	// NotOwned: a key's slot is not the group's (any more, or yet).
	NotOwned
	// Full: the checks would add key states beyond the bound.
	Full
)

// Vet says whether the group may take the checks of one atomic set now (a
// set is taken whole or not at all): it owns every key, and the states the
// checks would add to those it holds stay within maxStates (0: no bound).
// A check of a key with no state yet adds one per limit of its policy; a
// peek (cost 0) adds none, and neither does a check of a key whose state
// has expired (its record is reused) or has a fast decision on its way to
// the log (counted as held already).
//
// adding is what the sets of the same call taken before this one add
// (their adds, summed); adds is this set's, when taken: exact, so that a
// call's later sets are not judged against what its earlier ones could at
// most have added (nine states a check: a batch of 1,000 new keys into an
// empty group of a bound of 1,000 was refused all but 112).
//
// It is the leader's judgment before it writes, not the state machine's at
// apply: entries in flight may add states meanwhile, so the bound can be
// passed by what they carry, and every replica applies what the log holds.
//
// Before it answers Full it sweeps a few records for expired states, once
// per entry applied: the sweeper's pace follows what entries add, and
// refused checks add nothing, so without this a group full of expired
// states under traffic would wait for its few records per entry. Freeing
// an expired record changes memory, never an answer or a snapshot, so any
// replica may do it outside Apply (a node vets before it knows whether it
// still leads).
func (s *Shard) Vet(checks []Check, maxStates, adding int) (v Verdict, adds int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.own != nil {
		for i := range checks {
			if s.own.state[s.own.slotOf(checks[i].Key)] != slotOwned {
				return NotOwned, 0
			}
		}
	}
	if maxStates <= 0 {
		return Take, 0
	}
	adds = s.adds(checks)
	// Fast decisions not yet replicated count as held: their states are on
	// their way (a few per decision; --fast-max-pending bounds their cost).
	// Counted without a lookup first: most groups are far from the bound.
	if adds == 0 || s.tab.held()+len(s.ov.entries)+adding+adds <= maxStates {
		return Take, adds
	}
	held := s.held()
	if held+adding+adds > maxStates {
		if s.refusalSweep == s.applied {
			return Full, 0 // swept since the last entry: nothing newly expired
		}
		s.refusalSweep = s.applied
		live := s.tab.live
		if s.tab.sweep(s.now, sweepPerRefusal); s.tab.live == live {
			return Full, 0
		}
		// Freed records may include this set's own expired ones: count again.
		if adds = s.adds(checks); adds > 0 && s.held()+adding+adds > maxStates {
			return Full, 0
		}
	}
	return Take, adds
}

// held counts the states the group holds, fast decisions on their way to
// the log included; s.mu is held.
func (s *Shard) held() int {
	held := s.tab.held()
	for id := range s.ov.entries {
		if _, ok := s.tab.lookup([]byte(id)); !ok {
			held++
		}
	}
	return held
}

// adds counts the states checks would add (a peek adds none); s.mu is
// held.
func (s *Shard) adds(checks []Check) int {
	adds := 0
	for i := range checks {
		if checks[i].Cost > 0 {
			adds += s.missing(checks[i].Policy, checks[i].Key)
		}
	}
	return adds
}

// missing counts the states of a check of p on key that have neither a
// record nor a fast decision on their way to one; s.mu is held.
func (s *Shard) missing(p *policy.Policy, key string) int {
	n := 0
	k := []byte(key)
	for i := range p.States() {
		l, scope := limitOf(p, i)
		s.ids = appendID(s.ids[:0], k, scope, l)
		if _, ok := s.tab.lookup(s.ids); !ok && s.ov.entries[string(s.ids)] == nil {
			n++
		}
	}
	return n
}
