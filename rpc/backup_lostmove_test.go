package rpc

import (
	"slices"
	"strings"
	"testing"

	"github.com/floodgate/floodgate/fsm"
)

// lostMove names a move that finished during a save with its target
// exported before its source (groups are exported by id) or not at all,
// whether the view before knew it or only the table shows it, and no
// other.
func TestLostMove(t *testing.T) {
	view := func(table []uint32, moves ...fsm.SlotMove) *fsm.MetaView {
		v := &fsm.MetaView{SlotCount: len(table), Table: table, Moves: moves, NextMove: 10}
		for _, g := range []uint32{1, 2, 3} {
			v.Groups = append(v.Groups, fsm.GroupInfo{ID: g})
		}
		return v
	}
	back := fsm.SlotMove{ID: 7, From: 3, To: 1, Slots: []uint32{2}, State: fsm.MoveFlipped}
	fore := fsm.SlotMove{ID: 8, From: 1, To: 3, Slots: []uint32{0}, State: fsm.MovePlanned}
	for _, c := range []struct {
		name          string
		before, after *fsm.MetaView
		want          string // in the answer; "" for none
	}{
		{"nothing moved", view([]uint32{1, 2, 3}), view([]uint32{1, 2, 3}), ""},
		{"a known move into a group exported later finished", view([]uint32{1, 2, 3}, fore), view([]uint32{3, 2, 3}), ""},
		{"a known move into a group exported earlier finished", view([]uint32{1, 2, 1}, back), view([]uint32{1, 2, 1}), "move 7 of 1 slots from group 3 to group 1"},
		{"a known move into a group exported earlier still in flight", view([]uint32{1, 2, 1}, back), view([]uint32{1, 2, 1}, back), ""},
		{"a new move into a group exported earlier", view([]uint32{1, 2, 3}), view([]uint32{1, 2, 2}), "slot 2, moved from group 3 to group 2"},
		{"a new move into a group exported later", view([]uint32{1, 2, 3}), view([]uint32{2, 2, 3}), ""},
		{"a new move into a group added meanwhile", view([]uint32{1, 2, 3}), view([]uint32{1, 4, 3}), "slot 1, moved from group 2 to group 4"},
		{"a new move into a group exported earlier, in flight", view([]uint32{1, 2, 3}),
			view([]uint32{1, 2, 1}, fsm.SlotMove{ID: 10, From: 3, To: 1, Slots: []uint32{2}, State: fsm.MoveFlipped}), ""},
	} {
		got := lostMove(c.before, c.after, []int{1, 2, 3})
		if c.want == "" && got != "" || c.want != "" && !strings.Contains(got, c.want) {
			t.Errorf("%s: %q, want %q", c.name, got, c.want)
		}
	}
}

// A save exports the groups that own a slot or are the source of a move
// in flight, not one just added (no leader yet, nothing to hold).
func TestHolders(t *testing.T) {
	v := &fsm.MetaView{SlotCount: 4, Table: []uint32{1, 1, 3, 3},
		Moves: []fsm.SlotMove{{ID: 1, From: 2, To: 3, Slots: []uint32{2}, State: fsm.MoveFlipped}}}
	for _, g := range []uint32{1, 2, 3, 4} {
		v.Groups = append(v.Groups, fsm.GroupInfo{ID: g})
	}
	if got := holders(v); !slices.Equal(got, []uint32{1, 2, 3}) {
		t.Fatalf("holders %v, want 1 (slots), 2 (a move's source), 3 (slots)", got)
	}
	legacy := &fsm.MetaView{Shards: 3}
	if got := holders(legacy); !slices.Equal(got, []uint32{0, 1, 2}) {
		t.Fatalf("a legacy cluster's holders %v, want every shard", got)
	}
}
