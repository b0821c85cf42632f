package rpc

import "context"

// SaveBackupWith takes a backup as SaveSnapshot does, each group's states
// from export, which is handed a's own export of a group.
func SaveBackupWith(ctx context.Context, a *AdminServer,
	export func(ctx context.Context, g int, own func(context.Context, int) ([]byte, error)) ([]byte, error)) ([]byte, error) {
	return a.saveBackup(ctx, func(ctx context.Context, g int) ([]byte, error) { return export(ctx, g, a.exportGroup) })
}
