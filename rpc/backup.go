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

// SaveSnapshot implements pb.AdminServer: the policies, then each group's
// states from its leader, streamed as a backup file. Each key is saved
// once: while slots move, two groups export it (the source's frozen copy,
// the target's imported one), and the backup keeps the copy of the group
// the view's slot table names (fsm.OneCopyPerKey).
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
	var groups []int
	var exports [][]byte
	for _, g := range v.GroupIDs() {
		states, err := a.exportGroup(ctx, int(g))
		if err != nil {
			return toStatus(fmt.Errorf("group %d: %w", g, err))
		}
		groups, exports = append(groups, int(g)), append(exports, states)
	}
	ownerOf := func(key string) int { return int(v.GroupOf(hashing.ShardOf(key, v.Shards))) }
	once, err := fsm.OneCopyPerKey(exports, groups, ownerOf)
	if err != nil {
		return toStatus(err)
	}
	exports = nil
	for i := range once {
		if err := w.States(once[i]); err != nil {
			return toStatus(fmt.Errorf("group %d: %w", groups[i], err))
		}
		once[i] = nil // held in buf now
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

// exportGroup returns group g's states from its leader.
func (a *AdminServer) exportGroup(ctx context.Context, g int) ([]byte, error) {
	var states []byte
	err := onLeader(ctx, a.node, g, a.cfg.LeaderWait, true, func(ctx context.Context, rt cluster.Route) error {
		if rt.Local {
			var err error
			states, err = a.node.ExportGroup(ctx, g)
			return err
		}
		resp, err := peerv1.NewPeerClient(a.peers.conn(rt.Addr)).ExportGroup(ctx, &peerv1.ExportGroupRequest{Group: uint32(g)},
			grpc.MaxCallRecvMsgSize(maxExportMessage)) // gRPC reads 4 MiB by default
		states = resp.GetStates()
		return peerRefusal(rt.Addr, err)
	})
	return states, err
}
