package rpc

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"time"

	"github.com/floodgate/floodgate/backup"
	"github.com/floodgate/floodgate/cluster"
	"github.com/floodgate/floodgate/fsm"
	"github.com/floodgate/floodgate/policy"
	peerv1 "github.com/floodgate/floodgate/proto/floodgate/peer/v1"
	pb "github.com/floodgate/floodgate/proto/floodgate/v1"
	"github.com/floodgate/floodgate/rpc/validate"
	"google.golang.org/grpc"
	"google.golang.org/grpc/peer"
)

// restorePiece is about the most bytes of states a restore sends to a
// group in one message and one Raft entry (fsm.CutStates): a group's part
// of a backup may be 64 MiB, a node's gRPC server reads 16 MiB in one
// message (maxMessage), and a large entry holds up every group's Raft
// traffic (fsm.PieceBytes).
const restorePiece = fsm.PieceBytes

// restorePlan is a backup checked whole and split by the slot table:
// what a restore writes.
type restorePlan struct {
	policies []*policy.Policy
	// parts are each group record's states split by group, in the file's
	// order, each group's cut into pieces of about restorePiece bytes.
	parts []map[int][][]byte
	keys  int // distinct keys
}

// RestoreSnapshot implements pb.AdminServer: the whole backup is read and
// checked first (policies, every group's states, their log times); then
// its policies are stored, and each key's states go to the leader of the
// group that owns the key now. Restoring the same backup twice leaves the
// same counts: each key's states are replaced.
func (a *AdminServer) RestoreSnapshot(stream pb.Admin_RestoreSnapshotServer) error {
	ctx := stream.Context()
	var data []byte
	for {
		chunk, err := stream.Recv()
		if err == io.EOF {
			break
		}
		if err != nil {
			return err
		}
		if len(data)+len(chunk.Data) > backup.MaxSize {
			return toStatus(fmt.Errorf("%w: backup: over %d bytes", ErrInvalid, backup.MaxSize))
		}
		data = append(data, chunk.Data...)
	}
	b, err := backup.Parse(data)
	if err != nil {
		return toStatus(fmt.Errorf("%w: backup: %w", ErrInvalid, err))
	}
	resp, err := a.restore(ctx, b, a.node.SetPolicies)
	if err != nil {
		return toStatus(err)
	}
	return stream.SendAndClose(resp)
}

// restore checks b whole, then writes it: each group's states, then its
// policies through setPolicies, MaxPolicies to a meta entry (as
// SetPolicies bounds one call: a cluster may hold more, set over several
// calls). States come first: a group that refuses them (full under
// --max-key-states with the states it holds besides the backup's, which
// only its leader knows) then leaves the cluster's policies as they were,
// not replaced by the backup's with none of its counts. Only a write that
// fails can leave part of b written (the meta leader lost past ctx's
// deadline, a policy's colocate changed meanwhile by another call, a group
// without a leader or full): its error says what was stored, and a
// restore of b run again, once the cause is gone, finishes it.
func (a *AdminServer) restore(ctx context.Context, b *backup.Backup,
	setPolicies func(context.Context, []*policy.Policy) error) (*pb.RestoreSnapshotResponse, error) {
	plan, err := a.planRestore(ctx, b)
	if err != nil {
		return nil, err
	}
	pieces := 0
	for _, parts := range plan.parts {
		for _, p := range parts {
			pieces += len(p)
		}
	}
	stored := func(done, policies int, err error) string {
		if policies == 0 && done == 0 {
			return ""
		}
		again := "a restore of the same backup run again finishes it"
		switch {
		case errors.Is(err, cluster.ErrFull):
			again = "once the group has room (raise --max-key-states on every node, or let states expire), a restore of the same backup run again finishes it"
		case errors.Is(err, fsm.ErrRefused):
			again = "once what was refused is resolved, a restore of the same backup run again finishes it"
		}
		return fmt.Sprintf(" (stored before this: %d of %d parts of the backup's group states, and %d of its %d policies; %s)",
			done, pieces, policies, len(plan.policies), again)
	}
	done := 0
	for _, parts := range plan.parts {
		for _, g := range slices.Sorted(maps.Keys(parts)) {
			for _, piece := range parts[g] {
				if err := a.restoreRouted(ctx, g, piece, time.Now().Add(restoreMoveWait)); err != nil {
					return nil, fmt.Errorf("group %d: %w%s", g, err, stored(done, 0, err))
				}
				done++
			}
		}
	}
	for off := 0; off < len(plan.policies); off += validate.MaxPolicies {
		chunk := plan.policies[off:min(off+validate.MaxPolicies, len(plan.policies))]
		if err := setPolicies(ctx, chunk); err != nil {
			return nil, fmt.Errorf("%w%s", a.policiesError(ctx, off, chunk, err), stored(done, off, err))
		}
	}
	return &pb.RestoreSnapshotResponse{Policies: int32(len(plan.policies)), Keys: int64(plan.keys)}, nil
}

// policiesError describes err, the failure to store chunk, the backup's
// policies from policies[off]. The meta group names a refused policy by
// its index in its entry, not in the backup: one refused (its colocate
// changed by another call since the restore checked it) is named again
// by its index in the backup.
func (a *AdminServer) policiesError(ctx context.Context, off int, chunk []*policy.Policy, err error) error {
	if errors.Is(err, fsm.ErrRefused) {
		cctx, cancel := context.WithTimeout(ctx, catchUpWait)
		_ = a.node.CatchUpMeta(cctx) // best effort: else err as it is
		cancel()
		v := a.node.View()
		for i, p := range chunk {
			if cerr := fsm.CheckReplace(v.Policies[p.Name], p); cerr != nil {
				return fmt.Errorf("%w: backup: policies[%d].%w", fsm.ErrRefused, off+i, cerr)
			}
		}
	}
	return fmt.Errorf("backup: policies[%d] to policies[%d]: %w", off, off+len(chunk)-1, err)
}

// planRestore checks everything a restore of b would write, and writes
// nothing: errors name the policy or group record, and where it is.
func (a *AdminServer) planRestore(ctx context.Context, b *backup.Backup) (*restorePlan, error) {
	plan := &restorePlan{}
	if len(b.Policies) > 0 {
		ps, err := validate.PolicyList(b.Policies, maxLog(a.cfg.MaxLogLength, a.node))
		if err != nil {
			return nil, fmt.Errorf("backup: %w", err)
		}
		// The meta group refuses a policy that changes colocate; with
		// policies stored in several entries, a refusal in a later one
		// would leave the earlier ones stored, so the rule is checked
		// here first against the policies this node knows.
		cctx, cancel := context.WithTimeout(ctx, catchUpWait)
		_ = a.node.CatchUpMeta(cctx) // best effort: the meta group checks again
		cancel()
		v := a.node.View()
		for i, p := range ps {
			if err := fsm.CheckReplace(v.Policies[p.Name], p); err != nil {
				return nil, fmt.Errorf("%w: backup: policies[%d].%w", fsm.ErrRefused, i, err)
			}
		}
		plan.policies = ps
	}
	sp := fsm.Splitter{GroupOf: a.node.GroupOfKey}
	for i, states := range b.States {
		where := fmt.Sprintf("backup: group record %d of %d (at byte %d)", i+1, len(b.States), b.StatesAt[i])
		parts, logTime, err := sp.Split(states)
		if err != nil {
			return nil, fmt.Errorf("%w: %s: %w", ErrInvalid, where, err)
		}
		if sp.Skipped > 0 {
			return nil, fmt.Errorf("%w: the slot table is not known here yet", cluster.ErrNotReady)
		}
		if err := a.node.CheckRestoreTime(where, logTime); err != nil {
			return nil, err
		}
		cut := map[int][][]byte{}
		for g, states := range parts {
			if cut[g], err = fsm.CutStates(states, restorePiece); err != nil {
				return nil, fmt.Errorf("%s: group %d's part: %w", where, g, err)
			}
		}
		plan.parts = append(plan.parts, cut)
	}
	plan.keys = sp.Keys
	if err := a.checkRoom(plan); err != nil {
		return nil, err
	}
	return plan, nil
}

// checkRoom refuses a plan that gives a group more key states than
// --max-key-states, or states holding more bytes than --max-state-mib
// (this node's; each group's leader checks its own with the states it
// holds, but only as each group is written). A backup of a larger
// cluster restored into a smaller one is refused so before anything is
// written.
func (a *AdminServer) checkRoom(plan *restorePlan) error {
	cfg := a.node.Config()
	if cfg.MaxKeyStates <= 0 && cfg.MaxStateBytes <= 0 {
		return nil
	}
	held := map[int]fsm.Room{}
	for _, parts := range plan.parts {
		for g, pieces := range parts {
			for _, piece := range pieces {
				r, err := fsm.CountStates(piece)
				if err != nil {
					return fmt.Errorf("%w: backup: group %d's states: %w", ErrInvalid, g, err)
				}
				h := held[g]
				h.States, h.Bytes = h.States+r.States, h.Bytes+r.Bytes
				held[g] = h
			}
		}
	}
	for _, g := range slices.Sorted(maps.Keys(held)) {
		if h := held[g]; cfg.MaxKeyStates > 0 && h.States > cfg.MaxKeyStates {
			return fmt.Errorf("%w: backup: group %d would hold %d of its key states, over --max-key-states (%d): "+
				"raise it on every node (0: no bound), or restore into a cluster of more groups", cluster.ErrFull, g, h.States, cfg.MaxKeyStates)
		} else if cfg.MaxStateBytes > 0 && h.Bytes > cfg.MaxStateBytes {
			return fmt.Errorf("%w: backup: group %d's states would hold %d bytes, over --max-state-mib (%d bytes): "+
				"raise it on every node (0: no bound), or restore into a cluster of more groups", cluster.ErrFull, g, h.Bytes, cfg.MaxStateBytes)
		}
	}
	return nil
}

// restoreMoveWait bounds how long a restore's piece waits for the slot
// table to name the groups that own its keys now, when a slot moved
// since the restore was planned (a restore while nodes join or leave).
const restoreMoveWait = 30 * time.Second

// restoreRouted writes piece, states the plan gave group g, to the groups
// that own its keys now: whole to g, or, when g refuses it as moved
// (nothing written), split again by this node's slot table once that
// names other groups, each part sent on likewise, before deadline. A
// restore that met a moved slot failed, and failed again when re-run
// while moves went on.
func (a *AdminServer) restoreRouted(ctx context.Context, g int, piece []byte, deadline time.Time) error {
	for round := 0; ; round++ {
		changed := a.node.MetaChanged() // before the write: a change meanwhile is not missed
		err := a.restoreGroup(ctx, g, piece)
		if !errors.Is(err, cluster.ErrMoved) {
			return err
		}
		sp := fsm.Splitter{GroupOf: a.node.GroupOfKey}
		parts, _, serr := sp.Split(piece)
		if serr != nil {
			return fmt.Errorf("%w (split again: %w)", err, serr)
		}
		if sp.Skipped == 0 && (len(parts) > 1 || parts[g] == nil) {
			for _, to := range slices.Sorted(maps.Keys(parts)) {
				if err := a.restoreRouted(ctx, to, parts[to], deadline); err != nil {
					return err
				}
			}
			return nil
		}
		if err := awaitTable(ctx, changed, deadline, round, err); err != nil {
			return err
		}
	}
}

// restoreGroup sends states, all of group g's keys, to g's leader.
// --leader-wait bounds finding the leader; the transfer and its entry's
// commit are bounded by the caller's ctx, as exportGroup's.
func (a *AdminServer) restoreGroup(ctx context.Context, g int, states []byte) error {
	bulk := ctx
	return onLeader(ctx, a.node, g, a.cfg.LeaderWait, false, func(_ context.Context, rt cluster.Route) error {
		if rt.Local {
			_, err := a.node.RestoreGroup(bulk, g, states)
			return err
		}
		var p peer.Peer
		_, err := peerv1.NewPeerClient(a.peers.conn(rt.Addr)).RestoreGroup(bulk, &peerv1.RestoreGroupRequest{Group: uint32(g), States: states}, grpc.Peer(&p))
		return peerWriteError(rt.Addr, err, &p)
	})
}
