package fsm

import (
	"bytes"
	"fmt"
	"slices"
	"testing"

	"github.com/floodgate/floodgate/cluster/hashing"
	"github.com/floodgate/floodgate/policy"
	"github.com/floodgate/floodgate/window"
)

// keysOf lists the keys of an export, each once, in order.
func keysOf(t *testing.T, export []byte) []string {
	t.Helper()
	w, err := walkExport(export)
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, e := range w.entries {
		if k := keyOf(e.id); len(keys) == 0 || keys[len(keys)-1] != k {
			keys = append(keys, k)
		}
	}
	return keys
}

// A backup taken while slots move holds each key once: the copy of the
// group the slot table names, or the frozen copy when that group has not
// imported the slot yet.
func TestOneCopyPerKeyWhileSlotsMove(t *testing.T) {
	const slots = 4
	src, dst := newGroup(t, 1, slots, 0, 1, 2, 3), newGroup(t, 2, slots)
	a, b, c := keyIn(0, slots, 1), keyIn(1, slots, 2), keyIn(2, slots, 3)
	for _, k := range []string{a, b, c} {
		src.allow(k, 10)
	}
	// Slot 0 moved to dst, which imported it and counted a again; the
	// source's frozen copy stays until the move's drop.
	src.mustApply(EncodeFreeze(1, []uint32{0}))
	exp, err := src.s.ExportSlots(1, []uint32{0})
	if err != nil {
		t.Fatal(err)
	}
	dst.now = src.now
	dst.mustApply(EncodeImport(1, 1, []uint32{0}, exp))
	dst.allow(a, 10)
	// Slot 1 is frozen for a move to dst that has not imported it yet.
	src.mustApply(EncodeFreeze(2, []uint32{1}))
	table := []int{2, 2, 1, 1} // slot -> group, as the save's view says
	ownerOf := func(key string) int { return table[hashing.ShardOf(key, slots)] }

	srcExp, err := src.s.ExportAll()
	if err != nil {
		t.Fatal(err)
	}
	dstExp, err := dst.s.ExportAll()
	if err != nil {
		t.Fatal(err)
	}
	if got := keysOf(t, srcExp); len(got) != 3 {
		t.Fatalf("the source exports %v: want its frozen copies too (the case under test)", got)
	}
	out, err := OneCopyPerKey([][]byte{srcExp, dstExp}, []int{1, 2}, ownerOf)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][]string{"source": {b, c}, "target": {a}}
	for i, name := range []string{"source", "target"} {
		got := keysOf(t, out[i])
		slices.Sort(got)
		slices.Sort(want[name])
		if !slices.Equal(got, want[name]) {
			t.Errorf("the %s keeps %v, want %v", name, got, want[name])
		}
	}
	if !bytes.Equal(out[1], dstExp) {
		t.Error("the target's export lost nothing, yet changed")
	}
	// a is the target's copy, counted twice; the restore of both parts
	// counts each key once and holds what each kept copy held.
	sp := Splitter{GroupOf: func(string) int { return 0 }}
	restored := NewShard()
	for i, e := range out {
		parts, now, err := sp.Split(e)
		if err != nil {
			t.Fatal(err)
		}
		if want := []int64{src.now, dst.now}[i]; now != want {
			t.Errorf("export %d: log time %d, want %d", i, now, want)
		}
		if err, _ := applyAt(t, restored, uint64(i+1), EncodeRestore(parts[0])).(error); err != nil {
			t.Fatal(err)
		}
	}
	if sp.Keys != 3 {
		t.Errorf("%d keys counted, want 3", sp.Keys)
	}
	got, err := restored.ExportAll()
	if err != nil {
		t.Fatal(err)
	}
	only := func(keep func(key string) bool) func(string) int {
		return func(key string) int {
			if keep(key) {
				return 0
			}
			return -1
		}
	}
	twin := NewShard()
	for i, pick := range []struct {
		export []byte
		keep   func(string) bool
	}{
		{dstExp, func(k string) bool { return k == a }}, // a from the target
		{srcExp, func(k string) bool { return k != a }}, // b and c from the source
	} {
		sp := Splitter{GroupOf: only(pick.keep)}
		parts, _, err := sp.Split(pick.export)
		if err != nil {
			t.Fatal(err)
		}
		applyAt(t, twin, uint64(i+1), EncodeRestore(parts[0]))
	}
	want2, _ := twin.ExportAll()
	if !bytes.Equal(got, want2) {
		t.Error("the restored states are not the owner's copy of a and the frozen copies of b and c")
	}
}

// Exports of groups that share no key come back as they were.
func TestOneCopyPerKeyWithoutMoves(t *testing.T) {
	g1, g2 := newGroup(t, 1, 4, 0, 1), newGroup(t, 2, 4, 2, 3)
	for i := range 8 {
		if i%4 < 2 {
			g1.allow(keyIn(i%4, 4, i), 5)
		} else {
			g2.allow(keyIn(i%4, 4, i), 5)
		}
	}
	e1, _ := g1.s.ExportAll()
	e2, _ := g2.s.ExportAll()
	out, err := OneCopyPerKey([][]byte{e1, e2}, []int{1, 2}, func(k string) int { return 1 + hashing.ShardOf(k, 4)/2 })
	if err != nil || !bytes.Equal(out[0], e1) || !bytes.Equal(out[1], e2) {
		t.Fatalf("exports changed: %v", err)
	}
	if _, err := OneCopyPerKey([][]byte{e1, []byte("FGSS garbage")}, []int{1, 2}, func(string) int { return 1 }); err == nil {
		t.Fatal("a damaged export was merged")
	}
}

// A Splitter counts a key held by two records once.
func TestSplitterCountsDistinctKeys(t *testing.T) {
	states, err := seededShard(t).ExportAll()
	if err != nil {
		t.Fatal(err)
	}
	one := Splitter{GroupOf: func(string) int { return 0 }}
	if _, _, err := one.Split(states); err != nil {
		t.Fatal(err)
	}
	two := Splitter{GroupOf: func(string) int { return 0 }}
	for range 2 {
		if _, _, err := two.Split(states); err != nil {
			t.Fatal(err)
		}
	}
	if one.Keys == 0 || two.Keys != one.Keys {
		t.Fatalf("a record split twice counts %d keys, once %d", two.Keys, one.Keys)
	}
}

// CutStates cuts states into pieces of about max bytes, each key's states
// (here two limits a key) in one piece, with the log time: restored one
// after another, the pieces hold what the whole does.
func TestCutStatesKeepsKeysWhole(t *testing.T) {
	src := NewShard()
	p := &policy.Policy{Limits: []policy.Limit{
		{Limit: window.Limit{Algorithm: window.SlidingLog, Limit: 5, Window: 3600e9}},
		{Limit: window.Limit{Algorithm: window.FixedWindow, Limit: 9, Window: 60e9}},
	}}
	for i := range 300 {
		applyAt(t, src, uint64(i+1), EncodeAllow(nil, int64(1_000_000+i), []Check{{Key: fmt.Sprintf("key-%03d", i), Policy: p, Cost: 1}}))
	}
	states, err := src.ExportAll()
	if err != nil {
		t.Fatal(err)
	}
	if same, err := CutStates(states, len(states)); err != nil || len(same) != 1 || !bytes.Equal(same[0], states) {
		t.Fatalf("states that fit were cut: %d pieces, %v", len(same), err)
	}
	const max = 1 << 10
	pieces, err := CutStates(states, max)
	if err != nil {
		t.Fatal(err)
	}
	if len(pieces) < len(states)/max {
		t.Fatalf("%d bytes cut into %d pieces of at most about %d", len(states), len(pieces), max)
	}
	whole, restored := NewShard(), NewShard()
	applyAt(t, whole, 1, EncodeRestore(states))
	seen := map[string]int{}
	for i, piece := range pieces {
		w, err := walkExport(piece)
		if err != nil {
			t.Fatalf("piece %d: %v", i, err)
		}
		if w.now != src.now {
			t.Fatalf("piece %d: log time %d, want %d", i, w.now, src.now)
		}
		if len(piece) > 2*max {
			t.Errorf("piece %d: %d bytes, over %d and a key's states", i, len(piece), max)
		}
		for _, e := range w.entries {
			if j, ok := seen[keyOf(e.id)]; ok && j != i {
				t.Fatalf("key %q is in pieces %d and %d", keyOf(e.id), j, i)
			}
			seen[keyOf(e.id)] = i
		}
		if err, _ := applyAt(t, restored, uint64(i+1), EncodeRestore(piece)).(error); err != nil {
			t.Fatal(err)
		}
	}
	got, _ := restored.ExportAll()
	want, _ := whole.ExportAll()
	if len(seen) != 300 || !bytes.Equal(got, want) {
		t.Fatalf("the pieces restored hold %d keys, and the same states as the whole: %v", len(seen), bytes.Equal(got, want))
	}
}
