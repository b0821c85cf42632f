package fsm

import (
	"hash/maphash"

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
	// FullSlot: a key's slot would hold more than MaxSlotBytes.
	FullSlot
)

// MaxSlotBytes bounds what the states of one slot may hold, whatever the
// group's bound: a slot moves whole (a join, a leave), its states in one
// export of at most MaxExport, and a slot that could not be exported
// would stay frozen, its checks refused, until its states expire. Every
// key of a colocated policy is in one slot. Three quarters of MaxExport:
// a state's export is never over 9/8 of what it holds (a sliding log's
// timestamps take at most 9 bytes each there, at least 8 in its ring;
// the record's 40 bytes cover the rest), and calls on their way at once
// are judged each with its own checks only (Shard.fits).
const MaxSlotBytes = MaxExport * 3 / 4

// Room is a group's bound (0 in a field: none), or what checks add to
// what it holds: key states, and the bytes they hold (records, their
// identities, the buffers of sliding logs and counters).
type Room struct {
	States int
	Bytes  int64
}

// Call is what Vet knows of a call's sets taken so far: the sliding logs
// they grow (by a hash of their identities), with what was reserved for
// each one's buffer, and the bytes they add in all. A log grown by two
// sets of one call may grow by more than each would grow it alone (the
// second grows the ring the first grew, by a quarter of it), so a log met
// again in a call is reserved up to the most it can ever hold, and no
// more however often it comes back. The zero Call is empty.
type Call struct {
	logs  map[uint64]int64
	bytes int64
}

// vetLog is a sliding log a set grows, and what Vet reserves for its
// buffer (Shard.vetLogs).
type vetLog struct {
	hash uint64
	buf  int64
}

// logSeed hashes identities for Call.logs; a collision only judges a log
// at its most.
var logSeed = maphash.MakeSeed()

// Vet says whether the group may take the checks of one atomic set now (a
// set is taken whole or not at all): it owns every key, and what the
// checks would add to what it holds and to what it has reserved stays
// within most. When it takes them it reserves adds, what they add, until
// the caller's Release once they are written (or failed): a check vetted
// meanwhile, of the same call or another, is judged with them counted.
// call is the call's sets so far (nil for a call of one set).
//
// A check of a key with no state yet adds one per limit of its policy; a
// peek (cost 0) adds none, and neither does a check of a key whose state
// has expired (its record is reused) or has a fast decision on its way to
// the log (counted as held already). In bytes, a check adds at most what
// a new state's record and identity take and what its buffers may grow by
// (policy.Policy.HeapBound: a sliding log by the timestamps it records
// beside those still in its window); a state on its way from a fast
// decision is counted as new. A set's checks of one key count once, at
// the sum of their costs, as the set is applied.
//
// In states the sets of one call are judged exactly, each against what
// the ones before it reserved: not against what they could at most have
// added (nine states a check: a batch of 1,000 new keys into an empty
// group of a bound of 1,000 was refused all but 112).
//
// It is the leader's judgment before it writes, not the state machine's at
// apply: a leader elected meanwhile knows nothing of the old one's
// reservations, so the bound can be passed by what entries in flight
// carry, and every replica applies what the log holds.
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
	fullest, owned := s.fullestSlot(checks)
	if !owned {
		return NotOwned, Room{}
	}
	if most.States <= 0 && most.Bytes <= 0 && s.tab.counts == nil {
		return Take, Room{}
	}
	if most.Bytes <= 0 && s.tab.counts == nil {
		call = nil // only the byte bounds tell logs met again apart
	}
	adds = s.adds(checks, call)
	if v = s.fits(most, adds, fullest, call); v != Take {
		if s.refusalSweep == s.applied {
			return v, Room{} // swept since the last entry: nothing newly expired
		}
		s.refusalSweep = s.applied
		live := s.tab.live
		if s.tab.sweep(s.now, sweepPerRefusal); s.tab.live == live {
			return v, Room{}
		}
		// Freed records may include this set's own expired ones: count again.
		fullest, _ = s.fullestSlot(checks)
		adds = s.adds(checks, call)
		if v = s.fits(most, adds, fullest, call); v != Take {
			return v, Room{}
		}
	}
	if adds != (Room{}) {
		s.reservedStates.Add(int64(adds.States))
		s.reservedBytes.Add(adds.Bytes)
	}
	if call != nil {
		call.bytes += adds.Bytes
		for _, l := range s.vetLogs {
			if call.logs == nil {
				call.logs = make(map[uint64]int64)
			}
			call.logs[l.hash] += l.buf
		}
	}
	return Take, adds
}

// Release gives back what Vet reserved for checks now written, or that
// failed: the sum of the adds of the sets it took.
func (s *Shard) Release(r Room) {
	if r.States != 0 {
		s.reservedStates.Add(-int64(r.States))
	}
	if r.Bytes != 0 {
		s.reservedBytes.Add(-r.Bytes)
	}
}

// reserved is what Vet holds in reserve now.
func (s *Shard) reserved() Room {
	return Room{States: int(s.reservedStates.Load()), Bytes: s.reservedBytes.Load()}
}

// fullestSlot returns what the fullest of the checks' slots holds (0
// without slots), and whether the group owns every one; s.mu is held.
func (s *Shard) fullestSlot(checks []Check) (fullest int64, owned bool) {
	if s.own == nil {
		return 0, true
	}
	c := s.tab.counts
	for i := range checks {
		x := s.own.slotOf(checks[i].Key)
		if s.own.state[x] != slotOwned {
			return 0, false
		}
		if c != nil {
			fullest = max(fullest, c.bytes[x])
		}
	}
	return fullest, true
}

// fits judges adds beyond what the group holds and has reserved against
// most, and against MaxSlotBytes in the fullest of the checks' slots,
// with what the call's earlier sets add as if it were that slot's (a
// call of many checks of one slot must not pass it by what it adds
// itself). Other calls' reservations are not counted against a slot: a
// call adding to other slots would then refuse this one's checks; calls
// on their way together can pass a slot's bound by what they carry,
// which MaxSlotBytes leaves room for. s.mu is held.
func (s *Shard) fits(most, adds Room, fullest int64, call *Call) Verdict {
	if adds.Bytes > 0 && s.tab.counts != nil {
		before := int64(0)
		if call != nil {
			before = call.bytes
		}
		if fullest+before+adds.Bytes > MaxSlotBytes {
			return FullSlot
		}
	}
	reserved := s.reserved()
	if most.Bytes > 0 && adds.Bytes > 0 && s.tab.bytes+reserved.Bytes+adds.Bytes > most.Bytes {
		return FullBytes
	}
	// Fast decisions not yet replicated count as held: their states are on
	// their way (a few per decision; --fast-max-pending bounds their cost).
	// Counted without a lookup first: most groups are far from the bound.
	if most.States <= 0 || adds.States == 0 || s.tab.held()+len(s.ov.entries)+reserved.States+adds.States <= most.States {
		return Take
	}
	if s.held()+reserved.States+adds.States > most.States {
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

// adds counts what checks would add (a peek adds nothing); with a call,
// it lists the sliding logs they grow, and what it reserves for each, in
// s.vetLogs. s.mu is held.
func (s *Shard) adds(checks []Check, call *Call) Room {
	var adds Room
	s.vetLogs = s.vetLogs[:0]
	// A set counts each key once, at the sum of its costs, as evalSet
	// applies it (distinctKeys, there): judged one check at a time, a
	// held log with room in its ring took 60 checks of 500 as adding
	// nothing. Summed here without distinctKeys' slices: no allocation
	// on the Allow path.
next:
	for i := range checks {
		for j := range i {
			if checks[j].Key == checks[i].Key {
				continue next // counted with its first check
			}
		}
		cost := max(checks[i].Cost, 0)
		for j := i + 1; j < len(checks); j++ {
			if checks[j].Key == checks[i].Key {
				cost = min(cost+max(checks[j].Cost, 0), maxCost)
			}
		}
		if cost > 0 {
			s.add(&adds, checks[i].Policy, checks[i].Key, cost, call)
		}
	}
	return adds
}

// add adds to r what a check of p on key at cost would add: the states
// that have neither a record nor a fast decision on their way to one, and
// the bytes they and the stored ones may grow by; s.mu is held.
func (s *Shard) add(r *Room, p *policy.Policy, key string, cost int64, call *Call) {
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
		held := 0 // the buffer's bytes, counted in what the group holds
		if stored {
			held = l.HeapBytes(st)
		}
		buf := int64(max(p.HeapBound(i, st, s.now, cost)-held, 0))
		if call != nil && l.Algorithm == window.SlidingLog {
			h := maphash.Bytes(logSeed, s.ids)
			if before, again := call.logs[h]; again {
				// Up to the most it can hold, counting what the call's
				// earlier sets reserved for it.
				buf = max(int64(p.HeapMax(i)-held)-before, 0)
			}
			s.vetLogs = append(s.vetLogs, vetLog{hash: h, buf: buf})
		}
		r.Bytes += buf
		if !stored {
			r.Bytes += recordBytes + int64(len(s.ids))
		}
	}
}
