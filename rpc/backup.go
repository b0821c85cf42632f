package rpc

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"maps"
	"slices"

	"github.com/floodgate/floodgate/backup"
	"github.com/floodgate/floodgate/cluster"
	"github.com/floodgate/floodgate/fsm"
	"github.com/floodgate/floodgate/policy"
	peerv1 "github.com/floodgate/floodgate/proto/floodgate/peer/v1"
	pb "github.com/floodgate/floodgate/proto/floodgate/v1"
	"github.com/floodgate/floodgate/rpc/validate"
)

// chunkSize is the size of the pieces a backup travels in.
const chunkSize = 1 << 20

// SaveSnapshot implements pb.AdminServer: the policies, then each group's
// states from its leader, streamed as a backup file.
func (a *AdminServer) SaveSnapshot(_ *pb.SaveSnapshotRequest, stream pb.Admin_SaveSnapshotServer) error {
	ctx := stream.Context()
	v := a.node.View()
	if !v.Initialized() {
		return toStatus(fmt.Errorf("%w: no cluster to back up yet", cluster.ErrNotReady))
	}
	var buf bytes.Buffer
	w := backup.NewWriter(&buf)
	var policies []*pb.Policy
	for _, name := range slices.Sorted(maps.Keys(v.Policies)) {
		policies = append(policies, validate.PolicyToProto(v.Policies[name]))
	}
	if err := w.Policies(policies); err != nil {
		return toStatus(err)
	}
	for _, g := range v.GroupIDs() {
		var states []byte
		err := onLeader(ctx, a.node, int(g), a.cfg.LeaderWait, true, func(ctx context.Context, rt cluster.Route) error {
			if rt.Local {
				var err error
				states, err = a.node.ExportGroup(ctx, int(g))
				return err
			}
			resp, err := peerv1.NewPeerClient(a.peers.conn(rt.Addr)).ExportGroup(ctx, &peerv1.ExportGroupRequest{Group: g})
			states = resp.GetStates()
			return err
		})
		if err != nil {
			return toStatus(fmt.Errorf("group %d: %w", g, err))
		}
		if err := w.States(states); err != nil {
			return toStatus(err)
		}
	}
	if err := w.Close(); err != nil {
		return toStatus(err)
	}
	for data := buf.Bytes(); len(data) > 0; {
		n := min(len(data), chunkSize)
		if err := stream.Send(&pb.SnapshotChunk{Data: data[:n]}); err != nil {
			return err
		}
		data = data[n:]
	}
	return nil
}

// RestoreSnapshot implements pb.AdminServer: the whole backup is read and
// checked first; then its policies are stored, and each key's states go
// to the leader of the group that owns the key now. Restoring the same
// backup twice leaves the same counts: each key's states are replaced.
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
	// Everything is decoded and checked before anything is stored.
	resp := &pb.RestoreSnapshotResponse{}
	var ps []*policy.Policy
	if len(b.Policies) > 0 {
		if ps, err = validate.Policies(b.Policies, a.cfg.MaxLogLength); err != nil {
			return toStatus(fmt.Errorf("backup: %w", err))
		}
	}
	var split []map[int][]byte
	for _, states := range b.States {
		parts, keys, skipped, err := fsm.SplitExport(states, a.node.GroupOfKey)
		if err != nil {
			return toStatus(fmt.Errorf("%w: backup states: %w", ErrInvalid, err))
		}
		if skipped > 0 {
			return toStatus(fmt.Errorf("%w: the slot table is not known here yet", cluster.ErrNotReady))
		}
		split = append(split, parts)
		resp.Keys += int64(keys)
	}
	if len(ps) > 0 {
		if err := a.node.SetPolicies(ctx, ps); err != nil {
			return toStatus(fmt.Errorf("backup policies: %w", err))
		}
		resp.Policies = int32(len(ps))
	}
	for _, parts := range split {
		for _, g := range slices.Sorted(maps.Keys(parts)) {
			if err := a.restoreGroup(ctx, g, parts[g]); err != nil {
				return toStatus(fmt.Errorf("group %d: %w", g, err))
			}
		}
	}
	return stream.SendAndClose(resp)
}

func (a *AdminServer) restoreGroup(ctx context.Context, g int, states []byte) error {
	return onLeader(ctx, a.node, g, a.cfg.LeaderWait, true, func(ctx context.Context, rt cluster.Route) error {
		if rt.Local {
			_, err := a.node.RestoreGroup(ctx, g, states)
			return err
		}
		_, err := peerv1.NewPeerClient(a.peers.conn(rt.Addr)).RestoreGroup(ctx, &peerv1.RestoreGroupRequest{Group: uint32(g), States: states})
		return err
	})
}
