package fsm

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/hashicorp/raft"

	"github.com/floodgate/floodgate/cluster/hashing"
	"github.com/floodgate/floodgate/test/fuzzseed"
)

func applyAt(t *testing.T, s *Shard, index uint64, data []byte) any {
	t.Helper()
	return s.Apply(&raft.Log{Index: index, Type: raft.LogCommand, Data: data})
}

// A backup of a shard restored into an empty one holds the same states,
// byte for byte.
func TestExportAllRestoresExactly(t *testing.T) {
	src := seededShard(t)
	states, err := src.ExportAll()
	if err != nil {
		t.Fatal(err)
	}
	sp := Splitter{GroupOf: func(string) int { return 0 }}
	parts, _, err := sp.Split(states)
	if err != nil || len(parts) != 1 || sp.Keys == 0 || sp.Skipped != 0 {
		t.Fatalf("split: %d parts, %d keys, %d skipped, %v", len(parts), sp.Keys, sp.Skipped, err)
	}
	dst := NewShard()
	if err, _ := applyAt(t, dst, 1, EncodeRestore(parts[0])).(error); err != nil {
		t.Fatal(err)
	}
	again, err := dst.ExportAll()
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(states, again) {
		t.Fatal("the restored shard's states differ from the backup")
	}
}

// A Splitter sends each key to its group and leaves out keys of no group.
func TestSplitExport(t *testing.T) {
	states, err := seededShard(t).ExportAll()
	if err != nil {
		t.Fatal(err)
	}
	groupOf := func(key string) int {
		switch {
		case key == "user:0":
			return -1
		case strings.HasSuffix(key, "1"):
			return 1
		}
		return 2
	}
	sp := Splitter{GroupOf: groupOf}
	parts, _, err := sp.Split(states)
	if err != nil || sp.Skipped != 1 || len(parts) != 2 {
		t.Fatalf("%d parts, %d keys, %d skipped, %v", len(parts), sp.Keys, sp.Skipped, err)
	}
	for g, part := range parts {
		s := NewShard()
		if err, _ := applyAt(t, s, 1, EncodeRestore(part)).(error); err != nil {
			t.Fatal(err)
		}
		s.tab.each(func(r *record) {
			if groupOf(keyOf(r.id)) != g {
				t.Errorf("group %d got key %q", g, keyOf(r.id))
			}
		})
	}
}

// A group refuses, whole, a restore holding a key of a slot it does not
// own, and replaces a key's states whole when it does.
func TestRestoreOwnershipAndReplace(t *testing.T) {
	const slotCount = 8
	src := seededShard(t)
	states, err := src.ExportAll()
	if err != nil {
		t.Fatal(err)
	}
	slotsOf := map[uint32]bool{}
	src.tab.each(func(r *record) { slotsOf[uint32(hashing.ShardOf(keyOf(r.id), slotCount))] = true })
	var owned []uint32
	for sl := range uint32(slotCount) {
		if slotsOf[sl] {
			owned = append(owned, sl)
		}
	}
	// Owns all but the last of the backup's slots.
	partial := NewShard()
	applyAt(t, partial, 1, EncodeInit(0, slotCount, owned[:len(owned)-1]))
	before, _ := partial.ExportAll()
	err, _ = applyAt(t, partial, 2, EncodeRestore(states)).(error)
	if !errors.Is(err, ErrNotOwned) {
		t.Fatalf("a restore with an unowned key: %v", err)
	}
	if after, _ := partial.ExportAll(); !bytes.Equal(before, after) {
		t.Fatal("a refused restore changed states")
	}

	full := NewShard()
	applyAt(t, full, 1, EncodeInit(0, slotCount, owned))
	// The group counted user:1 under a policy the backup also has; the
	// backup's states replace it whole.
	pols := fuzzseed.Policies()
	applyAt(t, full, 2, EncodeAllow(nil, fuzzT0, []Check{{Key: "user:1", Policy: pols[0], Cost: 1}, {Key: "extra", Policy: pols[0], Cost: 1}}))
	if err, _ := applyAt(t, full, 3, EncodeRestore(states)).(error); err != nil {
		t.Fatal(err)
	}
	want := map[string]int{}
	src.tab.each(func(r *record) { want[r.id]++ })
	got := map[string]int{}
	full.tab.each(func(r *record) { got[r.id]++ })
	for id := range want {
		if got[id] != 1 {
			t.Errorf("state %q missing after the restore", id)
		}
	}
	extra := 0
	for id := range got {
		if keyOf(id) == "extra" {
			extra++
		}
	}
	if extra == 0 {
		t.Error("a key the backup does not hold was dropped")
	}
}

func TestRestoreVersionsAndCorruption(t *testing.T) {
	states, err := seededShard(t).ExportAll()
	if err != nil {
		t.Fatal(err)
	}
	entry := EncodeRestore(states)
	newer := bytes.Clone(entry)
	newer[1] = restoreVersion + 1
	func() {
		defer func() {
			r := recover()
			if err, _ := r.(error); !errors.Is(err, ErrUnknownEntry) {
				t.Fatalf("a newer restore body: %v, want the node to stop", r)
			}
		}()
		applyAt(t, NewShard(), 1, newer)
	}()
	for name, data := range map[string][]byte{
		"truncated": entry[:len(entry)-3],
		"no body":   {cmdRestore},
		"garbage":   append([]byte{cmdRestore, restoreVersion}, []byte("not a snapshot")...),
	} {
		s := NewShard()
		if err, _ := applyAt(t, s, 1, data).(error); !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s: %v, want ErrCorrupt", name, err)
		}
		if s.tab.live != 0 {
			t.Errorf("%s: a corrupt restore changed states", name)
		}
	}
}
