package cluster

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"

	"github.com/floodgate/floodgate/raftlog"
)

// boltFile is where floodgate before the shared log kept a group's log
// and stable state, one raft-boltdb file per group.
const boltFile = "raft.db"

// migratedSyncDir makes the rename of a moved bolt file durable (tests
// watch it).
var migratedSyncDir = raftlog.SyncDir

// stableKeys are the keys hashicorp/raft keeps in its stable store.
var (
	stableUint64 = []string{"CurrentTerm", "LastVoteTerm"}
	stableBytes  = []string{"LastVoteCand"}
)

// migrateBolt moves a group's bolt log (a data dir written by an older
// floodgate) into the shared log, then renames the file so it is moved
// once. A move a crash interrupted is started over: the file is renamed
// only after everything is in the shared log.
func migrateBolt(dir, name string, wal *raftlog.Store) error {
	path := filepath.Join(dir, boltFile)
	if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
		return nil
	}
	bolt, err := raftboltdb.New(raftboltdb.Options{Path: path, NoSync: true})
	if err != nil {
		return fmt.Errorf("migrate %s: %w", path, err)
	}
	err = copyBolt(bolt, name, wal)
	if cerr := bolt.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(path, path+".migrated")
	}
	if err == nil {
		// The rename must reach the disk before raft writes to the shared
		// log: a power cut that brought raft.db back would move it again,
		// and the move drops the group's log first, losing every entry,
		// term and vote written since (acknowledged, counted by a quorum).
		err = migratedSyncDir(dir)
	}
	if err != nil {
		return fmt.Errorf("migrate %s into the shared log: %w", path, err)
	}
	return nil
}

func copyBolt(bolt *raftboltdb.BoltStore, name string, wal *raftlog.Store) error {
	if err := wal.Drop(name); err != nil { // what an interrupted move left
		return err
	}
	g := wal.Group(name)
	first, err := bolt.FirstIndex()
	if err != nil {
		return err
	}
	last, err := bolt.LastIndex()
	if err != nil {
		return err
	}
	const chunk = 256
	batch := make([]*raft.Log, 0, chunk)
	for i := first; first > 0 && i <= last; i++ {
		l := new(raft.Log)
		if err := bolt.GetLog(i, l); err != nil {
			return fmt.Errorf("entry %d: %w", i, err)
		}
		if batch = append(batch, l); len(batch) == chunk || i == last {
			if err := g.StoreLogs(batch); err != nil {
				return err
			}
			batch = batch[:0]
		}
	}
	for _, k := range stableUint64 {
		v, err := bolt.GetUint64([]byte(k))
		if err == nil && v != 0 {
			err = g.SetUint64([]byte(k), v)
		}
		if err != nil && err.Error() != "not found" {
			return fmt.Errorf("%s: %w", k, err)
		}
	}
	for _, k := range stableBytes {
		v, err := bolt.Get([]byte(k))
		if err == nil && len(v) > 0 {
			err = g.Set([]byte(k), v)
		}
		if err != nil && err.Error() != "not found" {
			return fmt.Errorf("%s: %w", k, err)
		}
	}
	return nil
}
