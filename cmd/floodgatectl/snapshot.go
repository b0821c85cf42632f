package main

import (
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"

	"github.com/floodgate/floodgate/backup"
	pb "github.com/floodgate/floodgate/proto/floodgate/v1"
)

// snapshotCmd backs a cluster's policies and counters up to a file and
// restores them.
func snapshotCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "snapshot",
		Short: "Back up a cluster's policies and counters to a file, and restore them",
	}
	cmd.AddCommand(snapshotSaveCmd(g), snapshotRestoreCmd(g))
	return cmd
}

func snapshotSaveCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "save FILE",
		Short: "Write the cluster's policies and every key's counters to FILE",
		Long: "Ask the cluster for a backup: its policies, then each group's counters as\n" +
			"its leader holds them once everything answered so far is committed. The\n" +
			"file is written whole (a temporary file renamed) and checksummed.",
		Example: "  floodgatectl snapshot save backup.fgbk",
		Args:    cobra.ExactArgs(1),
		RunE: func(_ *cobra.Command, args []string) error {
			conn, err := g.dial()
			if err != nil {
				return err
			}
			defer conn.Close()
			ctx, cancel := g.ctx()
			defer cancel()
			stream, err := admin(conn).SaveSnapshot(ctx, &pb.SaveSnapshotRequest{})
			if err != nil {
				return err
			}
			tmp := args[0] + ".tmp"
			f, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
			if err != nil {
				return err
			}
			defer os.Remove(tmp)
			n := 0
			for {
				chunk, err := stream.Recv()
				if err == io.EOF {
					break
				}
				if err != nil {
					f.Close()
					return err
				}
				if _, err := f.Write(chunk.Data); err != nil {
					f.Close()
					return err
				}
				n += len(chunk.Data)
			}
			if err := f.Sync(); err != nil {
				f.Close()
				return err
			}
			if err := f.Close(); err != nil {
				return err
			}
			// Checked as restore will check it, before it replaces anything.
			rf, err := os.Open(tmp)
			if err != nil {
				return err
			}
			b, err := backup.Read(rf)
			rf.Close()
			if err != nil {
				return fmt.Errorf("the cluster sent a damaged backup: %w", err)
			}
			if err := os.Rename(tmp, args[0]); err != nil {
				return err
			}
			if g.json {
				return g.printResult(struct {
					File     string `json:"file"`
					Bytes    int    `json:"bytes"`
					Policies int    `json:"policies"`
					Groups   int    `json:"groups"`
				}{args[0], n, len(b.Policies), len(b.States)})
			}
			_, err = fmt.Fprintf(g.out, "saved %s: %d bytes, %d %s, %d %s\n", args[0], n, len(b.Policies), plural(len(b.Policies), "policy", "policies"), len(b.States),
				plural(len(b.States), "group", "groups"))
			return err
		},
	}
}

func snapshotRestoreCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "restore FILE",
		Short: "Put a backup's policies and counters into the cluster",
		Long: "Store the backup's policies (replacing those of the same name) and give\n" +
			"every key of the backup its saved counters (replacing what the cluster\n" +
			"holds for that key; other keys are untouched). The file is checked whole\n" +
			"first. Restoring the same file again gives the same counts, so a restore\n" +
			"that failed half-way can simply be run again.",
		Example: "  floodgatectl snapshot restore backup.fgbk",
		Args:    cobra.ExactArgs(1),
		RunE: func(_ *cobra.Command, args []string) error {
			data, err := os.ReadFile(args[0])
			if err != nil {
				return err
			}
			if _, err := backup.Parse(data); err != nil {
				return fmt.Errorf("%s: %w", args[0], err)
			}
			conn, err := g.dial()
			if err != nil {
				return err
			}
			defer conn.Close()
			ctx, cancel := g.ctx()
			defer cancel()
			stream, err := admin(conn).RestoreSnapshot(ctx)
			if err != nil {
				return err
			}
			for len(data) > 0 {
				n := min(len(data), 1<<20)
				if err := stream.Send(&pb.SnapshotChunk{Data: data[:n]}); err != nil {
					break // the server's answer says why
				}
				data = data[n:]
			}
			resp, err := stream.CloseAndRecv()
			if err != nil {
				return err
			}
			if g.json {
				return g.printJSON(resp)
			}
			_, err = fmt.Fprintf(g.out, "restored %d %s and the counters of %d keys\n", resp.Policies, plural(int(resp.Policies), "policy", "policies"), resp.Keys)
			return err
		},
	}
}
