package cluster

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
	"go.etcd.io/bbolt"
)

const (
	// logCacheSize is how many recent entries each group keeps in memory,
	// so replication reads them without touching bolt.
	logCacheSize = 512
	// snapshotsRetained is how many file snapshots each group keeps.
	snapshotsRetained = 2
)

// groupStore is the persistent state of one Raft group under its own
// directory: a raft-boltdb/v2 file for the log and stable state, and file
// snapshots.
type groupStore struct {
	bolt  *raftboltdb.BoltStore
	logs  raft.LogStore
	state raft.StableStore
	snaps raft.SnapshotStore
}

// openGroupStore opens (creating) the stores in dir, made durable as mode
// says: FsyncAlways lets bolt fsync each commit; FsyncBatch runs bolt
// without fsync and makes every write wait for syncer; FsyncOff leaves
// writes to the OS.
func openGroupStore(dir, mode string, syncer *Syncer, logger hclog.Logger) (*groupStore, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	bolt, err := raftboltdb.New(raftboltdb.Options{
		Path:   filepath.Join(dir, "raft.db"),
		NoSync: mode != FsyncAlways,
		// Appending a log entry dirties a leaf page and the meta page;
		// writing the freelist too on every commit would add a page to
		// every flush. Without it bolt rebuilds the freelist on open (as
		// etcd runs it).
		BoltOptions: &bbolt.Options{NoFreelistSync: true, FreelistType: bbolt.FreelistMapType},
	})
	if err != nil {
		return nil, fmt.Errorf("open raft log in %s: %w", dir, err)
	}
	snaps, err := raft.NewFileSnapshotStoreWithLogger(dir, snapshotsRetained, logger)
	if err != nil {
		bolt.Close()
		return nil, fmt.Errorf("open snapshots in %s: %w", dir, err)
	}
	s := &groupStore{bolt: bolt, snaps: snaps}
	var base interface {
		raft.LogStore
		raft.StableStore
	} = bolt
	if mode == FsyncBatch {
		base = &syncedStore{BoltStore: bolt, syncer: syncer}
	}
	s.state = base
	if s.logs, err = raft.NewLogCache(logCacheSize, base); err != nil {
		bolt.Close()
		return nil, err
	}
	return s, nil
}

func (s *groupStore) close() error { return s.bolt.Close() }

// syncedStore is a BoltStore opened with NoSync whose writes return only
// once the node's Syncer has made them durable.
type syncedStore struct {
	*raftboltdb.BoltStore
	syncer *Syncer
}

func (s *syncedStore) StoreLog(l *raft.Log) error {
	return s.StoreLogs([]*raft.Log{l})
}

func (s *syncedStore) StoreLogs(logs []*raft.Log) error {
	if err := s.BoltStore.StoreLogs(logs); err != nil {
		return err
	}
	return s.syncer.Sync(s.BoltStore)
}

func (s *syncedStore) DeleteRange(min, max uint64) error {
	if err := s.BoltStore.DeleteRange(min, max); err != nil {
		return err
	}
	return s.syncer.Sync(s.BoltStore)
}

func (s *syncedStore) Set(k, v []byte) error {
	if err := s.BoltStore.Set(k, v); err != nil {
		return err
	}
	return s.syncer.Sync(s.BoltStore)
}

func (s *syncedStore) SetUint64(k []byte, v uint64) error {
	if err := s.BoltStore.SetUint64(k, v); err != nil {
		return err
	}
	return s.syncer.Sync(s.BoltStore)
}
