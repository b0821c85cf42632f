package cluster

import (
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"

	"github.com/floodgate/floodgate/raftlog"
)

// A snapshot a process died writing (its sink never closed) stays on the
// disk as a .tmp directory that raft.FileSnapshotStore skips and never
// deletes; opening the group's stores removes it, and keeps the finished
// snapshots.
func TestOpeningAGroupDropsSnapshotsLeftUnfinished(t *testing.T) {
	dir := t.TempDir()
	group := filepath.Join(dir, "g1")
	quiet := hclog.NewNullLogger()
	snaps, err := raft.NewFileSnapshotStoreWithLogger(group, snapshotsRetained, quiet)
	if err != nil {
		t.Fatal(err)
	}
	write := func(index uint64, finish bool) {
		t.Helper()
		sink, err := snaps.Create(raft.SnapshotVersionMax, index, 1, raft.Configuration{}, 1, nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := sink.Write(make([]byte, 1<<20)); err != nil {
			t.Fatal(err)
		}
		if finish {
			if err := sink.Close(); err != nil {
				t.Fatal(err)
			}
		}
	}
	write(10, true)
	write(20, false) // the process dies here
	unfinished, _ := filepath.Glob(filepath.Join(group, snapshotsDir, "*"+unfinishedSuffix))
	if len(unfinished) != 1 {
		t.Fatalf("unfinished snapshots before: %v, want one", unfinished)
	}
	wal, err := raftlog.Open(filepath.Join(dir, walDir), raftlog.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer wal.Close()
	st, err := openGroupStore(group, "g1", wal, quiet)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(unfinished[0]); !os.IsNotExist(err) {
		t.Fatalf("%s still there after open: %v", unfinished[0], err)
	}
	list, err := st.snaps.List()
	if err != nil || len(list) != 1 || list[0].Index != 10 {
		t.Fatalf("snapshots after open: %v, %v; want the finished one, of index 10", list, err)
	}
	_, rc, err := st.snaps.Open(list[0].ID)
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	if n, err := io.Copy(io.Discard, rc); err != nil || n != 1<<20 {
		t.Fatalf("the finished snapshot reads %d bytes, %v", n, err)
	}
}

// A group never snapshotted has no snapshots directory yet: nothing to do.
func TestDropUnfinishedSnapshotsOfNone(t *testing.T) {
	if err := dropUnfinishedSnapshots(filepath.Join(t.TempDir(), "none"), hclog.NewNullLogger()); err != nil {
		t.Fatal(err)
	}
}

// A snapshot's own directory is synced once raft has renamed it into
// place (its files are then named there), before Close returns and raft
// compacts the log on it.
func TestSnapshotDirIsSyncedWhenClosed(t *testing.T) {
	dir := t.TempDir()
	store, err := openSnapshots(dir, hclog.NewNullLogger())
	if err != nil {
		t.Fatal(err)
	}
	s := store.(*syncedSnapshots)
	var synced []string
	s.sync = func(d string) error {
		for _, f := range []string{"meta.json", "state.bin"} {
			if _, err := os.Stat(filepath.Join(d, f)); err != nil {
				t.Errorf("synced %s before %s was in it: %v", d, f, err)
			}
		}
		synced = append(synced, d)
		return nil
	}
	sink, err := s.Create(raft.SnapshotVersionMax, 10, 1, raft.Configuration{}, 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sink.Write([]byte("state")); err != nil {
		t.Fatal(err)
	}
	if len(synced) != 0 {
		t.Fatalf("synced before Close: %v", synced)
	}
	if err := sink.Close(); err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(dir, snapshotsDir, sink.ID()); len(synced) != 1 || synced[0] != want {
		t.Fatalf("synced %v, want [%s]", synced, want)
	}
	list, err := s.List()
	if err != nil || len(list) != 1 || list[0].ID != sink.ID() {
		t.Fatalf("snapshots: %v, %v", list, err)
	}
}
