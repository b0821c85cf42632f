package fsm

import (
	"cmp"
	"fmt"
	"slices"

	"google.golang.org/protobuf/proto"

	metav1 "github.com/floodgate/floodgate/proto/floodgate/meta/v1"
)

// Meta commands of a cluster of slots (docs/design/slots.md). Stored in
// Raft logs: never renumber.
const (
	MetaAddGroup     byte = 8
	MetaRehomeGroup  byte = 9
	MetaRetireGroup  byte = 10
	MetaRemoveGroup  byte = 11
	MetaPlanMoves    byte = 12
	MetaMoveFrozen   byte = 13
	MetaMoveImported byte = 14

	// metaLast is the newest meta command type this binary knows.
	metaLast = MetaMoveImported
)

// Bounds that keep an entry or snapshot of a few bytes from making the
// state allocate a lot.
const (
	maxSlots         = 1 << 16
	maxGroupsPerNode = 16
	maxMoveSlots     = 4096 // slots one PlanMoves may move
)

// GroupInfo is one group of a cluster of slots.
type GroupInfo struct {
	ID uint32
	// Home is the node that should lead the group.
	Home string
	// Retiring groups are drained of their slots, then removed.
	Retiring bool
}

// MoveState is how far a slot move got.
type MoveState uint8

// Move states: planned (the source still owns the slots), flipped (the
// source froze them and the table names the target, which imports them).
const (
	MovePlanned MoveState = 1
	MoveFlipped MoveState = 2
)

// SlotMove is a move in flight: Slots (ascending) go from group From to
// group To.
type SlotMove struct {
	ID       uint64
	From, To uint32
	Slots    []uint32
	State    MoveState
}

// Slotted reports whether the cluster is a cluster of slots (not legacy).
func (v *MetaView) Slotted() bool { return v.SlotCount > 0 }

// GroupIDsLeft is how many groups a cluster of slots can still add: ids
// are never used twice, and a cluster's life has maxShards of them.
func (v *MetaView) GroupIDsLeft() int { return maxShards - int(v.NextGroup) }

// GroupOf returns the group owning slot: the table's word, or in a legacy
// cluster the shard itself.
func (v *MetaView) GroupOf(slot int) uint32 {
	if v.Table == nil {
		return uint32(slot)
	}
	return v.Table[slot]
}

// GroupIDs returns every group: a cluster of slots' groups, or a legacy
// cluster's shards.
func (v *MetaView) GroupIDs() []uint32 {
	if !v.Slotted() {
		ids := make([]uint32, v.Shards)
		for i := range ids {
			ids[i] = uint32(i)
		}
		return ids
	}
	ids := make([]uint32, len(v.Groups))
	for i, g := range v.Groups {
		ids[i] = g.ID
	}
	return ids
}

// Group returns the group with id, or nil (always nil when legacy).
func (v *MetaView) Group(id uint32) *GroupInfo {
	i, ok := slices.BinarySearchFunc(v.Groups, id, func(g GroupInfo, id uint32) int { return cmp.Compare(g.ID, id) })
	if !ok {
		return nil
	}
	return &v.Groups[i]
}

// Move returns the move in flight with id, or nil.
func (v *MetaView) Move(id uint64) *SlotMove {
	for i := range v.Moves {
		if v.Moves[i].ID == id {
			return &v.Moves[i]
		}
	}
	return nil
}

// MoveDone reports whether move id was planned and has finished.
func (v *MetaView) MoveDone(id uint64) bool { return id > 0 && id < v.NextMove && v.Move(id) == nil }

// initSlots creates a cluster of slots: G groups homed at home, splitting
// the table in contiguous ranges.
func initSlots(next *MetaView, c *metav1.InitCluster) error {
	switch {
	case c.Shards != 0 && c.Shards != c.Slots:
		return fmt.Errorf("%w: shards: a cluster of slots takes slots, not shards", ErrRefused)
	case c.Slots > maxSlots:
		return fmt.Errorf("%w: slots: %d, at most %d", ErrRefused, c.Slots, maxSlots)
	case c.GroupsPerNode > maxGroupsPerNode:
		return fmt.Errorf("%w: groups_per_node: %d, at most %d", ErrRefused, c.GroupsPerNode, maxGroupsPerNode)
	case c.Home == "":
		return fmt.Errorf("%w: home: the first groups need a home node", ErrRefused)
	}
	g := max(1, int(c.GroupsPerNode))
	g = min(g, int(c.Slots))
	next.SlotCount, next.Shards, next.GroupsPerNode = int(c.Slots), int(c.Slots), max(1, int(c.GroupsPerNode))
	next.Table = make([]uint32, c.Slots)
	for s := range next.Table {
		next.Table[s] = uint32(s * g / int(c.Slots))
	}
	next.Groups = make([]GroupInfo, g)
	for i := range next.Groups {
		next.Groups[i] = GroupInfo{ID: uint32(i), Home: c.Home}
	}
	next.NextGroup, next.NextMove, next.Epoch = uint32(g), 1, 1
	next.Reports = make([]*metav1.ShardReport, g)
	return nil
}

// applySlots applies the commands of a cluster of slots to next, a copy
// of cur whose fields it replaces (never modifies in place).
func applySlots(cur, next *MetaView, typ byte, body []byte) error {
	if !cur.Slotted() {
		return fmt.Errorf("%w: a legacy cluster has no slots", ErrRefused)
	}
	group := func(field string, id uint32) (int, error) {
		i, ok := slices.BinarySearchFunc(cur.Groups, id, func(g GroupInfo, id uint32) int { return cmp.Compare(g.ID, id) })
		if !ok {
			return 0, fmt.Errorf("%w: %s: no group %d", ErrRefused, field, id)
		}
		return i, nil
	}
	switch typ {
	case MetaAddGroup:
		var c metav1.AddGroup
		if err := unmarshal(body, &c); err != nil {
			return err
		}
		if c.Home == "" {
			return fmt.Errorf("%w: home: required", ErrRefused)
		}
		if cur.NextGroup >= maxShards {
			return fmt.Errorf("%w: group ids exhausted (%d)", ErrRefused, maxShards)
		}
		next.Groups = append(slices.Clone(cur.Groups), GroupInfo{ID: cur.NextGroup, Home: c.Home})
		next.NextGroup = cur.NextGroup + 1
		next.Reports = append(slices.Clone(cur.Reports), nil)
	case MetaRehomeGroup:
		var c metav1.RehomeGroup
		if err := unmarshal(body, &c); err != nil {
			return err
		}
		i, err := group("group", c.Group)
		if err != nil {
			return err
		}
		if c.Home == "" {
			return fmt.Errorf("%w: home: required", ErrRefused)
		}
		next.Groups = slices.Clone(cur.Groups)
		next.Groups[i].Home, next.Groups[i].Retiring = c.Home, false
	case MetaRetireGroup:
		var c metav1.RetireGroup
		if err := unmarshal(body, &c); err != nil {
			return err
		}
		i, err := group("group", c.Group)
		if err != nil {
			return err
		}
		next.Groups = slices.Clone(cur.Groups)
		next.Groups[i].Retiring = true
	case MetaRemoveGroup:
		var c metav1.RemoveGroup
		if err := unmarshal(body, &c); err != nil {
			return err
		}
		i, err := group("group", c.Group)
		if err != nil {
			return nil // already gone: a retried removal
		}
		if slices.Contains(cur.Table, c.Group) {
			return fmt.Errorf("%w: group: group %d still owns slots", ErrRefused, c.Group)
		}
		for _, m := range cur.Moves {
			if m.From == c.Group || m.To == c.Group {
				return fmt.Errorf("%w: group: move %d names group %d", ErrRefused, m.ID, c.Group)
			}
		}
		next.Groups = slices.Delete(slices.Clone(cur.Groups), i, i+1)
		next.Reports = slices.Clone(cur.Reports)
		next.Reports[c.Group] = nil
	case MetaPlanMoves:
		var c metav1.PlanMoves
		if err := unmarshal(body, &c); err != nil {
			return err
		}
		return planMoves(cur, next, &c, group)
	case MetaMoveFrozen:
		var c metav1.MoveFrozen
		if err := unmarshal(body, &c); err != nil {
			return err
		}
		m := cur.Move(c.Move)
		if m == nil || m.State != MovePlanned {
			return nil // a replayed step
		}
		next.Table = slices.Clone(cur.Table)
		for _, s := range m.Slots {
			next.Table[s] = m.To
		}
		next.Epoch = cur.Epoch + 1
		next.Moves = slices.Clone(cur.Moves)
		for i := range next.Moves {
			if next.Moves[i].ID == c.Move {
				next.Moves[i].State = MoveFlipped
			}
		}
	case MetaMoveImported:
		var c metav1.MoveImported
		if err := unmarshal(body, &c); err != nil {
			return err
		}
		if m := cur.Move(c.Move); m == nil || m.State != MoveFlipped {
			return nil
		}
		next.Moves = slices.DeleteFunc(slices.Clone(cur.Moves), func(m SlotMove) bool { return m.ID == c.Move })
	}
	return nil
}

// planMoves checks and records a PlanMoves command: all moves or none.
func planMoves(cur, next *MetaView, c *metav1.PlanMoves, group func(string, uint32) (int, error)) error {
	moving := map[uint32]bool{}
	for _, m := range cur.Moves {
		for _, s := range m.Slots {
			moving[s] = true
		}
	}
	total := 0
	moves := slices.Clone(cur.Moves)
	id := cur.NextMove
	for i, m := range c.Moves {
		f := fmt.Sprintf("moves[%d]", i)
		if _, err := group(f+".from", m.From); err != nil {
			return err
		}
		to, err := group(f+".to", m.To)
		if err != nil {
			return err
		}
		switch {
		case m.From == m.To:
			return fmt.Errorf("%w: %s.to: the same group as from", ErrRefused, f)
		case cur.Groups[to].Retiring:
			return fmt.Errorf("%w: %s.to: group %d is retiring", ErrRefused, f, m.To)
		case len(m.Slots) == 0:
			return fmt.Errorf("%w: %s.slots: empty", ErrRefused, f)
		}
		if total += len(m.Slots); total > maxMoveSlots {
			return fmt.Errorf("%w: %s.slots: more than %d slots in one command", ErrRefused, f, maxMoveSlots)
		}
		for j, s := range m.Slots {
			sf := fmt.Sprintf("%s.slots[%d]", f, j)
			switch {
			case int(s) >= cur.SlotCount:
				return fmt.Errorf("%w: %s: slot %d of %d", ErrRefused, sf, s, cur.SlotCount)
			case j > 0 && s <= m.Slots[j-1]:
				return fmt.Errorf("%w: %s: slots must be ascending", ErrRefused, sf)
			case cur.Table[s] != m.From:
				return fmt.Errorf("%w: %s: slot %d is owned by group %d, not %d", ErrRefused, sf, s, cur.Table[s], m.From)
			case moving[s]:
				return fmt.Errorf("%w: %s: slot %d is already moving", ErrRefused, sf, s)
			}
			moving[s] = true
		}
		moves = append(moves, SlotMove{ID: id, From: m.From, To: m.To, Slots: slices.Clone(m.Slots), State: MovePlanned})
		id++
	}
	next.Moves, next.NextMove = moves, id
	return nil
}

// unmarshal decodes a command body; a body that does not decode is
// corrupt.
func unmarshal(body []byte, m proto.Message) error {
	if err := proto.Unmarshal(body, m); err != nil {
		return fmt.Errorf("%w: %w", ErrCorrupt, err)
	}
	return nil
}

// snapshotSlots writes the slot fields of v into st.
func snapshotSlots(v *MetaView, st *metav1.State) {
	if !v.Slotted() {
		return
	}
	st.Slots, st.GroupsPerNode, st.NextGroup, st.Epoch, st.NextMove =
		uint32(v.SlotCount), uint32(v.GroupsPerNode), v.NextGroup, v.Epoch, v.NextMove
	for _, g := range v.Groups {
		st.Groups = append(st.Groups, &metav1.GroupState{Id: g.ID, Home: g.Home, Retiring: g.Retiring})
	}
	for s, g := range v.Table {
		if n := len(st.Table); n > 0 && st.Table[n-1].Group == g {
			st.Table[n-1].Count++
			continue
		}
		st.Table = append(st.Table, &metav1.SlotRun{First: uint32(s), Count: 1, Group: g})
	}
	for _, m := range v.Moves {
		st.Moves = append(st.Moves, &metav1.MoveState{Id: m.ID, From: m.From, To: m.To, Slots: m.Slots, State: uint32(m.State)})
	}
}

// restoreSlots reads the slot fields of a snapshot into v, checking that
// they make a sound table.
func restoreSlots(st *metav1.State, v *MetaView) error {
	if st.Slots == 0 {
		return nil
	}
	if st.Slots > maxSlots || st.NextGroup > maxShards {
		return fmt.Errorf("%w: meta snapshot: %d slots, %d groups", ErrCorrupt, st.Slots, st.NextGroup)
	}
	v.SlotCount, v.Shards, v.GroupsPerNode = int(st.Slots), int(st.Slots), int(st.GroupsPerNode)
	v.NextGroup, v.Epoch, v.NextMove = st.NextGroup, st.Epoch, st.NextMove
	for _, g := range st.Groups {
		if g.Id >= st.NextGroup || (len(v.Groups) > 0 && g.Id <= v.Groups[len(v.Groups)-1].ID) {
			return fmt.Errorf("%w: meta snapshot: group %d", ErrCorrupt, g.Id)
		}
		v.Groups = append(v.Groups, GroupInfo{ID: g.Id, Home: g.Home, Retiring: g.Retiring})
	}
	v.Table = make([]uint32, 0, st.Slots)
	for _, r := range st.Table {
		if r.First != uint32(len(v.Table)) || r.Count == 0 || uint64(r.First)+uint64(r.Count) > uint64(st.Slots) || v.Group(r.Group) == nil {
			return fmt.Errorf("%w: meta snapshot: slot run at %d", ErrCorrupt, r.First)
		}
		for range r.Count {
			v.Table = append(v.Table, r.Group)
		}
	}
	if len(v.Table) != int(st.Slots) {
		return fmt.Errorf("%w: meta snapshot: the table covers %d of %d slots", ErrCorrupt, len(v.Table), st.Slots)
	}
	for _, m := range st.Moves {
		if v.Group(m.From) == nil || v.Group(m.To) == nil || m.Id >= st.NextMove ||
			(m.State != uint32(MovePlanned) && m.State != uint32(MoveFlipped)) {
			return fmt.Errorf("%w: meta snapshot: move %d", ErrCorrupt, m.Id)
		}
		for _, s := range m.Slots {
			if s >= st.Slots {
				return fmt.Errorf("%w: meta snapshot: move %d slot %d", ErrCorrupt, m.Id, s)
			}
		}
		v.Moves = append(v.Moves, SlotMove{ID: m.Id, From: m.From, To: m.To, Slots: m.Slots, State: MoveState(m.State)})
	}
	v.Reports = make([]*metav1.ShardReport, st.NextGroup)
	return nil
}
