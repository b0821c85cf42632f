package rpc

import (
	"context"

	"github.com/floodgate/floodgate/backup"
	"github.com/floodgate/floodgate/policy"
	pb "github.com/floodgate/floodgate/proto/floodgate/v1"
)

// SaveBackupWith takes a backup as SaveSnapshot does, each group's states
// from export, which is handed a's own export of a group.
func SaveBackupWith(ctx context.Context, a *AdminServer,
	export func(ctx context.Context, g int, own func(context.Context, int) ([]byte, error)) ([]byte, error)) ([]byte, error) {
	return a.saveBackup(ctx, func(ctx context.Context, g int) ([]byte, error) { return export(ctx, g, a.exportGroup) })
}

// RestoreWith restores data as RestoreSnapshot does, storing each entry's
// worth of policies with set, which is handed a's own way to.
func RestoreWith(ctx context.Context, a *AdminServer, data []byte,
	set func(ctx context.Context, ps []*policy.Policy, own func(context.Context, []*policy.Policy) error) error) (*pb.RestoreSnapshotResponse, error) {
	b, err := backup.Parse(data)
	if err != nil {
		return nil, err
	}
	return a.restore(ctx, b, func(ctx context.Context, ps []*policy.Policy) error { return set(ctx, ps, a.node.SetPolicies) })
}
