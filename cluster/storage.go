package cluster

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"

	"github.com/floodgate/floodgate/raftlog"
)

const (
	// logCacheSize is how many recent entries each group keeps in memory,
	// so replication reads them without going back to the log file, and
	// logCacheBytes the most they may hold (logCache).
	logCacheSize  = 512
	logCacheBytes = 16 << 20
	// snapshotsRetained is how many file snapshots each group keeps.
	snapshotsRetained = 2
	// walDir is the node's shared Raft log under its data dir.
	walDir = "raftlog"
	// metaName names the meta group: in the shared log, and its directory.
	metaName = "meta"
	// snapshotsDir is where raft.FileSnapshotStore keeps a group's
	// snapshots, under the group's directory.
	snapshotsDir = "snapshots"
	// unfinishedSuffix names a snapshot raft.FileSnapshotStore is still
	// writing, or was when its process died.
	unfinishedSuffix = ".tmp"
)

// openWAL opens the node's shared Raft log: every group's entries and
// stable state go to one append-only log, and concurrent appends of all
// groups share one write and one fsync. With FsyncOff nothing is fsync'd.
// A write or fsync pending for maxSync fails it (0: not watched).
func openWAL(dataDir, mode string, maxSync time.Duration) (*raftlog.Store, error) {
	wal, err := raftlog.Open(filepath.Join(dataDir, walDir), raftlog.Options{NoSync: mode == FsyncOff, MaxSyncDuration: maxSync})
	if errors.Is(err, raftlog.ErrCorrupt) {
		return nil, fmt.Errorf("%w: %v. Remove this node from the cluster (floodgatectl leave, on another node), "+
			"delete %s, and start it again with --join: its replicas come back from its peers", ErrDamaged, err, dataDir)
	}
	return wal, err
}

// groupStore is the persistent state of one Raft group: its log and
// stable state in the node's shared log, and file snapshots under the
// group's own directory.
type groupStore struct {
	logs  raft.LogStore
	state raft.StableStore
	snaps raft.SnapshotStore
}

// openGroupStore opens the stores of the group called name, whose
// snapshots live in dir, moving a log left in dir by an older floodgate
// (raft.db) into the shared log first.
func openGroupStore(dir, name string, wal *raftlog.Store, logger hclog.Logger) (*groupStore, error) {
	if err := raftlog.MkdirDurable(dir); err != nil {
		return nil, err
	}
	if err := migrateBolt(dir, name, wal); err != nil {
		return nil, err
	}
	if err := dropUnfinishedSnapshots(filepath.Join(dir, snapshotsDir), logger); err != nil {
		return nil, err
	}
	snaps, err := openSnapshots(dir, logger)
	if err != nil {
		return nil, err
	}
	g := wal.Group(name)
	st := &groupStore{logs: newLogCache(g, logCacheSize, logCacheBytes), state: g, snaps: snaps}
	if err := st.undoTornBootstrap(logger); err != nil {
		return nil, fmt.Errorf("open group %s: %w", name, err)
	}
	return st, nil
}

// undoTornBootstrap takes back a bootstrap that a crash cut in two.
// raft.BootstrapCluster writes the term (1) and then the configuration
// entry, each durable on its own; stopped between them, the group has a
// term, so raft refuses to bootstrap it again (ErrCantBootstrap, taken for
// "done"), and no configuration, so it never elects a leader: a meta group
// that never forms, a shard that never serves. Term 1 with an empty log, no
// snapshot and no vote comes only from there (a replica added to a group,
// or voting in it, learns a term of 2 or more, the first election's), so
// the term goes back to 0, what raft writes for a group it never had, and
// the bootstrap runs again.
func (s *groupStore) undoTornBootstrap(logger hclog.Logger) error {
	term, err := s.state.GetUint64(keyCurrentTerm)
	if err != nil || term != 1 {
		return nil // none (a new group), or a group past its bootstrap
	}
	if last, err := s.logs.LastIndex(); err != nil || last != 0 {
		return err
	}
	if voted, err := s.state.GetUint64(keyLastVoteTerm); err == nil && voted != 0 {
		return nil
	}
	if snaps, err := s.snaps.List(); err != nil || len(snaps) > 0 {
		return err
	}
	logger.Warn("a crash interrupted this group's bootstrap (a term, no configuration): bootstrapping it again")
	return s.state.SetUint64(keyCurrentTerm, 0)
}

// dropUnfinishedSnapshots removes the snapshots a process died writing
// (taken, or received from a leader) from dir. raft.FileSnapshotStore
// writes each into a directory ending in .tmp and renames it when done;
// after a crash mid-write it skips such a directory at every listing and
// never deletes it, so each crash during a snapshot would leave a group's
// whole state (tens of megabytes) on the disk for good. None is being
// written now: the group's Raft has not started, and the data-dir lock
// keeps other processes out.
func dropUnfinishedSnapshots(dir string, logger hclog.Logger) error {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("list snapshots in %s: %w", dir, err)
	}
	for _, e := range entries {
		if !e.IsDir() || !strings.HasSuffix(e.Name(), unfinishedSuffix) {
			continue
		}
		path := filepath.Join(dir, e.Name())
		if err := os.RemoveAll(path); err != nil {
			return fmt.Errorf("remove unfinished snapshot %s: %w", path, err)
		}
		logger.Warn("removed a snapshot left unfinished by a crash", "path", path)
	}
	return nil
}
