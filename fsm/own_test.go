package fsm

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"testing"

	"github.com/hashicorp/raft"

	"github.com/floodgate/floodgate/cluster/hashing"
	"github.com/floodgate/floodgate/policy"
	"github.com/floodgate/floodgate/window"
)

// group is a shard state machine fed through Apply, as Raft does.
type group struct {
	t     *testing.T
	s     *Shard
	index uint64
	now   int64
}

func newGroup(t *testing.T, id uint32, slots int, owned ...uint32) *group {
	g := &group{t: t, s: NewShard(), now: 1_000_000}
	g.mustApply(EncodeInit(id, uint32(slots), owned))
	return g
}

func (g *group) apply(entry []byte) interface{} {
	g.index++
	return g.s.Apply(&raft.Log{Index: g.index, Type: raft.LogCommand, Data: entry})
}

func (g *group) mustApply(entry []byte) {
	g.t.Helper()
	if r := g.apply(entry); r != nil {
		g.t.Fatalf("entry type %d: %v", entry[0], r)
	}
}

// allow counts one check of key at limit n per hour; it reports whether
// it was admitted, and false with refused when the group does not own
// the key's slot.
func (g *group) allow(key string, n int64) (admitted, refused bool) {
	g.now += 1000
	p := &policy.Policy{Limits: []policy.Limit{{Limit: window.Limit{Algorithm: window.SlidingLog, Limit: n, Window: 3600e9}}}}
	switch r := g.apply(EncodeAllow(nil, g.now, []Check{{Key: key, Policy: p, Cost: 1}})).(type) {
	case []policy.Result:
		return r[0].Allowed, false
	case *AllowResults:
		return r.Results[0].Allowed, r.NotOwned[0]
	default:
		g.t.Fatalf("allow: %v", r)
	}
	return false, false
}

func keyIn(slot, slots int, i int) string {
	for n := 0; ; n++ {
		k := fmt.Sprintf("k%d-%d", i, n)
		if hashing.ShardOf(k, slots) == slot {
			return k
		}
	}
}

func TestOwnershipRefusesOtherSlots(t *testing.T) {
	g := newGroup(t, 1, 4, 1, 2)
	if ok, refused := g.allow(keyIn(1, 4, 0), 5); !ok || refused {
		t.Errorf("owned slot: admitted %v refused %v", ok, refused)
	}
	if _, refused := g.allow(keyIn(3, 4, 0), 5); !refused {
		t.Error("a check for a slot not owned was counted")
	}
	if st := g.s.Stats(); st.States != 1 {
		t.Errorf("%d states, want 1 (the refused check counted nowhere)", st.States)
	}
	g.mustApply(EncodeInit(1, 4, []uint32{0, 1, 2, 3})) // a later init changes nothing
	if info := g.s.Ownership(); !info.Initialized || len(info.Owned) != 2 || info.Group != 1 || !g.s.Initialized() {
		t.Errorf("ownership %+v", info)
	}
	if NewShard().Initialized() {
		t.Error("a shard never given slots says it is initialized")
	}
	if r := g.apply(EncodeReset(g.now, keyIn(3, 4, 0), &policy.Policy{Limits: []policy.Limit{{Limit: window.Limit{Algorithm: window.SlidingLog, Limit: 5, Window: 3600e9}}}})); !errors.Is(r.(error), ErrNotOwned) {
		t.Errorf("reset of a key not owned: %v", r)
	}
	for name, entry := range map[string][]byte{
		"freeze without version": {cmdFreeze},
		"slot out of range":      EncodeFreeze(1, []uint32{9}),
		"move 0":                 EncodeFreeze(0, []uint32{1}),
		"trailing":               append(EncodeDrop(1), 7),
		"bad export":             EncodeImport(1, 0, []uint32{3}, []byte("nope")),
	} {
		if r, ok := g.apply(entry).(error); !ok || !errors.Is(r, ErrCorrupt) {
			t.Errorf("%s: %v, want ErrCorrupt", name, r)
		}
	}
	if r := NewShard().Apply(&raft.Log{Index: 1, Type: raft.LogCommand, Data: EncodeFreeze(1, []uint32{0})}); r == nil {
		t.Error("a freeze without an ownership record was applied")
	}
}

// Random interleavings of strict checks and moves between two groups,
// with a router that is sometimes behind: no key is ever admitted more
// than its limit, and counts carry over every move.
func TestMovesNeverOverAdmit(t *testing.T) {
	const slots, limit = 8, 5
	for seed := range uint64(40) {
		rng := rand.New(rand.NewPCG(seed, 7))
		gs := []*group{newGroup(t, 0, slots, 0, 1, 2, 3), newGroup(t, 1, slots, 4, 5, 6, 7)}
		if seed%2 == 1 {
			// A dropped slot's states linger (orphans.go) when it comes back.
			gs[0].s.tab.counts.step, gs[1].s.tab.counts.step = 1, 1
		}
		owner := []int{0, 0, 0, 0, 1, 1, 1, 1} // what the meta table says
		keys := make([]string, 24)
		admitted := map[string]int64{}
		for i := range keys {
			keys[i] = keyIn(i%slots, slots, i)
		}
		move := uint64(0)
		for step := 0; step < 300; step++ {
			if rng.IntN(20) == 0 {
				// Move a random slot to the other group: freeze, export,
				// import, drop, exactly in protocol order.
				slot := uint32(rng.IntN(slots))
				from := owner[slot]
				to := 1 - from
				move++
				gs[from].mustApply(EncodeFreeze(move, []uint32{slot}))
				// A check routed by the old table meanwhile is refused.
				if _, refused := gs[from].allow(keyIn(int(slot), slots, 99), limit); !refused {
					t.Fatalf("seed %d: a frozen slot counted a check", seed)
				}
				owner[slot] = to
				exp, err := gs[from].s.ExportSlots(move, []uint32{slot})
				if err != nil {
					t.Fatal(err)
				}
				imp := EncodeImport(move, uint32(from), []uint32{slot}, exp)
				gs[to].mustApply(imp)
				gs[to].mustApply(imp) // a replayed import changes nothing
				gs[from].mustApply(EncodeDrop(move))
				continue
			}
			k := keys[rng.IntN(len(keys))]
			slot := hashing.ShardOf(k, slots)
			target := owner[slot]
			if rng.IntN(5) == 0 {
				target = 1 - target // a stale router
			}
			want := admitted[k] < limit // what one unreplicated limiter answers
			ok, refused := gs[target].allow(k, limit)
			if refused != (target != owner[slot]) {
				t.Fatalf("seed %d: refused %v at group %d, owner %d", seed, refused, target, owner[slot])
			}
			if ok && !refused {
				admitted[k]++
				if admitted[k] > limit {
					t.Fatalf("seed %d: key %s admitted %d times, limit %d", seed, k, admitted[k], limit)
				}
			}
			if !refused && ok != want {
				t.Fatalf("seed %d: key %s answered %v, a single limiter %v (counts lost in a move?)", seed, k, ok, want)
			}
		}
		// Every state lives in exactly its owner.
		for i, g := range gs {
			if len(g.s.Ownership().Frozen) != 0 {
				t.Errorf("seed %d: group %d keeps frozen slots after drops", seed, i)
			}
			checkCounts(t, g.s)
		}
	}
}

func TestOwnershipSnapshotRoundTrip(t *testing.T) {
	g := newGroup(t, 3, 16, 1, 2, 3, 9)
	for i := range 20 {
		g.allow(keyIn(i%16, 16, i), 10)
	}
	g.mustApply(EncodeFreeze(4, []uint32{2, 3}))
	a := snapshotBytes(t, g.s)
	if a[len(shardMagic)] != shardVersion {
		t.Fatalf("snapshot version %d, want %d", a[len(shardMagic)], shardVersion)
	}
	c := NewShard()
	if err := c.Restore(io.NopCloser(bytes.NewReader(a))); err != nil {
		t.Fatal(err)
	}
	if b := snapshotBytes(t, c); !bytes.Equal(a, b) {
		t.Error("a restored shard writes different bytes")
	}
	info := c.Ownership()
	if info.Group != 3 || info.SlotCount != 16 || len(info.Owned) != 2 || len(info.Frozen[4]) != 2 {
		t.Errorf("restored ownership %+v", info)
	}
	if _, err := c.ExportSlots(5, []uint32{2}); !errors.Is(err, ErrNotFrozen) {
		t.Errorf("export under the wrong move: %v", err)
	}
	// A legacy shard still writes version 1.
	if b := snapshotBytes(t, NewShard()); b[len(shardMagic)] != shardVersionNoOwn {
		t.Errorf("a shard without ownership wrote version %d", b[len(shardMagic)])
	}
}

// MoveApplied is a group's word on a move's step: the source has frozen
// every one of the move's slots by that move, the target has taken every
// one in; a part, another move, a slot outside the record or a group
// without one vouches for nothing, and a snapshot keeps the word.
func TestMoveApplied(t *testing.T) {
	src, dst := newGroup(t, 0, 16, 1, 2, 3), newGroup(t, 1, 16)
	step := func(g *group, move uint64, slots ...uint32) string {
		f, in := g.s.MoveApplied(move, slots)
		return fmt.Sprintf("frozen=%v imported=%v", f, in)
	}
	want := func(got, want, what string) {
		t.Helper()
		if got != want {
			t.Errorf("%s: %s, want %s", what, got, want)
		}
	}
	want(step(src, 4, 2, 3), "frozen=false imported=false", "source before the freeze")
	src.mustApply(EncodeFreeze(4, []uint32{2}))
	want(step(src, 4, 2, 3), "frozen=false imported=false", "source with one slot of two frozen")
	src.mustApply(EncodeFreeze(4, []uint32{3}))
	want(step(src, 4, 2, 3), "frozen=true imported=false", "source after the freeze")
	want(step(src, 5, 2, 3), "frozen=false imported=false", "another move")
	want(step(src, 4, 2, 16), "frozen=false imported=false", "a slot outside the record")
	want(step(src, 0, 2), "frozen=false imported=false", "move 0")
	want(step(src, 4), "frozen=false imported=false", "no slots")

	export, err := src.s.ExportSlots(4, []uint32{2, 3})
	if err != nil {
		t.Fatal(err)
	}
	want(step(dst, 4, 2, 3), "frozen=false imported=false", "target before the import")
	dst.mustApply(EncodeImport(4, 0, []uint32{2, 3}, export))
	want(step(dst, 4, 2, 3), "frozen=false imported=true", "target after the import")
	want(step(dst, 3, 2, 3), "frozen=false imported=true", "an earlier move of the same slots")
	want(step(dst, 6, 2, 3), "frozen=false imported=false", "a later move")
	want(step(dst, 4, 1, 2), "frozen=false imported=false", "a slot the move did not bring")

	c := NewShard()
	if err := c.Restore(io.NopCloser(bytes.NewReader(snapshotBytes(t, dst.s)))); err != nil {
		t.Fatal(err)
	}
	if _, in := c.MoveApplied(4, []uint32{2, 3}); !in {
		t.Error("a restored target forgot the import")
	}
	if f, in := NewShard().MoveApplied(4, []uint32{2}); f || in {
		t.Error("a shard without an ownership record vouched for a move")
	}
}

// A move's slots may be imported in parts, one entry each (a target whose
// whole export would be over MaxExport): each part exports and imports only
// its slots, the counts arrive exactly as one import would bring them, and
// the move is imported once every part is.
func TestMoveImportedInParts(t *testing.T) {
	const slots = 16
	moving := []uint32{2, 3, 5, 7}
	src, dst, whole := newGroup(t, 0, slots, 1, 2, 3, 5, 7), newGroup(t, 1, slots), newGroup(t, 1, slots)
	var keys []string
	for _, x := range moving {
		for i := range 3 {
			k := keyIn(int(x), slots, i)
			keys = append(keys, k)
			for range i + 1 {
				src.allow(k, 10)
			}
		}
	}
	src.mustApply(EncodeFreeze(9, moving))
	all, err := src.s.ExportSlots(9, moving)
	if err != nil {
		t.Fatal(err)
	}
	whole.mustApply(EncodeImport(9, 0, moving, all))
	for i, part := range [][]uint32{moving[:2], moving[2:]} {
		if _, in := dst.s.MoveApplied(9, moving); in {
			t.Fatalf("imported before part %d", i)
		}
		exp, err := src.s.ExportSlots(9, part)
		if err != nil {
			t.Fatal(err)
		}
		dst.mustApply(EncodeImport(9, 0, part, exp))
		if _, in := dst.s.MoveApplied(9, part); !in {
			t.Fatalf("part %d not imported", i)
		}
	}
	if _, in := dst.s.MoveApplied(9, moving); !in {
		t.Fatal("the move is not imported after every part")
	}
	// Same states, same answers as one import: each key holds i+1 of 10.
	for _, k := range keys {
		dst.now, whole.now = src.now, src.now
		a, _ := dst.allow(k, 10)
		b, _ := whole.allow(k, 10)
		if a != b {
			t.Fatalf("%s: admitted %v after parts, %v after one import", k, a, b)
		}
	}
	if !bytes.Equal(snapshotBytes(t, dst.s), snapshotBytes(t, whole.s)) {
		t.Fatal("a target imported in parts differs from one imported at once")
	}
}
