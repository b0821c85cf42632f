package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/floodgate/floodgate/backup"
	pb "github.com/floodgate/floodgate/proto/floodgate/v1"
)

// snapshotTimeout is how long save and restore wait when --timeout is not
// given. A backup may be 1 GiB (backup.MaxSize), and a restore moved about
// 25 MiB a second through the follower of a two-node cluster on a 2-core
// machine (rpc's TestSaveAndRestoreAGroupOverOneMessage): most of a
// minute for 1 GiB, where the 10 s every other command waits cut off a
// restore of a few hundred MiB half-way, with part of it written.
const snapshotTimeout = 10 * time.Minute

// snapshotCtx is the context of a save or restore: --timeout when given,
// else snapshotTimeout.
func snapshotCtx(cmd *cobra.Command, g *globals) (context.Context, context.CancelFunc) {
	if cmd.Flags().Changed("timeout") {
		return g.ctx()
	}
	return context.WithTimeout(context.Background(), snapshotTimeout)
}

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
		Short: "Write the cluster's policies and every key's counters to FILE (- for stdout)",
		Long: "Ask the cluster for a backup: its policies, then each group's counters as\n" +
			"its leader holds them once everything answered so far is committed. The\n" +
			"file is written whole (a temporary file renamed) and checksummed. With\n" +
			"FILE -, the backup goes to stdout once it is whole and checked, and the\n" +
			"summary (or --json) to stderr. Without --timeout it waits up to 10 minutes.",
		Example: "  floodgatectl snapshot save backup.fgbk\n  floodgatectl snapshot save - | gzip > backup.fgbk.gz",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			dest := args[0]
			var sink *saveSink
			if dest == "-" {
				sink = &saveSink{buf: &bytes.Buffer{}}
			} else {
				var err error
				// Before asking the cluster: a backup is a lot to build
				// for a destination it cannot go to.
				if sink, err = openSaveFile(dest); err != nil {
					return err
				}
				defer sink.discard()
			}
			conn, err := g.dial()
			if err != nil {
				return err
			}
			defer conn.Close()
			ctx, cancel := snapshotCtx(cmd, g)
			defer cancel()
			stream, err := admin(conn).SaveSnapshot(ctx, &pb.SaveSnapshotRequest{})
			if err != nil {
				return err
			}
			for {
				chunk, err := stream.Recv()
				if err == io.EOF {
					break
				}
				if err != nil {
					return err
				}
				if err := sink.write(chunk.Data); err != nil {
					return err
				}
			}
			b, err := sink.commit(g.out)
			if err != nil {
				return err
			}
			out, name := g, dest
			if dest == "-" {
				// stdout holds the backup.
				out, name = &globals{json: g.json, out: cmd.ErrOrStderr()}, "stdout"
			}
			if g.json {
				return out.printResult(struct {
					File     string `json:"file"`
					Bytes    int    `json:"bytes"`
					Policies int    `json:"policies"`
					Groups   int    `json:"groups"`
				}{dest, sink.n, len(b.Policies), len(b.States)})
			}
			_, err = fmt.Fprintf(out.out, "saved %s: %d bytes, %d %s, %d %s\n", name, sink.n, len(b.Policies), plural(len(b.Policies), "policy", "policies"), len(b.States),
				plural(len(b.States), "group", "groups"))
			return err
		},
	}
}

// saveSink is where a save writes the backup as it arrives: a temporary
// file beside the destination, or memory for stdout, so that neither
// gets a backup that is not whole and checked.
type saveSink struct {
	dest, tmp string
	f         *os.File
	buf       *bytes.Buffer
	n         int
}

// openSaveFile checks dest (a file, not a directory) and creates the
// temporary file the backup is written to. Its name is new to each save
// (os.CreateTemp, mode 0600): with one fixed name, two saves to the same
// file (a cron job that overran) wrote into one file, and the later
// save's writes went on into the earlier one's backup after that was
// renamed into place and reported saved; a file of the user's of that
// name was truncated, then removed.
func openSaveFile(dest string) (*saveSink, error) {
	if fi, err := os.Stat(dest); err == nil && fi.IsDir() {
		return nil, fmt.Errorf("%s: is a directory: give the backup's file name (or - for stdout)", dest)
	}
	f, err := os.CreateTemp(filepath.Dir(dest), filepath.Base(dest)+".*.tmp")
	if err != nil {
		return nil, fmt.Errorf("%s: the temporary file beside it: %w", dest, err)
	}
	return &saveSink{dest: dest, tmp: f.Name(), f: f}, nil
}

func (s *saveSink) write(p []byte) error {
	s.n += len(p)
	if s.n > backup.MaxSize {
		return fmt.Errorf("the cluster sent a backup over %d bytes, more than a restore takes", backup.MaxSize)
	}
	if s.buf != nil {
		s.buf.Write(p)
		return nil
	}
	_, err := s.f.Write(p)
	return err
}

// commit checks the backup as restore will check it, then renames the
// temporary file to the destination, or writes the backup to stdout.
func (s *saveSink) commit(stdout io.Writer) (*backup.Backup, error) {
	if s.buf != nil {
		b, err := backup.Parse(s.buf.Bytes())
		if err != nil {
			return nil, fmt.Errorf("the cluster sent a damaged backup: %w", err)
		}
		_, err = stdout.Write(s.buf.Bytes())
		return b, err
	}
	if err := s.f.Sync(); err != nil {
		return nil, err
	}
	if err := s.f.Close(); err != nil {
		return nil, err
	}
	s.f = nil
	rf, err := os.Open(s.tmp)
	if err != nil {
		return nil, err
	}
	b, err := backup.Read(rf)
	rf.Close()
	if err != nil {
		return nil, fmt.Errorf("the cluster sent a damaged backup: %w", err)
	}
	if err := os.Rename(s.tmp, s.dest); err != nil {
		return nil, err
	}
	s.tmp = "" // renamed: nothing to discard
	// The rename is in the directory: until it is synced, a power cut may
	// leave the destination as it was, or missing, though the save said
	// it was written.
	return b, syncDir(filepath.Dir(s.dest))
}

// syncDir syncs directory dir, so that a rename in it is on disk.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("sync %s: %w", dir, err)
	}
	return nil
}

// discard removes the temporary file unless commit renamed it.
func (s *saveSink) discard() {
	if s.f != nil {
		s.f.Close()
	}
	if s.tmp != "" {
		os.Remove(s.tmp)
	}
}

func snapshotRestoreCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "restore FILE",
		Short: "Put a backup's policies and counters into the cluster (FILE - reads stdin)",
		Long: "Store the backup's policies (replacing those of the same name) and give\n" +
			"every key of the backup its saved counters (replacing what the cluster\n" +
			"holds for that key; other keys are untouched). The file is checked whole\n" +
			"first. Restoring the same file again gives the same counts, so a restore\n" +
			"that failed half-way can simply be run again. Without --timeout it waits up\n" +
			"to 10 minutes.",
		Example: "  floodgatectl snapshot restore backup.fgbk\n  gunzip -c backup.fgbk.gz | floodgatectl snapshot restore -",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			data, err := readBackupArg(cmd.InOrStdin(), args[0])
			if err != nil {
				return err
			}
			conn, err := g.dial()
			if err != nil {
				return err
			}
			defer conn.Close()
			ctx, cancel := snapshotCtx(cmd, g)
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
				// Not printJSON: protojson prints an int64 (keys) as a string.
				return g.printResult(struct {
					Policies int32 `json:"policies"`
					Keys     int64 `json:"keys"`
				}{resp.Policies, resp.Keys})
			}
			_, err = fmt.Fprintf(g.out, "restored %d %s and the counters of %d keys\n", resp.Policies, plural(int(resp.Policies), "policy", "policies"), resp.Keys)
			return err
		},
	}
}

// readBackupArg reads and checks the backup named name ("-": stdin). A
// file over backup.MaxSize is refused by its size, unread; stdin once
// one byte more has come.
func readBackupArg(stdin io.Reader, name string) ([]byte, error) {
	r := stdin
	if name != "-" {
		f, err := os.Open(name)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		fi, err := f.Stat()
		switch {
		case err != nil:
			return nil, err
		case fi.IsDir():
			return nil, fmt.Errorf("%s: is a directory, not a backup", name)
		case fi.Mode().IsRegular() && fi.Size() > backup.MaxSize:
			return nil, fmt.Errorf("%s: %w: %d bytes, over %d", name, backup.ErrBadBackup, fi.Size(), backup.MaxSize)
		}
		r = f
	} else {
		name = "stdin"
	}
	data, err := backup.ReadAll(r)
	if err == nil {
		_, err = backup.Parse(data)
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return data, nil
}
