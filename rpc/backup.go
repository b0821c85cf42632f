package rpc

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"slices"

	"google.golang.org/grpc"

	"github.com/floodgate/floodgate/backup"
	"github.com/floodgate/floodgate/cluster"
	"github.com/floodgate/floodgate/cluster/hashing"
	"github.com/floodgate/floodgate/fsm"
	peerv1 "github.com/floodgate/floodgate/proto/floodgate/peer/v1"
	pb "github.com/floodgate/floodgate/proto/floodgate/v1"
	"github.com/floodgate/floodgate/rpc/validate"
)

// chunkSize is the size of the pieces a backup travels in.
const chunkSize = 1 << 20

// backupRecord is the most states a backup's record holds (a group's
// states are cut into as many as it takes, each key whole in one): half
// of backup.MaxRecord, which a record may pass only by one key's states.
// A group of more used to make every save fail.
const backupRecord = backup.MaxRecord / 2

// saveAttempts bounds how often a save is taken again because a slot
// moved under it in a way that could leave its keys out (lostMove).
const saveAttempts = 3

// SaveSnapshot implements pb.AdminServer: the policies, then each group's
// states from its leader, streamed as a backup file. Each key is saved
// once: while slots move, two groups export it (the source's frozen copy,
// the target's imported one), and the backup keeps the copy of the group
// the view's slot table names (fsm.OneCopyPerKey).
func (a *AdminServer) SaveSnapshot(_ *pb.SaveSnapshotRequest, stream pb.Admin_SaveSnapshotServer) error {
	data, err := a.saveBackup(stream.Context(), a.exportGroup)
	if err != nil {
		return toStatus(err)
	}
	for len(data) > 0 {
		n := min(len(data), chunkSize)
		if err := stream.Send(&pb.SnapshotChunk{Data: data[:n]}); err != nil {
			return err
		}
		data = data[n:]
	}
	return nil
}

// saveBackup returns a backup of the cluster, each group's states from
// export. The groups are exported one after another, and a slot that
// finishes a move between the export of its target and that of its
// source (the target had not imported it, the source has dropped it) is
// in neither: such a backup is taken again, up to saveAttempts times.
func (a *AdminServer) saveBackup(ctx context.Context, export func(context.Context, int) ([]byte, error)) ([]byte, error) {
	for attempt := 1; ; attempt++ {
		data, lost, err := a.saveOnce(ctx, export)
		switch {
		case err != nil:
			return nil, err
		case lost == "":
			return data, nil
		case attempt == saveAttempts:
			return nil, fmt.Errorf("%w: slots moved under the backup %d times in a row (the last: %s), so its keys could be in no group's states: "+
				"take it again once the cluster is balanced (floodgatectl status)", cluster.ErrNotReady, saveAttempts, lost)
		}
	}
}

// saveOnce takes a backup. lost names a slot move that finished while it
// was taken and may have left keys out of it (the backup is then
// dropped).
func (a *AdminServer) saveOnce(ctx context.Context, export func(context.Context, int) ([]byte, error)) (data []byte, lost string, err error) {
	v := a.node.View()
	if !v.Initialized() {
		return nil, "", fmt.Errorf("%w: no cluster to back up yet", cluster.ErrNotReady)
	}
	var buf bytes.Buffer
	w := backup.NewWriter(&buf)
	var policies []*pb.Policy
	for _, name := range slices.Sorted(maps.Keys(v.Policies)) {
		policies = append(policies, validate.PolicyToProto(v.Policies[name]))
	}
	if err := w.Policies(policies); err != nil {
		return nil, "", err
	}
	var groups []int
	var exports [][]byte
	total := 0
	for _, g := range holders(v) {
		states, err := export(ctx, int(g))
		if err != nil {
			return nil, "", fmt.Errorf("group %d: %w", g, err)
		}
		// Every export is held until the backup is written: one larger
		// than a restore reads is refused now, not once this node has
		// built it whole.
		if total += len(states); total > backup.MaxSize {
			return nil, "", fmt.Errorf("%w: the groups' states come to more than %d bytes by group %d, more than a restore reads (backup.MaxSize): "+
				"back up fewer key states (lower --max-key-states, shorter windows)", cluster.ErrFull, backup.MaxSize, g)
		}
		groups, exports = append(groups, int(g)), append(exports, states)
	}
	if v.Slotted() {
		// The moves that finished meanwhile, as the meta leader has them:
		// a source drops a slot only once the meta group says the target
		// imported it, and this node's view may lag.
		cctx, cancel := context.WithTimeout(ctx, catchUpWait)
		err := a.node.CatchUpMeta(cctx)
		cancel()
		if err != nil {
			return nil, "", fmt.Errorf("the meta group, read to check that no slot moved out of the backup while it was taken: %w", err)
		}
		if lost = lostMove(v, a.node.View(), groups); lost != "" {
			return nil, lost, nil
		}
	}
	ownerOf := func(key string) int { return int(v.GroupOf(hashing.ShardOf(key, v.Shards))) }
	once, err := fsm.OneCopyPerKey(exports, groups, ownerOf)
	if err != nil {
		return nil, "", err
	}
	exports = nil
	for i := range once {
		pieces, err := fsm.CutStates(once[i], backupRecord)
		if err != nil {
			return nil, "", fmt.Errorf("group %d: %w", groups[i], err)
		}
		for _, p := range pieces {
			if err := w.States(p); err != nil {
				return nil, "", fmt.Errorf("group %d: %w", groups[i], err)
			}
		}
		once[i] = nil // held in buf now
	}
	if err := w.Close(); err != nil {
		return nil, "", err
	}
	return buf.Bytes(), "", nil
}

// holders returns the groups of v that may hold states, in order: in a
// cluster of slots, those that own a slot, or are the source of a move in
// flight (its frozen copy). A group just added owns none until it has a
// leader and slots move to it: a save waited for its leader, and failed
// (no leader) when that took longer than --leader-wait.
func holders(v *fsm.MetaView) []uint32 {
	if !v.Slotted() {
		return v.GroupIDs()
	}
	holds := map[uint32]bool{}
	for _, g := range v.Table {
		holds[g] = true
	}
	for _, m := range v.Moves {
		holds[m.From] = true
	}
	var out []uint32
	for _, g := range v.GroupIDs() {
		if holds[g] {
			out = append(out, g)
		}
	}
	return out
}

// lostMove names a slot move that finished between views before and
// after (a save's exports of groups, in order, ran between them)
// and may have left its slots' keys out of every export: its target was
// exported before its source, or not at all (a group added meanwhile).
// A move that finished was imported by its target, then dropped by its
// source; the slots were in the target's export if that came after the
// import, and in the source's if that came before the drop, so a target
// exported after its source always holds them or the source does. A move
// planned after before is known by the table: its slots' owners before
// and after (a slot moved twice meanwhile counts as one move, from its
// first owner to its last); one still in flight after has dropped
// nothing.
func lostMove(before, after *fsm.MetaView, groups []int) string {
	order := map[uint32]int{}
	for i, g := range groups {
		order[uint32(g)] = i
	}
	unsafe := func(from, to uint32) bool {
		t, exported := order[to]
		return !exported || t < order[from]
	}
	inFlight := map[uint64]bool{}
	known := map[uint32]bool{} // slots of the moves before knows, or still moving
	for _, m := range after.Moves {
		inFlight[m.ID] = true
		for _, s := range m.Slots {
			known[s] = true // not dropped by its source yet
		}
	}
	for _, m := range before.Moves {
		for _, s := range m.Slots {
			known[s] = true
		}
		if !inFlight[m.ID] && unsafe(m.From, m.To) {
			return fmt.Sprintf("move %d of %d slots from group %d to group %d", m.ID, len(m.Slots), m.From, m.To)
		}
	}
	for s := range min(len(before.Table), len(after.Table)) {
		if from, to := before.Table[s], after.Table[s]; from != to && !known[uint32(s)] && unsafe(from, to) {
			return fmt.Sprintf("slot %d, moved from group %d to group %d", s, from, to)
		}
	}
	return ""
}

// exportGroup returns group g's states from its leader. --leader-wait
// bounds finding the leader; the transfer, of up to maxGroupExport, is
// bounded by the caller's ctx (floodgatectl's --timeout), not by it.
func (a *AdminServer) exportGroup(ctx context.Context, g int) ([]byte, error) {
	var states []byte
	bulk := ctx
	err := onLeader(ctx, a.node, g, a.cfg.LeaderWait, true, func(_ context.Context, rt cluster.Route) error {
		if rt.Local {
			var err error
			states, err = a.node.ExportGroup(bulk, g)
			return err
		}
		resp, err := peerv1.NewPeerClient(a.peers.conn(rt.Addr)).ExportGroup(bulk, &peerv1.ExportGroupRequest{Group: uint32(g)},
			grpc.MaxCallRecvMsgSize(maxGroupExport)) // gRPC reads 4 MiB by default
		states = resp.GetStates()
		return peerRefusal(rt.Addr, err)
	})
	return states, err
}
