package fsm

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/floodgate/floodgate/cluster/hashing"
)

// A move's export over the piece size is cut into pieces of whole slots,
// each slot in one piece (an empty one too), in the move's order, none
// over the bound unless it is a single slot; importing the pieces one
// entry each leaves the target as one import of the whole would, states
// and snapshot alike.
func TestCutImportPieces(t *testing.T) {
	const slots = 16
	moving := []uint32{1, 2, 3, 5, 7, 8, 11, 13}
	src := newGroup(t, 0, slots, moving...)
	keys := 0
	for i, x := range moving {
		if x == 5 {
			continue // an empty slot moves too
		}
		n := 4 + 6*i // slots of different sizes
		if x == 13 {
			n = 80 // one slot larger than a piece
		}
		for j := range n {
			if ok, refused := src.allow(longKeyIn(int(x), slots, j), 10); !ok || refused {
				t.Fatalf("slot %d key %d: admitted %v, refused %v", x, j, ok, refused)
			}
			keys++
		}
	}
	src.mustApply(EncodeFreeze(9, moving))
	export, err := src.s.ExportSlots(9, moving)
	if err != nil {
		t.Fatal(err)
	}
	whole := newGroup(t, 1, slots)
	whole.mustApply(EncodeImport(9, 0, moving, export))

	max := len(export) / 6
	dst := newGroup(t, 1, slots)
	pieces, err := dst.s.CutImport(moving, export, max)
	if err != nil {
		t.Fatal(err)
	}
	if len(pieces) < 4 {
		t.Fatalf("%d pieces of an export %d times the bound", len(pieces), len(export)/max)
	}
	var got []uint32
	for i, p := range pieces {
		if len(p.States) > max && len(p.Slots) > 1 {
			t.Errorf("piece %d of %d slots is %d bytes, over %d", i, len(p.Slots), len(p.States), max)
		}
		got = append(got, p.Slots...)
		if _, in := dst.s.MoveApplied(9, moving); in {
			t.Fatalf("the move is imported before piece %d", i)
		}
		dst.mustApply(EncodeImport(9, 0, p.Slots, p.States))
	}
	if !slices.Equal(got, moving) {
		t.Fatalf("pieces carry slots %v, want %v", got, moving)
	}
	if !slices.ContainsFunc(pieces, func(p ImportPiece) bool { return slices.Equal(p.Slots, []uint32{13}) }) {
		t.Error("the slot larger than a piece is not a piece of its own")
	}
	if _, in := dst.s.MoveApplied(9, moving); !in {
		t.Fatal("the move is not imported after every piece")
	}
	if !bytes.Equal(snapshotBytes(t, dst.s), snapshotBytes(t, whole.s)) {
		t.Fatal("a target imported in pieces differs from one imported whole")
	}
	if n := dst.s.Stats().States; n != keys {
		t.Errorf("%d keys after the pieces, want %d", n, keys)
	}

	// An export that fits is one piece, the export itself.
	one, err := dst.s.CutImport(moving, export, len(export))
	if err != nil || len(one) != 1 || !slices.Equal(one[0].Slots, moving) || &one[0].States[0] != &export[0] {
		t.Errorf("an export that fits: %d pieces, %v", len(one), err)
	}
	// A state outside the slots named is refused, as the import would.
	if _, err := dst.s.CutImport(moving[1:], export, max); !errors.Is(err, ErrCorrupt) {
		t.Errorf("a state outside the slots: %v, want ErrCorrupt", err)
	}
	if _, err := NewShard().CutImport(moving, export, max); err == nil {
		t.Error("a shard without an ownership record cut an import")
	}
}

// longKeyIn is keyIn's key of 60 bytes more: pieces of few keys each.
func longKeyIn(slot, slots int, i int) string {
	pad := strings.Repeat("p", 60)
	for n := 0; ; n++ {
		k := fmt.Sprintf("%s%d-%d", pad, i, n)
		if hashing.ShardOf(k, slots) == slot {
			return k
		}
	}
}
