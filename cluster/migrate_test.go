package cluster

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"

	"github.com/floodgate/floodgate/raftlog"
)

// A group's bolt log from an older floodgate moves into the shared log
// whole (entries and the terms and vote raft keeps), once.
func TestMigrateBoltLog(t *testing.T) {
	dir := t.TempDir()
	bolt, err := raftboltdb.New(raftboltdb.Options{Path: filepath.Join(dir, boltFile)})
	if err != nil {
		t.Fatal(err)
	}
	var logs []*raft.Log
	for i := uint64(5); i <= 600; i++ {
		logs = append(logs, &raft.Log{Index: i, Term: 3, Type: raft.LogCommand, Data: []byte{byte(i), 1, 2}})
	}
	if err := bolt.StoreLogs(logs); err != nil {
		t.Fatal(err)
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(bolt.SetUint64([]byte("CurrentTerm"), 3))
	must(bolt.SetUint64([]byte("LastVoteTerm"), 2))
	must(bolt.Set([]byte("LastVoteCand"), []byte("n2")))
	must(bolt.Close())

	wal, err := raftlog.Open(filepath.Join(dir, walDir), raftlog.Options{})
	must(err)
	defer wal.Close()
	// What an interrupted move left is replaced, not appended to.
	must(wal.Group("shard-3").StoreLogs([]*raft.Log{{Index: 5, Term: 1, Data: []byte("stale")}}))
	must(migrateBolt(dir, "shard-3", wal))
	g := wal.Group("shard-3")
	first, _ := g.FirstIndex()
	last, _ := g.LastIndex()
	if first != 5 || last != 600 {
		t.Fatalf("log %d..%d, want 5..600", first, last)
	}
	for _, want := range []*raft.Log{logs[0], logs[300], logs[len(logs)-1]} {
		var got raft.Log
		must(g.GetLog(want.Index, &got))
		if got.Term != want.Term || string(got.Data) != string(want.Data) {
			t.Errorf("entry %d: %+v, want %+v", want.Index, got, want)
		}
	}
	if v, _ := g.GetUint64([]byte("CurrentTerm")); v != 3 {
		t.Errorf("CurrentTerm %d, want 3", v)
	}
	if v, _ := g.GetUint64([]byte("LastVoteTerm")); v != 2 {
		t.Errorf("LastVoteTerm %d, want 2", v)
	}
	if v, _ := g.Get([]byte("LastVoteCand")); string(v) != "n2" {
		t.Errorf("LastVoteCand %q, want n2", v)
	}
	if _, err := os.Stat(filepath.Join(dir, boltFile)); !os.IsNotExist(err) {
		t.Errorf("bolt file still there after the move (%v): it would be moved again", err)
	}
	// Moving again is a no-op.
	must(migrateBolt(dir, "shard-3", wal))
	if last, _ := g.LastIndex(); last != 600 {
		t.Errorf("second move changed the log: last %d", last)
	}
}

// The rename that marks a group's bolt file moved is synced (its
// directory) before migrateBolt returns: a power cut must not bring the
// file back, or the next start would drop the group's shared log and move
// the old bolt log in again, losing what raft wrote since.
func TestMigrateBoltRenameIsDurable(t *testing.T) {
	dir := t.TempDir()
	bolt, err := raftboltdb.New(raftboltdb.Options{Path: filepath.Join(dir, boltFile)})
	if err != nil {
		t.Fatal(err)
	}
	if err := bolt.StoreLogs([]*raft.Log{{Index: 1, Term: 1, Data: []byte("x")}}); err != nil {
		t.Fatal(err)
	}
	if err := bolt.Close(); err != nil {
		t.Fatal(err)
	}
	wal, err := raftlog.Open(filepath.Join(dir, walDir), raftlog.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer wal.Close()
	synced := false
	old := migratedSyncDir
	t.Cleanup(func() { migratedSyncDir = old })
	migratedSyncDir = func(d string) error {
		_, err := os.Stat(filepath.Join(dir, boltFile+".migrated"))
		synced = d == dir && err == nil
		return old(d)
	}
	if err := migrateBolt(dir, "shard-1", wal); err != nil {
		t.Fatal(err)
	}
	if !synced {
		t.Fatal("the bolt file was renamed and its directory never synced after: a power cut can bring it back and move it again over newer entries")
	}
}
