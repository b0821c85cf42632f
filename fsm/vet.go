package fsm

import (
	"github.com/floodgate/floodgate/policy"
	"github.com/floodgate/floodgate/window"
)

// Verdict is a leader's judgment of whether its group may take a set of
// checks now (Vet).
type Verdict uint8

const (
	// Take: the group owns every key, and what the checks would add fits
	// under the bound.
	Take Verdict = iota
	// NotOwned: a key's slot is not the group's (any more, or yet).
	NotOwned
	// Full: the checks would add key states beyond the bound.
	Full
	// FullBytes: the states the checks would add or grow would hold more
	// bytes than the bound.
	FullBytes
)

// Room is a group's bound (0 in a field: none), or what checks add to
// what it holds: key states, and the bytes they hold (records, their
// identities, the buffers of sliding logs and counters).
type Room struct {
	States int
	Bytes  int64
}

// Call is what the sets of one call that Vet took so far add: their
// states and bytes, and the sliding logs they grow. A log grown by two
// sets of one call may grow by more than each would grow it alone (the
// second grows the ring the first grew, by a quarter of it), so a log
// met again in a call is judged at the most it can ever hold.
type Call struct {
	Room
	logs map[string]struct{}
}

// Vet says whether the group may take the checks of one atomic set now (a
// set is taken whole or not at all): it owns every key, and what the
// checks would add to what it holds, and to what the call's sets taken
// before add (call, which Vet adds this set's to when it takes it; nil
// for a call of one set), stays within most. A check of a key with no
// state yet adds one per limit of its policy; a peek (cost 0) adds none,
// and neither does a check of a key whose state has expired (its record
// is reused) or has a fast decision on its way to the log (counted as
// held already). In bytes, a check adds at most what a new state's record
// and identity take and what its buffers may grow by
// (policy.Policy.HeapBound: a sliding log by the timestamps it records);
// a state on its way from a fast decision is counted as new. adds is
// what this set adds, when taken.
//
// The call's sets are judged against what the sets before them add
// exactly, in states: not against what they could at most have added
// (nine states a check: a batch of 1,000 new keys into an empty group of
// a bound of 1,000 was refused all but 112).
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
func (s *Shard) Vet(checks []Check, most Room, call *Call) (v Verdict, adds Room) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.own != nil {
		for i := range checks {
			if s.own.state[s.own.slotOf(checks[i].Key)] != slotOwned {
				return NotOwned, Room{}
			}
		}
	}
	if most.States <= 0 && most.Bytes <= 0 {
		return Take, Room{}
	}
	var adding Room
	if call != nil {
		adding = call.Room
	}
	track := call != nil && most.Bytes > 0
	adds = s.adds(checks, call, track)
	if v = s.fits(most, adding, adds); v != Take {
		if s.refusalSweep == s.applied {
			return v, Room{} // swept since the last entry: nothing newly expired
		}
		s.refusalSweep = s.applied
		live := s.tab.live
		if s.tab.sweep(s.now, sweepPerRefusal); s.tab.live == live {
			return v, Room{}
		}
		// Freed records may include this set's own expired ones: count again.
		adds = s.adds(checks, call, track)
		if v = s.fits(most, adding, adds); v != Take {
			return v, Room{}
		}
	}
	if call != nil {
		call.States += adds.States
		call.Bytes += adds.Bytes
		for _, id := range s.vetLogs {
			if call.logs == nil {
				call.logs = make(map[string]struct{})
			}
			call.logs[id] = struct{}{}
		}
	}
	return Take, adds
}

// fits judges adds beyond what the group holds and adding against most;
// s.mu is held.
func (s *Shard) fits(most, adding, adds Room) Verdict {
	if most.Bytes > 0 && adds.Bytes > 0 && s.tab.bytes+adding.Bytes+adds.Bytes > most.Bytes {
		return FullBytes
	}
	// Fast decisions not yet replicated count as held: their states are on
	// their way (a few per decision; --fast-max-pending bounds their cost).
	// Counted without a lookup first: most groups are far from the bound.
	if most.States <= 0 || adds.States == 0 || s.tab.held()+len(s.ov.entries)+adding.States+adds.States <= most.States {
		return Take
	}
	if s.held()+adding.States+adds.States > most.States {
		return Full
	}
	return Take
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

// adds counts what checks would add (a peek adds nothing); with track,
// it lists the sliding logs they grow in s.vetLogs. s.mu is held.
func (s *Shard) adds(checks []Check, call *Call, track bool) Room {
	var adds Room
	s.vetLogs = s.vetLogs[:0]
	for i := range checks {
		if checks[i].Cost > 0 {
			s.add(&adds, checks[i].Policy, checks[i].Key, checks[i].Cost, call, track)
		}
	}
	return adds
}

// add adds to r what a check of p on key at cost would add: the states
// that have neither a record nor a fast decision on their way to one, and
// the bytes they and the stored ones may grow by; s.mu is held.
func (s *Shard) add(r *Room, p *policy.Policy, key string, cost int64, call *Call, track bool) {
	k := []byte(key)
	for i := range p.States() {
		l, scope := limitOf(p, i)
		s.ids = appendID(s.ids[:0], k, scope, l)
		// st is the state the check grows; a new record's bytes are
		// counted unless stored. An expired record is reused (no new
		// state), but a later set's refusal sweep may free it first, so
		// its bytes are judged as a new record's (l's expiry is never
		// after the record's own: at worst one more is judged so).
		st, stored := &window.State{}, false
		if n, ok := s.tab.lookup(s.ids); ok {
			if rec := s.tab.rec(n); l.Expiry(&rec.st) > s.now {
				st, stored = &rec.st, true
			}
		} else if o := s.ov.entries[string(s.ids)]; o != nil {
			st = &o.st
		} else {
			r.States++
		}
		grown := p.HeapBound(i, st, cost)
		if l.Algorithm == window.SlidingLog && call != nil {
			if _, again := call.logs[string(s.ids)]; again {
				grown = max(grown, p.HeapMax(i))
			}
			if track {
				s.vetLogs = append(s.vetLogs, string(s.ids))
			}
		}
		if stored {
			r.Bytes += int64(max(grown-l.HeapBytes(st), 0))
		} else {
			r.Bytes += recordBytes + int64(len(s.ids)) + int64(grown)
		}
	}
}
