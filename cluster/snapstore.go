package cluster

import (
	"fmt"
	"path/filepath"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"

	"github.com/floodgate/floodgate/raftlog"
)

// openSnapshots opens the file snapshot store of the group whose
// directory is dir. raft.FileSnapshotStore syncs a snapshot's files, and
// the snapshots directory after it renames the snapshot into place, but
// neither the snapshots directory once it creates it nor the snapshot's
// own directory, whose entries name the files: a power cut could keep the
// log's compaction, which follows the snapshot's Close, and lose the
// snapshot it relied on, and raft then panics at every start on an entry
// missing from the log. Both are synced here.
func openSnapshots(dir string, logger hclog.Logger) (raft.SnapshotStore, error) {
	if err := raftlog.MkdirDurable(filepath.Join(dir, snapshotsDir)); err != nil {
		return nil, fmt.Errorf("create snapshots dir in %s: %w", dir, err)
	}
	fs, err := raft.NewFileSnapshotStoreWithLogger(dir, snapshotsRetained, logger)
	if err != nil {
		return nil, fmt.Errorf("open snapshots in %s: %w", dir, err)
	}
	return &syncedSnapshots{FileSnapshotStore: fs, dir: filepath.Join(dir, snapshotsDir), sync: raftlog.SyncDir}, nil
}

// syncedSnapshots is a file snapshot store whose snapshots' directories
// are synced when they are written (openSnapshots).
type syncedSnapshots struct {
	*raft.FileSnapshotStore
	dir  string                 // the snapshots directory
	sync func(dir string) error // raftlog.SyncDir; tests watch it
}

// Create starts a snapshot, as raft.FileSnapshotStore does.
func (s *syncedSnapshots) Create(version raft.SnapshotVersion, index, term uint64, configuration raft.Configuration,
	configurationIndex uint64, trans raft.Transport) (raft.SnapshotSink, error) {
	sink, err := s.FileSnapshotStore.Create(version, index, term, configuration, configurationIndex, trans)
	if err != nil {
		return nil, err
	}
	return &syncedSink{SnapshotSink: sink, dir: filepath.Join(s.dir, sink.ID()), sync: s.sync}, nil
}

// syncedSink syncs its snapshot's directory once raft's sink has renamed
// it into place, before raft goes on to compact the log.
type syncedSink struct {
	raft.SnapshotSink
	dir  string
	sync func(dir string) error
}

// Close finishes the snapshot and syncs its directory.
func (s *syncedSink) Close() error {
	if err := s.SnapshotSink.Close(); err != nil {
		return err
	}
	if err := s.sync(s.dir); err != nil {
		return fmt.Errorf("sync snapshot %s: %w", s.dir, err)
	}
	return nil
}
