package cluster

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"go.etcd.io/bbolt"
)

// How a node makes Raft writes durable (--fsync). Every group's entries
// go to the node's one shared log (raftlog): append-only, checksummed, so
// a crash or a power cut keeps a prefix of what was written and never
// tears an acknowledged write.
const (
	// FsyncBatch: every write is fsync'd before it is acknowledged, and
	// the writes of all groups waiting at the same moment share one fsync
	// (group commit). The default.
	FsyncBatch = "batch"
	// FsyncAlways is FsyncBatch (the shared log fsyncs every write before
	// acknowledging it); kept so existing configurations still start.
	FsyncAlways = "always"
	// FsyncOff: writes reach the disk when the OS flushes them: a process
	// crash loses nothing, a power cut loses recent writes. For throwaway
	// clusters only.
	FsyncOff = "off"
)

// cleanMark is the file a node leaves in its data dir when it stops
// cleanly; its absence at start means the last stop was a crash.
const cleanMark = "clean-stop"

// checkStores runs check over every bolt Raft log left in the data dir by
// an older floodgate (before they move into the shared log) after an
// unclean stop, and refuses a damaged one with what to do about it. The
// shared log checks itself as it replays. Without a check (nil) nothing is
// checked.
func checkStores(dataDir, nodeID string, check func(path string) error) error {
	mark := filepath.Join(dataDir, cleanMark)
	if _, err := os.Stat(mark); err == nil {
		return os.Remove(mark)
	}
	if check == nil {
		return nil
	}
	return filepath.WalkDir(dataDir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || d.Name() != "raft.db" {
			return err
		}
		if err := check(path); err != nil {
			return fmt.Errorf("%w: %s failed its check (%v). The node stopped in the middle of a write "+
				"(with --fsync=%s a power cut can do this). Remove node %s from the cluster "+
				"(floodgatectl leave %s, on another node), delete %s, and start it again with --join",
				ErrDamaged, path, err, FsyncBatch, nodeID, nodeID, dataDir)
		}
		return nil
	})
}

// CheckStore runs bolt's consistency check over the Raft log at path. On a
// badly damaged file bolt panics, in a goroutine of its own where no
// recover reaches: run it in a child process (see Config.CheckStore).
func CheckStore(path string) error {
	db, err := bbolt.Open(path, 0o600, &bbolt.Options{ReadOnly: true, Timeout: time.Second})
	if err != nil {
		return err
	}
	defer db.Close()
	return db.View(func(tx *bbolt.Tx) error {
		for err := range tx.Check() {
			return err
		}
		return nil
	})
}

// markClean records a clean stop.
func markClean(dataDir string) error {
	return os.WriteFile(filepath.Join(dataDir, cleanMark), []byte(time.Now().UTC().Format(time.RFC3339)+"\n"), 0o644)
}
