package fsm

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/floodgate/floodgate/policy"
	"github.com/floodgate/floodgate/window"
)

// Vet takes a set of checks when the group owns every key and the states
// they would add fit under the bound: checks of keys it holds always fit,
// a peek adds nothing, a policy adds one state per limit (its reduced
// limit included), a set is judged whole, and 0 is no bound.
func TestVet(t *testing.T) {
	const max = 200 // far below len(checks)*(MaxLimits+1) + live: the slow path is taken
	hour := window.Limit{Algorithm: window.FixedWindow, Limit: 10, Window: 3600 * sec}
	one := inline(hour)
	two := &policy.Policy{Name: "two", Limits: []policy.Limit{{Limit: hour}, {Limit: window.Limit{Algorithm: window.FixedWindow, Limit: 100, Window: 86400 * sec}}}}
	s := NewShard()
	s.Apply(allowLog(1, 1000*sec, keyChecks("held", max-1, one)...))
	if got := s.Stats().States; got != max-1 {
		t.Fatalf("%d states, want %d", got, max-1)
	}
	newKey := func(k string) Check { return Check{Key: k, Policy: one, Cost: 1} }
	cases := []struct {
		name   string
		checks []Check
		max    int
		want   Verdict
	}{
		{"a held key", []Check{newKey("held-3")}, max, Take},
		{"one new key: the last room", []Check{newKey("new-1")}, max, Take},
		{"two new keys", []Check{newKey("new-1"), newKey("new-2")}, max, Full},
		{"a new key of two limits", []Check{{Key: "new-1", Policy: two, Cost: 1}}, max, Full},
		{"a held key under a new policy", []Check{{Key: "held-3", Policy: two, Cost: 1}}, max, Full},
		{"a peek of a new key", []Check{{Key: "new-1", Policy: two, Cost: 0}}, max, Take},
		{"held keys and a new one", []Check{newKey("held-1"), newKey("held-2"), newKey("new-1")}, max, Take},
		{"no bound", []Check{newKey("new-1"), newKey("new-2")}, 0, Take},
		{"room for a batch", []Check{newKey("new-1"), newKey("new-2")}, max + 1, Take},
	}
	for _, c := range cases {
		if got := judge(s, c.checks, Room{States: c.max}); got != c.want {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
	// The sets of one call taken before count: the last room goes once.
	call := &Call{}
	v, adds := s.Vet([]Check{newKey("new-1")}, Room{States: max}, call)
	if v != Take || adds.States != 1 {
		t.Fatalf("the first new key of a call: %v adding %+v", v, adds)
	}
	if v, _ := s.Vet([]Check{newKey("new-2")}, Room{States: max}, call); v != Full {
		t.Errorf("a second new key in the same call: %v, want Full", v)
	}
	if v, _ := s.Vet([]Check{newKey("held-5")}, Room{States: max}, call); v != Take {
		t.Errorf("a held key after it: %v, want Take", v)
	}
	if s.Stats().States != max-1 {
		t.Fatal("Vet changed the state")
	}
	// Until released, what the call took is reserved for any other call.
	if v := judge(s, []Check{newKey("new-3")}, Room{States: max}); v != Full {
		t.Errorf("another call's new key while the first is on its way: %v, want Full", v)
	}
	s.Release(adds)
	if v := judge(s, []Check{newKey("new-3")}, Room{States: max}); v != Take {
		t.Errorf("another call's new key once the first was released: %v, want Take", v)
	}
}

// judge is Vet of checks as a call of their own, written at once: what it
// reserved is released.
func judge(s *Shard, checks []Check, most Room) Verdict {
	v, adds := s.Vet(checks, most, nil)
	s.Release(adds)
	return v
}

// A key whose state has expired reuses its record, so it is taken at the
// bound. A key never seen is taken once Vet's own sweep frees an expired
// record (refused checks write no entry, so the sweeper's pace per entry
// would not free one); while every state is live it is refused, and the
// sweep changes no answer.
func TestVetExpiredStates(t *testing.T) {
	const max = 50
	minute := inline(window.Limit{Algorithm: window.FixedWindow, Limit: 10, Window: 60 * sec})
	s := NewShard()
	s.Apply(allowLog(1, 1000*sec, keyChecks("old", max, minute)...))
	if got := judge(s, []Check{{Key: "never", Policy: minute, Cost: 1}}, Room{States: max}); got != Full {
		t.Fatalf("a key never seen while every state is live: %v, want Full", got)
	}
	if got := s.Stats().States; got != max {
		t.Fatalf("Vet freed live states: %d left", got)
	}
	later := allowLog(2, 1200*sec, Check{Key: "old-0", Policy: minute, Cost: 1}) // log time moves past every window
	s.Apply(later)
	// Expired states the sweeper has not reached yet: its pace per entry
	// looks at a few records, and old-0's entry added none.
	if got := s.Stats().States; got <= sweepPerEntry || got >= max+1 {
		t.Fatalf("%d states after the entry, want the expired ones mostly still held", got)
	}
	held := s.Stats().States
	expired := ""
	for i := max - 1; i > 0 && expired == ""; i-- {
		k := fmt.Sprintf("old-%d", i)
		s.mu.Lock()
		if s.adds([]Check{{Key: k, Policy: minute, Cost: 1}}, nil).States == 0 {
			expired = k
		}
		s.mu.Unlock()
	}
	if expired == "" {
		t.Fatal("every expired state was swept at once")
	}
	if got := judge(s, []Check{{Key: expired, Policy: minute, Cost: 1}}, Room{States: held}); got != Take {
		t.Errorf("an expired key: %v, want Take", got)
	}
	if got := s.Stats().States; got != held {
		t.Fatalf("a Take verdict swept: %d states, want %d", got, held)
	}
	before := snapshotBytes(t, s)
	if got := judge(s, []Check{{Key: "never", Policy: minute, Cost: 1}}, Room{States: held}); got != Take {
		t.Errorf("a key never seen, once Vet swept expired states: %v, want Take", got)
	}
	if got := s.Stats().States; got >= held {
		t.Errorf("Vet freed nothing: %d states", got)
	}
	if !bytes.Equal(snapshotBytes(t, s), before) {
		t.Error("the sweep changed the replicated state: the snapshots differ")
	}
	// Ticks sweep what is left.
	for i := uint64(3); s.Stats().States > 1 && i < 1000; i++ {
		s.Apply(&raft.Log{Index: i, Type: raft.LogCommand, Data: EncodeTick(1200*sec + int64(i))})
	}
	if got := s.Stats().States; got > 1 {
		t.Fatalf("%d states left after the sweeps", got)
	}
}

// Vet refuses a set of which a key's slot is not the group's, before it
// looks at room.
func TestVetOwnership(t *testing.T) {
	g := newGroup(t, 1, 4, 0, 1)
	mine, theirs := keyIn(0, 4, 1), keyIn(3, 4, 1)
	p := inline(window.Limit{Algorithm: window.FixedWindow, Limit: 10, Window: 60 * sec})
	if got := judge(g.s, []Check{{Key: mine, Policy: p, Cost: 1}}, Room{}); got != Take {
		t.Errorf("an owned key: %v", got)
	}
	if got := judge(g.s, []Check{{Key: mine, Policy: p, Cost: 1}, {Key: theirs, Policy: p, Cost: 1}}, Room{}); got != NotOwned {
		t.Errorf("a set with another group's key: %v", got)
	}
}

// A fast decision not yet replicated holds its state already: a second
// check of its key is taken at the bound, and the state counts against it.
func TestVetCountsFastDecisions(t *testing.T) {
	p := &policy.Policy{Name: "f", Consistency: policy.Fast, Limits: []policy.Limit{{Limit: window.Limit{Algorithm: window.FixedWindow, Limit: 10, Window: 3600 * sec}}}}
	s := NewShard()
	s.Apply(allowLog(1, 1000*sec, Check{Key: "held", Policy: p, Cost: 1}))
	if res, _, _ := s.FastEval(p, "pending", 1, 1001*sec, false); !res.Allowed {
		t.Fatal("fast check refused")
	}
	if got := judge(s, []Check{{Key: "pending", Policy: p, Cost: 1}}, Room{States: 2}); got != Take {
		t.Errorf("the pending key at the bound: %v, want Take", got)
	}
	if got := judge(s, []Check{{Key: "other", Policy: p, Cost: 1}}, Room{States: 2}); got != Full {
		t.Errorf("a new key with the pending one counted: %v, want Full", got)
	}
}

// Vet sweeps before a refusal at most once per entry applied, so a flood of
// refused checks cannot keep the sweeper (and the lock applies need) busy:
// a second refusal before the next entry frees nothing, one after it sweeps
// again.
func TestVetSweepsOncePerEntry(t *testing.T) {
	const max = 200
	minute := inline(window.Limit{Algorithm: window.FixedWindow, Limit: 10, Window: 60 * sec})
	s := NewShard()
	s.Apply(allowLog(1, 1000*sec, keyChecks("old", max, minute)...))
	s.Apply(allowLog(2, 1200*sec, Check{Key: "old-0", Policy: minute, Cost: 1})) // every other state expired
	flood := keyChecks("new", 100, minute)
	held := s.Stats().States
	if got := judge(s, flood, Room{States: held}); got != Full {
		t.Fatalf("100 new keys with %d states held at a bound of %d: %v, want Full", held, held, got)
	}
	first := s.Stats().States
	if freed := held - first; freed <= 0 || freed > sweepPerRefusal {
		t.Fatalf("the first refusal swept %d records free, want 1 to %d", freed, sweepPerRefusal)
	}
	for range 10 {
		if got := judge(s, flood, Room{States: held}); got != Full {
			t.Fatalf("a refusal again: %v, want Full", got)
		}
	}
	if got := s.Stats().States; got != first {
		t.Fatalf("refusals before the next entry swept %d more", first-got)
	}
	s.Apply(allowLog(3, 1201*sec, Check{Key: "old-0", Policy: minute, Cost: 1}))
	if got := judge(s, flood, Room{States: held}); got != Take {
		t.Errorf("after an entry, with its own and Vet's sweep: %v, want Take", got)
	}
}

// keyChecks returns n checks of cost 1 under p, of keys prefix-0 onwards.
func keyChecks(prefix string, n int, p *policy.Policy) []Check {
	checks := make([]Check, n)
	for i := range checks {
		checks[i] = Check{Key: fmt.Sprintf("%s-%d", prefix, i), Policy: p, Cost: 1}
	}
	return checks
}

// A call's sets are judged against what the sets before them add, exactly:
// far from the bound too, where Vet counts no held state. A batch of 1,000
// new keys into an empty group of a bound of 1,000 takes them all, and the
// next is refused (each set once answered its upper bound, nine states a
// check, and the call's later sets were refused against those: 112 of
// 1,000 were taken).
func TestVetAddsExactlyAcrossACall(t *testing.T) {
	const max = 1000
	one := inline(window.Limit{Algorithm: window.FixedWindow, Limit: 10, Window: 3600 * sec})
	s := NewShard()
	call := &Call{}
	for i := range max {
		v, adds := s.Vet([]Check{{Key: fmt.Sprintf("k%d", i), Policy: one, Cost: 1}}, Room{States: max}, call)
		if v != Take || adds.States != 1 {
			t.Fatalf("new key %d of %d: %v adding %+v, want Take adding 1", i+1, max, v, adds)
		}
	}
	if v, _ := s.Vet([]Check{{Key: "one-more", Policy: one, Cost: 1}}, Room{States: max}, call); v != Full {
		t.Fatalf("key %d of a bound of %d: %v, want Full", max+1, max, v)
	}
	// A held key adds nothing, wherever it comes in a call.
	s.Apply(allowLog(1, 1000*sec, Check{Key: "k0", Policy: one, Cost: 1}))
	if v, adds := s.Vet([]Check{{Key: "k0", Policy: one, Cost: 1}}, Room{States: max}, call); v != Take || adds != (Room{}) {
		t.Fatalf("a held key: %v adding %+v", v, adds)
	}
}

// The bytes a set would add are judged as its states are: a new key adds
// its record, identity and what its buffer may grow to; a held key what
// its buffer may grow by; a peek nothing; a call's sets, and other calls
// on their way, are judged with what Vet reserved for them.
func TestVetBytes(t *testing.T) {
	log := inline(window.Limit{Algorithm: window.SlidingLog, Limit: 1000, Window: 60 * sec})
	s := NewShard()
	s.Apply(allowLog(1, 1000*sec, Check{Key: "held", Policy: log, Cost: 800}))
	held := s.Stats().Bytes
	most := Room{Bytes: held + 12000}
	call := &Call{}
	v, adds := s.Vet([]Check{{Key: "new", Policy: log, Cost: 1000}}, most, call)
	if v != Take || adds.States != 1 || adds.Bytes < 8000 {
		t.Fatalf("a new log of 1,000: %v adding %+v, want Take adding a state and 8,000 bytes or more", v, adds)
	}
	taken := adds
	if v, _ := s.Vet([]Check{{Key: "new-2", Policy: log, Cost: 1000}}, most, call); v != FullBytes {
		t.Fatalf("a second one in the same call: %v, want FullBytes", v)
	}
	if v := judge(s, []Check{{Key: "other", Policy: log, Cost: 1000}}, most); v != FullBytes {
		t.Fatalf("one in another call while the first is on its way: %v, want FullBytes", v)
	}
	v, more := s.Vet([]Check{{Key: "new-2", Policy: log, Cost: 1}}, most, call)
	if v != Take || more.Bytes > 200 {
		t.Fatalf("a new log of 1 after it: %v adding %+v", v, more)
	}
	taken.States, taken.Bytes = taken.States+more.States, taken.Bytes+more.Bytes
	// Met again in the call, a log is judged at the most it can hold: its
	// ring, grown by the first set, grows by a quarter of itself.
	v, again := s.Vet([]Check{{Key: "new-2", Policy: log, Cost: 1}}, Room{Bytes: 1 << 40}, call)
	if v != Take || again.Bytes < 8000 {
		t.Fatalf("the log of 1 again: %v adding %+v, want its most", v, again)
	}
	s.Release(Room{States: taken.States + again.States, Bytes: taken.Bytes + again.Bytes})
	if v, grow := s.Vet([]Check{{Key: "held", Policy: log, Cost: 200}}, most, nil); v != Take || grow.States != 0 || grow.Bytes == 0 {
		t.Fatalf("200 more on the held log: %v adding %+v, want its growth alone", v, grow)
	} else {
		s.Release(grow)
	}
	if v, peek := s.Vet([]Check{{Key: "new-3", Policy: log, Cost: 0}}, Room{Bytes: 1}, nil); v != Take || peek != (Room{}) {
		t.Fatalf("a peek: %v adding %+v", v, peek)
	}
	if s.Stats().Bytes != held || s.reserved() != (Room{}) {
		t.Fatalf("Vet changed the state, or released what it did not reserve: %+v", s.reserved())
	}
	// Once the held log has expired, its bytes are freed (by the tick's
	// sweep, or the one Vet makes before it refuses).
	s.Apply(&raft.Log{Index: 2, Type: raft.LogCommand, Data: EncodeTick(1100 * sec)})
	if v := judge(s, []Check{{Key: "new", Policy: log, Cost: 1000}}, Room{Bytes: adds.Bytes + held/2}); v != Take {
		t.Fatalf("after the held log expired: %v, want Take", v)
	}
}

// A log's timestamps that have aged out are not held: at the bound, a
// check that fits in its ring beside the ones still in the window is
// taken (its write drops the others and shrinks the ring), not refused
// until the log's newest timestamp leaves the window.
func TestVetBytesAgedTimestampsAreNotHeld(t *testing.T) {
	log := inline(window.Limit{Algorithm: window.SlidingLog, Limit: 1000, Window: 10 * sec})
	s := NewShard()
	s.Apply(allowLog(1, 1000*sec, Check{Key: "k", Policy: log, Cost: 111}))
	s.Apply(allowLog(2, 1009*sec, Check{Key: "k", Policy: log, Cost: 1}))
	s.Apply(&raft.Log{Index: 3, Type: raft.LogCommand, Data: EncodeTick(1010*sec + sec/2)})
	held := s.Stats().Bytes
	if v := judge(s, []Check{{Key: "k", Policy: log, Cost: 1}}, Room{Bytes: held}); v != Take {
		t.Fatalf("a check of a log whose ring has room once its aged timestamps go: %v, want Take", v)
	}
}

// A set's checks of one key are judged together, at the sum of their
// costs, as the set is applied: one by one, each fitting in a held log's
// ring, 60 checks of 500 were judged to add nothing and grew it by
// 233 KB past the bound.
func TestVetBytesSetOfOneKey(t *testing.T) {
	log := inline(window.Limit{Algorithm: window.SlidingLog, Limit: 40_000, Window: 10 * sec})
	s := NewShard()
	s.Apply(allowLog(1, 1000*sec, Check{Key: "k", Policy: log, Cost: 1000}))
	s.Apply(allowLog(2, 1005*sec, Check{Key: "k", Policy: log, Cost: 500}))
	s.Apply(allowLog(3, 1010*sec, Check{Key: "k", Policy: log, Cost: 0})) // the 1,000 age out
	held := s.Stats().Bytes
	set := make([]Check, 60)
	for i := range set {
		set[i] = Check{Key: "k", Policy: log, Cost: 500, Joined: i > 0}
	}
	v, adds := s.Vet(set, Room{Bytes: held}, &Call{})
	if v != FullBytes {
		t.Fatalf("60 checks of 500 of one held log, at the bound: %v adding %+v, want FullBytes", v, adds)
	}
	v, adds = s.Vet(set, Room{Bytes: 1 << 40}, &Call{})
	s.Release(adds)
	s.Apply(allowLog(4, 1010*sec, set...))
	if got := s.Stats().Bytes - held; v != Take || got > adds.Bytes {
		t.Fatalf("the set grew the log by %d bytes, judged %d (%v)", got, adds.Bytes, v)
	}
}

// TestVetBytesBoundHolds: a flood of random checks (new keys and held
// ones, every algorithm, logs up to 2,000 timestamps, peeks, time moving
// on) through Vet, each call's taken sets applied before the next call:
// the group's states never hold more than the bound, and the bound is
// reached, not judged from afar.
func TestVetBytesBoundHolds(t *testing.T) {
	forSeeds(t, 12, func(t *testing.T, seed uint64) {
		r := rand.New(rand.NewPCG(seed, 0xb17e5))
		pols := append(samplePolicies(), inline(window.Limit{Algorithm: window.SlidingLog, Limit: 2000, Window: 30 * sec}))
		most := Room{Bytes: 64 << 10}
		s := NewShard()
		ts, index := int64(1000)*sec, uint64(0)
		refused, peak := 0, int64(0)
		for n := range 3000 {
			ts += r.Int64N(50 * int64(time.Millisecond))
			var taken []Check
			var reserved Room
			call := &Call{}
			for range 1 + r.IntN(4) {
				p := pols[len(pols)-1] // half the checks grow long logs
				if r.IntN(2) == 0 {
					p = pols[r.IntN(len(pols))]
				}
				keys := 300
				if r.IntN(3) == 0 {
					keys = 5 // a call's sets meet the same logs again
				}
				c := Check{Key: fmt.Sprintf("k%d", r.IntN(keys)), Policy: p, Cost: r.Int64N(3)}
				if r.IntN(8) == 0 {
					c.Cost = 1 + r.Int64N(2000)
				}
				v, adds := s.Vet([]Check{c}, most, call)
				if v != Take {
					refused++
					continue
				}
				reserved.States, reserved.Bytes = reserved.States+adds.States, reserved.Bytes+adds.Bytes
				taken = append(taken, c)
			}
			index++
			s.Apply(allowLog(index, ts, taken...))
			s.Release(reserved)
			got := s.Stats().Bytes
			if got > most.Bytes {
				t.Fatalf("call %d: the states hold %d bytes, over the bound of %d", n, got, most.Bytes)
			}
			if want := recountBytes(s); got != want {
				t.Fatalf("call %d: the table counts %d bytes, its records hold %d", n, got, want)
			}
			peak = max(peak, got)
		}
		if refused == 0 || peak < most.Bytes*3/4 {
			t.Fatalf("%d refused, a peak of %d bytes of %d: the flood never met the bound", refused, peak, most.Bytes)
		}
	})
}

// One slot's states are bounded by MaxSlotBytes whatever the group's
// bound, so a slot can always move (its export fits MaxExport): a
// colocated policy's keys, all in one slot, are refused FullSlot once it
// is full, while checks of other slots and peeks are taken. Before, a
// slot grew past MaxExport within the group's bounds, and a move of it
// stayed frozen, its checks refused, until its states expired.
func TestVetSlotBound(t *testing.T) {
	g := newGroup(t, 1, 4, 0, 1, 2, 3)
	shop := &policy.Policy{Name: "shop", Colocate: true, Limits: []policy.Limit{{Limit: window.Limit{
		Algorithm: window.SlidingLog, Limit: 10_000, Window: 3600 * sec}}}}
	slot := uint32(slotOfID(shop.ColocatedKey("u"), 4))
	other := keyIn((int(slot)+1)%4, 4, 0)
	most := Room{States: 1 << 30, Bytes: 1 << 40}
	// The checks of one call, on their way together, are judged with one
	// another: before, each was judged against the slot as it was, and a
	// call of 1,000 logs passed the bound by 80 MB.
	var onTheirWay Room
	call := &Call{}
	for i := 0; ; i++ {
		if i == 1500 {
			t.Fatalf("one call reserved %d bytes in one slot, never refused", onTheirWay.Bytes)
		}
		c := Check{Key: shop.ColocatedKey(fmt.Sprintf("call%d", i)), Policy: shop, Cost: 10_000}
		v, adds := g.s.Vet([]Check{c}, most, call)
		if v == FullSlot {
			break
		}
		onTheirWay.Bytes += adds.Bytes
	}
	if onTheirWay.Bytes > MaxSlotBytes {
		t.Fatalf("one call reserved %d bytes in one slot, over %d", onTheirWay.Bytes, MaxSlotBytes)
	}
	g.s.Release(onTheirWay)
	full := false
	for i := 0; !full; i++ {
		if i == 1500 { // 1,500 logs of 10,000 timestamps: 120 MB
			t.Fatalf("%d bytes in one slot, never refused", g.s.tab.counts.bytes[slot])
		}
		c := Check{Key: shop.ColocatedKey(fmt.Sprintf("u%d", i)), Policy: shop, Cost: 10_000}
		v, adds := g.s.Vet([]Check{c}, most, nil)
		switch v {
		case FullSlot:
			full = true
		case Take:
			g.now += 1000
			if r, ok := g.apply(EncodeAllow(nil, g.now, []Check{c})).([]policy.Result); !ok || !r[0].Allowed {
				t.Fatalf("check %d: %v", i, r)
			}
			g.s.Release(adds)
		default:
			t.Fatalf("check %d: %v", i, v)
		}
	}
	held := g.s.tab.counts.bytes[slot]
	if held > MaxSlotBytes || held < MaxSlotBytes*9/10 {
		t.Fatalf("the slot holds %d bytes at its refusal, want just under %d", held, MaxSlotBytes)
	}
	p := inline(window.Limit{Algorithm: window.SlidingLog, Limit: 10_000, Window: 3600 * sec})
	if v := judge(g.s, []Check{{Key: other, Policy: p, Cost: 10_000}}, most); v != Take {
		t.Fatalf("a key of another slot: %v, want Take", v)
	}
	if v := judge(g.s, []Check{{Key: shop.ColocatedKey("u0"), Policy: shop, Cost: 0}}, most); v != Take {
		t.Fatalf("a peek in the full slot: %v, want Take", v)
	}
	g.mustApply(EncodeFreeze(1, []uint32{slot}))
	exp, err := g.s.ExportSlots(1, []uint32{slot})
	if err != nil || len(exp) > MaxExport {
		t.Fatalf("the full slot's export: %d bytes, %v; want it to fit %d", len(exp), err, MaxExport)
	}
}

// A log met again and again in one call (a forwarded batch of many
// callers' checks of one hot key) is reserved up to the most it can hold
// in all, not that much again at each meeting: before, 614 checks of cost
// 1 of one 10,000 log reserved 48 MiB and met the slot's bound, with the
// slot empty. And other calls' reservations do not count against a slot:
// another caller's checks of an empty slot are taken meanwhile.
func TestVetHotLogInOneCall(t *testing.T) {
	g := newGroup(t, 1, 4, 0, 1, 2, 3)
	p := inline(window.Limit{Algorithm: window.SlidingLog, Limit: 10_000, Window: 3600 * sec})
	most := Room{States: 2_000_000, Bytes: 1 << 30}
	hot := keyIn(0, 4, 0)
	call := &Call{}
	var taken Room
	for i := range 2000 {
		v, adds := g.s.Vet([]Check{{Key: hot, Policy: p, Cost: 1}}, most, call)
		if v != Take {
			t.Fatalf("check %d of one call of one key: %v, having reserved %d bytes", i, v, taken.Bytes)
		}
		taken.States, taken.Bytes = taken.States+adds.States, taken.Bytes+adds.Bytes
	}
	// The log's most, and a record and identity at each meeting (a new
	// key's state is counted at each, as it is not stored yet).
	if limit := int64(p.HeapMax(0)) + 2000*(recordBytes+64); taken.Bytes > limit {
		t.Fatalf("one call of one log reserved %d bytes, over %d", taken.Bytes, limit)
	}
	other, call2 := keyIn(3, 4, 1), &Call{}
	for i := range 2 {
		if v, adds := g.s.Vet([]Check{{Key: other, Policy: p, Cost: 10_000}}, most, call2); v != Take {
			t.Fatalf("check %d of another caller's call, in an empty slot: %v", i, v)
		} else {
			g.s.Release(adds)
		}
	}
	g.s.Release(taken)
}

// A restore is judged against one slot's bound as a check is: what the
// fullest slot it fills would hold, its states beside the slot's own.
func TestHeldAfterRestoreFullestSlot(t *testing.T) {
	shop := &policy.Policy{Name: "shop", Colocate: true, Limits: []policy.Limit{{Limit: window.Limit{
		Algorithm: window.SlidingLog, Limit: 10_000, Window: 3600 * sec}}}}
	slot := uint32(slotOfID(shop.ColocatedKey("u"), 4))
	fill := func(g *group, prefix string, logs int) {
		for i := range logs {
			g.now += 1000
			c := Check{Key: shop.ColocatedKey(fmt.Sprintf("%s%d", prefix, i)), Policy: shop, Cost: 10_000}
			if r, ok := g.apply(EncodeAllow(nil, g.now, []Check{c})).([]policy.Result); !ok || !r[0].Allowed {
				t.Fatalf("%s%d: %v", prefix, i, r)
			}
		}
	}
	src := newGroup(t, 1, 4, 0, 1, 2, 3)
	fill(src, "a", 360) // about 29 MiB
	src.mustApply(EncodeFreeze(1, []uint32{slot}))
	states, err := src.s.ExportSlots(1, []uint32{slot})
	if err != nil {
		t.Fatal(err)
	}
	empty := newGroup(t, 1, 4, 0, 1, 2, 3)
	if _, fullest, err := empty.s.HeldAfterRestore(states); err != nil || fullest > MaxSlotBytes || fullest < 25<<20 {
		t.Fatalf("into an empty group: the slot would hold %d bytes (%v), want about 29 MiB", fullest, err)
	}
	busy := newGroup(t, 1, 4, 0, 1, 2, 3)
	fill(busy, "b", 300) // about 24 MiB more
	if _, fullest, err := busy.s.HeldAfterRestore(states); err != nil || fullest <= MaxSlotBytes {
		t.Fatalf("beside the slot's own 24 MiB: %d bytes (%v), want over %d", fullest, err, MaxSlotBytes)
	}
}
