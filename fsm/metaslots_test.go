package fsm

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/hashicorp/raft"
	"google.golang.org/protobuf/proto"

	metav1 "github.com/floodgate/floodgate/proto/floodgate/meta/v1"
)

// slotMeta is a meta state machine fed through Apply, as Raft does.
type slotMeta struct {
	t     *testing.T
	m     *Meta
	index uint64
}

func newSlotMeta(t *testing.T, slots, perNode uint32) *slotMeta {
	s := &slotMeta{t: t, m: NewMeta()}
	if err := s.apply(MetaInitCluster, &metav1.InitCluster{ClusterId: "c", Replicas: 3, Slots: slots, GroupsPerNode: perNode, Home: "n1"}); err != nil {
		t.Fatal(err)
	}
	return s
}

func (s *slotMeta) apply(typ byte, msg proto.Message) error {
	s.t.Helper()
	b, err := EncodeMeta(typ, msg)
	if err != nil {
		s.t.Fatal(err)
	}
	s.index++
	if r := s.m.Apply(&raft.Log{Index: s.index, Type: raft.LogCommand, Data: b}); r != nil {
		return r.(error)
	}
	return nil
}

func TestInitSlotsSplitsTheTable(t *testing.T) {
	v := newSlotMeta(t, 10, 3).m.View()
	if !v.Slotted() || v.SlotCount != 10 || v.Shards != 10 || len(v.Groups) != 3 || v.NextGroup != 3 || len(v.Reports) != 3 {
		t.Fatalf("view %+v", v)
	}
	want := []uint32{0, 0, 0, 0, 1, 1, 1, 2, 2, 2}
	for s, g := range want {
		if v.Table[s] != g || v.GroupOf(s) != g {
			t.Errorf("slot %d in group %d, want %d", s, v.Table[s], g)
		}
	}
	for _, g := range v.Groups {
		if g.Home != "n1" || g.Retiring {
			t.Errorf("group %+v", g)
		}
	}
}

func TestLegacyViewIsIdentity(t *testing.T) {
	m := NewMeta()
	b, _ := EncodeMeta(MetaInitCluster, &metav1.InitCluster{ClusterId: "c", Shards: 4, Replicas: 3})
	if r := m.Apply(&raft.Log{Index: 1, Type: raft.LogCommand, Data: b}); r != nil {
		t.Fatal(r)
	}
	v := m.View()
	if v.Slotted() || v.GroupOf(3) != 3 || len(v.GroupIDs()) != 4 || v.Group(1) != nil {
		t.Fatalf("legacy view %+v", v)
	}
	b, _ = EncodeMeta(MetaAddGroup, &metav1.AddGroup{Home: "n1"})
	if r := m.Apply(&raft.Log{Index: 2, Type: raft.LogCommand, Data: b}); r == nil || !errors.Is(r.(error), ErrRefused) {
		t.Fatalf("add group to a legacy cluster: %v", r)
	}
}

// A whole move's life: plan, freeze (the table flips), import (done), and
// the emptied group's retirement and removal; each refusal names its field
// and changes nothing.
func TestSlotMoveHistory(t *testing.T) {
	s := newSlotMeta(t, 8, 2) // group 0: slots 0-3, group 1: 4-7
	if err := s.apply(MetaAddGroup, &metav1.AddGroup{Home: "n2"}); err != nil {
		t.Fatal(err)
	}
	refuse := []struct {
		name string
		cmd  *metav1.PlanMoves
		want string
	}{
		{"unknown from", &metav1.PlanMoves{Moves: []*metav1.Move{{From: 9, To: 2, Slots: []uint32{0}}}}, "moves[0].from: no group 9"},
		{"same group", &metav1.PlanMoves{Moves: []*metav1.Move{{From: 0, To: 0, Slots: []uint32{0}}}}, "moves[0].to: the same group"},
		{"not owned", &metav1.PlanMoves{Moves: []*metav1.Move{{From: 0, To: 2, Slots: []uint32{4}}}}, "moves[0].slots[0]: slot 4 is owned by group 1, not 0"},
		{"descending", &metav1.PlanMoves{Moves: []*metav1.Move{{From: 0, To: 2, Slots: []uint32{2, 1}}}}, "moves[0].slots[1]: slots must be ascending"},
		{"out of range", &metav1.PlanMoves{Moves: []*metav1.Move{{From: 0, To: 2, Slots: []uint32{8}}}}, "slot 8 of 8"},
		{"empty", &metav1.PlanMoves{Moves: []*metav1.Move{{From: 0, To: 2}}}, "moves[0].slots: empty"},
		{"twice", &metav1.PlanMoves{Moves: []*metav1.Move{{From: 0, To: 2, Slots: []uint32{1}}, {From: 0, To: 1, Slots: []uint32{1}}}}, "moves[1].slots[0]: slot 1 is already moving"},
	}
	for _, tc := range refuse {
		before := s.m.View()
		err := s.apply(MetaPlanMoves, tc.cmd)
		if !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want a refusal naming %q", tc.name, err, tc.want)
		}
		if after := s.m.View(); after.NextMove != before.NextMove || len(after.Moves) != len(before.Moves) {
			t.Errorf("%s: the refusal changed the moves", tc.name)
		}
	}
	if err := s.apply(MetaPlanMoves, &metav1.PlanMoves{Moves: []*metav1.Move{{From: 0, To: 2, Slots: []uint32{2, 3}}}}); err != nil {
		t.Fatal(err)
	}
	v := s.m.View()
	m := v.Move(1)
	if m == nil || m.State != MovePlanned || v.Table[2] != 0 || v.MoveDone(1) {
		t.Fatalf("planned: %+v table %v", m, v.Table)
	}
	if err := s.apply(MetaRemoveGroup, &metav1.RemoveGroup{Group: 2}); !errors.Is(err, ErrRefused) {
		t.Errorf("removing a group a move names: %v", err)
	}
	if err := s.apply(MetaMoveImported, &metav1.MoveImported{Move: 1}); err != nil || s.m.View().Move(1).State != MovePlanned {
		t.Errorf("an import before the flip must change nothing: %v", err)
	}
	epoch := v.Epoch
	for range 2 { // the second is a replay: no change
		if err := s.apply(MetaMoveFrozen, &metav1.MoveFrozen{Move: 1}); err != nil {
			t.Fatal(err)
		}
	}
	v = s.m.View()
	if v.Table[2] != 2 || v.Table[3] != 2 || v.Epoch != epoch+1 || v.Move(1).State != MoveFlipped {
		t.Fatalf("flipped: table %v epoch %d move %+v", v.Table, v.Epoch, v.Move(1))
	}
	if err := s.apply(MetaMoveImported, &metav1.MoveImported{Move: 1}); err != nil {
		t.Fatal(err)
	}
	if v = s.m.View(); v.Move(1) != nil || !v.MoveDone(1) || v.MoveDone(2) {
		t.Fatalf("done: %+v", v.Moves)
	}
	// Group 1 retires; it still owns slots, so it cannot go yet.
	if err := s.apply(MetaRetireGroup, &metav1.RetireGroup{Group: 1}); err != nil {
		t.Fatal(err)
	}
	if err := s.apply(MetaPlanMoves, &metav1.PlanMoves{Moves: []*metav1.Move{{From: 0, To: 1, Slots: []uint32{0}}}}); err == nil || !strings.Contains(err.Error(), "retiring") {
		t.Errorf("a move into a retiring group: %v", err)
	}
	if err := s.apply(MetaRemoveGroup, &metav1.RemoveGroup{Group: 1}); err == nil || !strings.Contains(err.Error(), "still owns slots") {
		t.Errorf("removing a group that owns slots: %v", err)
	}
	if err := s.apply(MetaPlanMoves, &metav1.PlanMoves{Moves: []*metav1.Move{{From: 1, To: 2, Slots: []uint32{4, 5, 6, 7}}}}); err != nil {
		t.Fatal(err)
	}
	_ = s.apply(MetaMoveFrozen, &metav1.MoveFrozen{Move: 2})
	_ = s.apply(MetaMoveImported, &metav1.MoveImported{Move: 2})
	for range 2 { // the second finds it gone: a retried removal is a no-op
		if err := s.apply(MetaRemoveGroup, &metav1.RemoveGroup{Group: 1}); err != nil {
			t.Fatal(err)
		}
	}
	v = s.m.View()
	if v.Group(1) != nil || len(v.Groups) != 2 || v.NextGroup != 3 {
		t.Fatalf("after removal: %+v", v.Groups)
	}
	// Rehome clears retiring.
	_ = s.apply(MetaRetireGroup, &metav1.RetireGroup{Group: 2})
	if err := s.apply(MetaRehomeGroup, &metav1.RehomeGroup{Group: 2, Home: "n3"}); err != nil {
		t.Fatal(err)
	}
	if g := s.m.View().Group(2); g.Home != "n3" || g.Retiring {
		t.Errorf("rehomed: %+v", g)
	}
	// A report names a group that exists.
	if err := s.apply(MetaShardReport, &metav1.ShardReport{Shard: 1, Leader: "n1", Term: 1}); !errors.Is(err, ErrRefused) {
		t.Errorf("a report of a removed group: %v", err)
	}
	if err := s.apply(MetaShardReport, &metav1.ShardReport{Shard: 2, Leader: "n3", Term: 1, Ready: true}); err != nil {
		t.Errorf("report: %v", err)
	}
	snapshotRoundTrip(t, s.m)
}

// snapshotRoundTrip restores m's snapshot and checks that the copy writes
// the same bytes.
func snapshotRoundTrip(t *testing.T, m *Meta) {
	t.Helper()
	first := metaBytes(t, m)
	if first[0] != metaVersion {
		t.Fatalf("a cluster of slots wrote snapshot version %d", first[0])
	}
	c := NewMeta()
	if err := c.Restore(io.NopCloser(bytes.NewReader(first))); err != nil {
		t.Fatal(err)
	}
	if second := metaBytes(t, c); !bytes.Equal(first, second) {
		t.Error("restored meta state writes different bytes")
	}
	v, w := m.View(), c.View()
	if w.SlotCount != v.SlotCount || w.Epoch != v.Epoch || w.NextMove != v.NextMove || len(w.Reports) != len(v.Reports) ||
		len(w.Groups) != len(v.Groups) || !bytes.Equal(u32bytes(w.Table), u32bytes(v.Table)) {
		t.Errorf("restored %+v, want %+v", w, v)
	}
}

func u32bytes(v []uint32) []byte {
	var b []byte
	for _, x := range v {
		b = append(b, byte(x), byte(x>>8), byte(x>>16), byte(x>>24))
	}
	return b
}

func metaBytes(t *testing.T, m *Meta) []byte {
	t.Helper()
	snap, err := m.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	return []byte(snap.(metaSnapshot))
}

func TestMetaSnapshotRefusesBrokenTables(t *testing.T) {
	for name, st := range map[string]*metav1.State{
		"short table":   {ClusterId: "c", Shards: 4, Replicas: 1, Slots: 4, NextGroup: 1, Groups: []*metav1.GroupState{{Id: 0}}, Table: []*metav1.SlotRun{{First: 0, Count: 3, Group: 0}}},
		"unknown group": {ClusterId: "c", Shards: 4, Replicas: 1, Slots: 4, NextGroup: 1, Groups: []*metav1.GroupState{{Id: 0}}, Table: []*metav1.SlotRun{{First: 0, Count: 4, Group: 5}}},
		"bad move":      {ClusterId: "c", Shards: 4, Replicas: 1, Slots: 4, NextGroup: 1, NextMove: 2, Groups: []*metav1.GroupState{{Id: 0}}, Table: []*metav1.SlotRun{{First: 0, Count: 4, Group: 0}}, Moves: []*metav1.MoveState{{Id: 1, From: 0, To: 3, State: 1}}},
	} {
		b, _ := proto.Marshal(st)
		err := NewMeta().Restore(io.NopCloser(bytes.NewReader(append([]byte{metaVersion}, b...))))
		if !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s: %v, want ErrCorrupt", name, err)
		}
	}
}
