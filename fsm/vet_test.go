package fsm

import (
	"bytes"
	"fmt"
	"testing"

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
		if got, _ := s.Vet(c.checks, c.max, 0); got != c.want {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
	// The sets of one call taken before count: the last room goes once.
	v, adds := s.Vet([]Check{newKey("new-1")}, max, 0)
	if v != Take || adds != 1 {
		t.Fatalf("the first new key of a call: %v adding %d", v, adds)
	}
	if v, _ := s.Vet([]Check{newKey("new-2")}, max, adds); v != Full {
		t.Errorf("a second new key in the same call: %v, want Full", v)
	}
	if v, _ := s.Vet([]Check{newKey("held-5")}, max, adds); v != Take {
		t.Errorf("a held key after it: %v, want Take", v)
	}
	if s.Stats().States != max-1 {
		t.Fatal("Vet changed the state")
	}
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
	if got, _ := s.Vet([]Check{{Key: "never", Policy: minute, Cost: 1}}, max, 0); got != Full {
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
		if s.missing(minute, k) == 0 {
			expired = k
		}
		s.mu.Unlock()
	}
	if expired == "" {
		t.Fatal("every expired state was swept at once")
	}
	if got, _ := s.Vet([]Check{{Key: expired, Policy: minute, Cost: 1}}, held, 0); got != Take {
		t.Errorf("an expired key: %v, want Take", got)
	}
	if got := s.Stats().States; got != held {
		t.Fatalf("a Take verdict swept: %d states, want %d", got, held)
	}
	before := snapshotBytes(t, s)
	if got, _ := s.Vet([]Check{{Key: "never", Policy: minute, Cost: 1}}, held, 0); got != Take {
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
	if got, _ := g.s.Vet([]Check{{Key: mine, Policy: p, Cost: 1}}, 0, 0); got != Take {
		t.Errorf("an owned key: %v", got)
	}
	if got, _ := g.s.Vet([]Check{{Key: mine, Policy: p, Cost: 1}, {Key: theirs, Policy: p, Cost: 1}}, 0, 0); got != NotOwned {
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
	if got, _ := s.Vet([]Check{{Key: "pending", Policy: p, Cost: 1}}, 2, 0); got != Take {
		t.Errorf("the pending key at the bound: %v, want Take", got)
	}
	if got, _ := s.Vet([]Check{{Key: "other", Policy: p, Cost: 1}}, 2, 0); got != Full {
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
	if got, _ := s.Vet(flood, held, 0); got != Full {
		t.Fatalf("100 new keys with %d states held at a bound of %d: %v, want Full", held, held, got)
	}
	first := s.Stats().States
	if freed := held - first; freed <= 0 || freed > sweepPerRefusal {
		t.Fatalf("the first refusal swept %d records free, want 1 to %d", freed, sweepPerRefusal)
	}
	for range 10 {
		if got, _ := s.Vet(flood, held, 0); got != Full {
			t.Fatalf("a refusal again: %v, want Full", got)
		}
	}
	if got := s.Stats().States; got != first {
		t.Fatalf("refusals before the next entry swept %d more", first-got)
	}
	s.Apply(allowLog(3, 1201*sec, Check{Key: "old-0", Policy: minute, Cost: 1}))
	if got, _ := s.Vet(flood, held, 0); got != Take {
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
	adding := 0
	for i := range max {
		v, adds := s.Vet([]Check{{Key: fmt.Sprintf("k%d", i), Policy: one, Cost: 1}}, max, adding)
		if v != Take || adds != 1 {
			t.Fatalf("new key %d of %d: %v adding %d, want Take adding 1", i+1, max, v, adds)
		}
		adding += adds
	}
	if v, _ := s.Vet([]Check{{Key: "one-more", Policy: one, Cost: 1}}, max, adding); v != Full {
		t.Fatalf("key %d of a bound of %d: %v, want Full", max+1, max, v)
	}
	// A held key adds nothing, wherever it comes in a call.
	s.Apply(allowLog(1, 1000*sec, Check{Key: "k0", Policy: one, Cost: 1}))
	if v, adds := s.Vet([]Check{{Key: "k0", Policy: one, Cost: 1}}, max, adding); v != Take || adds != 0 {
		t.Fatalf("a held key: %v adding %d", v, adds)
	}
}
