package cluster

import (
	"context"

	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/hashicorp/raft"

	"github.com/floodgate/floodgate/fsm"
	metav1 "github.com/floodgate/floodgate/proto/floodgate/meta/v1"
)

// reconcileSlots runs on a group's leader in a cluster of slots. It writes
// the group's ownership record once, then drives every move of the meta
// state that names the group, one protocol step each (docs/design/slots.md):
// the source freezes and flips, the target imports and closes the move,
// and the source drops what finished moves left frozen. Every step is a
// pure function of the meta state and the group's own state machine, so a
// new leader redoes whatever its predecessor did not finish, and a replayed
// step changes nothing.
func (n *Node) reconcileSlots(ctx context.Context, r *replica, v *fsm.MetaView) {
	if !v.Slotted() {
		return
	}
	own := r.fsm.Ownership()
	if !own.Initialized {
		n.initGroup(ctx, r, v)
		return
	}
	for m := range own.Frozen {
		if v.MoveDone(m) {
			// The target has imported: the frozen copies are dead weight.
			if err := n.applyShard(ctx, r, fsm.EncodeDrop(m)); err != nil {
				n.log.Warn("drop moved slots", "group", r.id, "move", m, "err", err)
			}
		}
	}
	for i := range v.Moves {
		mv := &v.Moves[i]
		switch {
		case int(mv.From) == r.id && mv.State == fsm.MovePlanned:
			n.freezeMove(ctx, r, mv, len(own.Frozen[mv.ID]) > 0)
		case int(mv.To) == r.id && mv.State == fsm.MoveFlipped:
			n.importMove(ctx, r, mv, v)
		}
	}
}

// initGroup writes the group's ownership record: the slots the table gives
// it now. A new group owns none (no move targets a group before it reports
// ready); a first group owns its range of the table.
func (n *Node) initGroup(ctx context.Context, r *replica, v *fsm.MetaView) {
	var owned []uint32
	for s, g := range v.Table {
		if int(g) == r.id {
			owned = append(owned, uint32(s))
		}
	}
	if err := n.applyShard(ctx, r, fsm.EncodeInit(uint32(r.id), uint32(v.SlotCount), owned)); err != nil {
		n.log.Warn("initialize group", "group", r.id, "err", err)
	}
}

// freezeMove stops the source group counting the move's slots and flips
// the table to the target. Fast decisions already answered are committed
// first, and new ones refused meanwhile (handOver), so every decision on
// the slots lands before the freeze and travels with the export. frozen
// says the group has frozen them already (a predecessor leader did).
func (n *Node) freezeMove(ctx context.Context, r *replica, mv *fsm.SlotMove, frozen bool) {
	// The watch first: the walk for the moving slots' records happens
	// while they still answer checks, not in the frozen window. A leader
	// that finds the slots frozen already does not walk now; an export
	// from it looks at every record.
	start := time.Now()
	if !frozen && !n.stillPlanned(ctx, mv.ID) {
		return
	}
	if !frozen {
		if err := r.fsm.WatchSlots(mv.ID, mv.Slots); err != nil {
			n.log.Debug("watch slots", "group", r.id, "move", mv.ID, "err", err)
		}
	}
	watched := time.Since(start)
	if err := freeze(r.fast, r.group.raft, mv.ID, mv.Slots, n.cfg.CommitTimeout); err != nil {
		n.log.Warn("freeze slots", "group", r.id, "move", mv.ID, "err", err)
		return
	}
	if err := n.applyMeta(ctx, fsm.MetaMoveFrozen, &metav1.MoveFrozen{Move: mv.ID}); err != nil {
		n.log.Warn("flip slots", "group", r.id, "move", mv.ID, "err", err)
		return
	}
	n.log.Info("slots frozen and flipped", "move", mv.ID, "from", mv.From, "to", mv.To, "slots", len(mv.Slots),
		"watch", watched, "took", time.Since(start))
}

// stillPlanned reports whether move id is still planned once this node's
// meta state has caught up with the meta leader's. A meta replica behind
// may still list as planned a move long done, whose slots a later move
// may have brought back to the group: a freeze written for it then
// stopped those slots counting here while the table sent them here (the
// state machine now spares such slots, but a replica of an older release
// does not: mid-roll the replicas would part ways).
func (n *Node) stillPlanned(ctx context.Context, id uint64) bool {
	cctx, cancel := context.WithTimeout(ctx, n.cfg.CommitTimeout)
	defer cancel()
	if err := n.CatchUpMeta(cctx); err != nil {
		n.log.Debug("catch up with the meta leader before a freeze", "move", id, "err", err)
		return false // tried again at the next pass
	}
	mv := n.View().Move(id)
	return mv != nil && mv.State == fsm.MovePlanned
}

// watchMoves starts, on this node's replica of a planned move's source,
// the watch that lets the move's export read only the moving slots'
// records (fsm.Shard.WatchSlots), if this node leads the move's target:
// the target exports from its own replica of the source when it has one
// (exportFrom). The source's leader fills its own watch before it freezes
// (freezeMove), for a target that has none; other replicas export
// nothing. An export finishes a walk still under way. A watch refused
// (this replica has yet to apply the slots' arrival) is tried again on a
// later pass.
func (n *Node) watchMoves(r *replica, v *fsm.MetaView) {
	r.watchMu.Lock()
	defer r.watchMu.Unlock()
	planned := map[uint64]bool{}
	for i := range v.Moves {
		mv := &v.Moves[i]
		if int(mv.From) != r.id || mv.State != fsm.MovePlanned {
			continue
		}
		planned[mv.ID] = true
		if r.watching[mv.ID] {
			continue
		}
		if to := n.replica(int(mv.To)); to == nil || !to.group.isLeader() {
			continue
		}
		if r.watching == nil {
			r.watching = map[uint64]bool{}
		}
		r.watching[mv.ID] = true
		n.wg.Add(1)
		go func() {
			defer n.wg.Done()
			if err := r.fsm.WatchSlots(mv.ID, mv.Slots); err != nil {
				n.log.Debug("watch slots", "group", r.id, "move", mv.ID, "err", err)
				r.watchMu.Lock()
				delete(r.watching, mv.ID)
				r.watchMu.Unlock()
			}
		}()
	}
	for m := range r.watching {
		if !planned[m] {
			delete(r.watching, m) // frozen or done: nothing more to start
		}
	}
}

// freeze writes the freeze of move's slots once lane has committed every
// fast decision answered so far, refusing new ones until the freeze's
// outcome is known (lane.handOver). It waits for that outcome with no
// deadline of its own: fast checks resumed while the freeze may still
// apply would be counted after it and dropped at apply (not owned).
// Raft answers the future once the entry is applied, or at leadership
// loss or shutdown.
func freeze(lane *fastLane, r *raft.Raft, move uint64, slots []uint32, timeout time.Duration) error {
	return lane.handOver(func() error {
		f := r.Apply(fsm.EncodeFreeze(move, slots), timeout)
		if err := f.Error(); err != nil {
			return err
		}
		if err, ok := f.Response().(error); ok {
			return err
		}
		return nil
	})
}

// importMove copies the move's slots from a source replica that applied
// the freeze into this group, in entries of about fsm.PieceBytes of
// states at most (fsm.Shard.CutImport), then closes the move. Whether the
// import is in already is the group's record of it (MoveApplied), never
// which slots the group owns: a new leader's state machine may be behind
// its log, and one still holding the slots from before an earlier move
// took them away would close the move without importing (no group owning
// the slots once it caught up). The record only grows, so a lagging one
// errs toward an import again, which applies as a no-op.
func (n *Node) importMove(ctx context.Context, r *replica, mv *fsm.SlotMove, v *fsm.MetaView) {
	start := time.Now()
	var exported time.Duration // how long the exports took: 0 if none
	parts := 0
	err := importInParts(mv.Slots, func(slots []uint32) error {
		if _, imported := r.fsm.MoveApplied(mv.ID, slots); imported {
			return nil
		}
		t := time.Now()
		export, err := n.exportFrom(ctx, mv, v, slots)
		exported += time.Since(t)
		if err != nil {
			return fmt.Errorf("export slots: %w", err)
		}
		// Decoded whole before any of it is logged: the export comes from
		// another leader, maybe of a newer release, and an entry this
		// binary cannot read would stop every replica that runs it. Not
		// logged, the move waits for this node's upgrade.
		if _, err := fsm.CountStates(export); err != nil {
			return fmt.Errorf("export slots: %w", err)
		}
		pieces, err := r.fsm.CutImport(slots, export, fsm.PieceBytes)
		if err != nil {
			return fmt.Errorf("export slots: %w", err)
		}
		for _, p := range pieces {
			if _, imported := r.fsm.MoveApplied(mv.ID, p.Slots); imported {
				continue // a retry: this piece went in before
			}
			if err := n.applyShard(ctx, r, fsm.EncodeImport(mv.ID, mv.From, p.Slots, p.States)); err != nil {
				return fmt.Errorf("import slots into group %d: %w", r.id, err)
			}
			parts++
		}
		return nil
	})
	if err != nil {
		n.log.Warn("move slots", "move", mv.ID, "from", mv.From, "err", err)
		return
	}
	if err := n.applyMeta(ctx, fsm.MetaMoveImported, &metav1.MoveImported{Move: mv.ID}); err != nil {
		n.log.Warn("close move", "move", mv.ID, "err", err)
		return
	}
	n.log.Info("slots imported", "move", mv.ID, "from", mv.From, "to", mv.To, "slots", len(mv.Slots),
		"entries", parts, "export", exported, "took", time.Since(start))
}

// importInParts imports slots with one call of imp when their export fits
// one import entry, else in halves, each halved again while too large
// (fsm.ErrExportTooLarge): many long keys or long sliding logs can make the
// export of a whole move larger than an entry may be, and the move must
// not stay frozen for it. imp skips a part already imported (a retry).
// A single slot too large fails: nothing smaller can be sent.
func importInParts(slots []uint32, imp func([]uint32) error) error {
	err := imp(slots)
	if !errors.Is(err, fsm.ErrExportTooLarge) || len(slots) < 2 {
		return err
	}
	half := len(slots) / 2
	if err := importInParts(slots[:half], imp); err != nil {
		return err
	}
	return importInParts(slots[half:], imp)
}

// exportFrom gets the states of slots, some or all of the move's, from a
// replica of the source group: this node's own if it applied the freeze,
// else the source's leader, else any other replica the source's report
// lists. Too large an export is fsm.ErrExportTooLarge, from any of them.
func (n *Node) exportFrom(ctx context.Context, mv *fsm.SlotMove, v *fsm.MetaView, slots []uint32) ([]byte, error) {
	if src := n.replica(int(mv.From)); src != nil {
		b, err := src.fsm.ExportSlots(mv.ID, slots)
		if err == nil || errors.Is(err, fsm.ErrExportTooLarge) {
			return b, err
		}
	}
	var errs []error
	for _, id := range reportedReplicas(v, int(mv.From)) {
		addr := n.addrOf(id)
		if id == n.cfg.NodeID || addr == "" {
			continue
		}
		b, err := n.peers.ExportSlots(ctx, addr, int(mv.From), mv.ID, slots)
		if err == nil || errors.Is(err, fsm.ErrExportTooLarge) {
			return b, err
		}
		errs = append(errs, fmt.Errorf("%s: %w", id, err))
	}
	if len(errs) == 0 {
		return nil, fmt.Errorf("group %d: no replica to export from", mv.From)
	}
	return nil, errors.Join(errs...)
}

// reportedReplicas returns the node ids group's last report names: its
// leader first, then its replicas.
func reportedReplicas(v *fsm.MetaView, group int) []string {
	if group < 0 || group >= len(v.Reports) || v.Reports[group] == nil {
		return nil
	}
	rep := v.Reports[group]
	ids := []string{rep.Leader}
	for _, rr := range rep.Replicas {
		if !slices.Contains(ids, rr.NodeId) {
			ids = append(ids, rr.NodeId)
		}
	}
	return ids
}

// MoveApplied reports whether this node's replica of group has applied
// move's freeze of slots and its import of them (fsm.Shard.MoveApplied);
// both false without a replica.
func (n *Node) MoveApplied(group int, move uint64, slots []uint32) (frozen, imported bool) {
	r := n.replica(group)
	if r == nil {
		return false, false
	}
	return r.fsm.MoveApplied(move, slots)
}

// ExportSlots returns the states of slots this node's replica of group
// froze for move, for the move's target to import (Peer.ExportSlots).
func (n *Node) ExportSlots(group int, move uint64, slots []uint32) ([]byte, error) {
	r := n.replica(group)
	if r == nil {
		return nil, &NotLeaderError{Group: shardName(group)}
	}
	return r.fsm.ExportSlots(move, slots)
}

// applyShard writes one entry to r's group (this node leads it) and
// returns the state machine's error, if it refused the entry. It stops
// waiting at ctx's end: a group that lost its quorum may never commit, and
// a reconciler must not hold up the node's shutdown.
func (n *Node) applyShard(ctx context.Context, r *replica, entry []byte) error {
	f := r.group.raft.Apply(entry, n.cfg.CommitTimeout)
	if err := awaitFuture(ctx, f); err != nil {
		return err
	}
	if err, ok := f.Response().(error); ok {
		return err
	}
	return nil
}

// awaitFuture waits for f until ctx ends. Raft answers nearly every future
// at the latest when the group shuts down, so a future left behind seldom
// keeps its goroutine for long (a leadership transfer taken after the
// shutdown is the exception: see Group.transferLeadership).
func awaitFuture(ctx context.Context, f raft.Future) error {
	done := make(chan error, 1)
	go func() { done <- f.Error() }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return fmt.Errorf("%w: %w", ErrUnavailable, ctx.Err())
	}
}
