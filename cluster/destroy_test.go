package cluster

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/hashicorp/raft"
)

// A replica's deletion that a crash interrupted after its directory was
// renamed (a tombstone) is finished at the next start: the directory goes
// and so does the group's log, so the node neither trips on a half-deleted
// snapshot (Raft refused to open a snapshot's metadata whose state was
// deleted, and the node did not start) nor reopens the replica.
func TestADestroyACrashInterruptedIsFinishedAtStart(t *testing.T) {
	dir := t.TempDir()
	n, cfg, _ := startedNode(t, dir)
	loggedReplica(t, n, 7)
	n.Close()

	// The crash: shard 7's directory renamed, its log not dropped yet,
	// and a snapshot's state deleted while its metadata stays.
	live := filepath.Join(dir, "shards", "7")
	tomb := live + destroyingSuffix
	if err := os.Rename(live, tomb); err != nil {
		t.Fatal(err)
	}
	snap := filepath.Join(tomb, "snapshots", "1-1-1")
	if err := os.MkdirAll(snap, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(snap, "meta.json"), []byte(`{"ID":"1-1-1","Index":1,"Term":1}`), 0o644); err != nil {
		t.Fatal(err)
	}

	n2, err := Open(cfg, &deadSeeds{})
	if err != nil {
		t.Fatalf("restart after the interrupted deletion: %v", err)
	}
	defer n2.Close()
	if _, err := os.Stat(tomb); !os.IsNotExist(err) {
		t.Errorf("the renamed directory is still there: %v", err)
	}
	if _, err := os.Stat(live); !os.IsNotExist(err) {
		t.Errorf("the replica's directory came back: %v", err)
	}
	if groups := n2.wal.Groups(); slices.Contains(groups, shardName(7)) || !slices.Contains(groups, shardName(0)) {
		t.Errorf("the shared log holds groups %q, want shard 0's and not shard 7's", groups)
	}
	if n2.replica(7) != nil {
		t.Error("shard 7's replica was opened again")
	}
}

// Dropping a replica leaves neither the replica's directory nor its tombstone, nor
// its log.
func TestDestroyRemovesEverything(t *testing.T) {
	dir := t.TempDir()
	n, _, lb := startedNode(t, dir)
	defer n.Close()
	n.dropReplica(loggedReplica(t, n, 7))
	if log := lb.String(); strings.Contains(log, "delete shard replica") {
		t.Fatalf("the deletion failed: %s", log)
	}
	live := filepath.Join(dir, "shards", "7")
	for _, p := range []string{live, live + destroyingSuffix} {
		if _, err := os.Stat(p); !os.IsNotExist(err) {
			t.Errorf("%s: %v, want it gone", p, err)
		}
	}
	if slices.Contains(n.wal.Groups(), shardName(7)) {
		t.Error("shard 7's log is still in the shared log")
	}
}

// A reset (a fresh node discarding its own cluster to join another) that
// a crash interrupted after the meta group's directory was renamed is
// finished at the next start too: the meta group's log goes before the
// new one opens, and the node starts as a fresh one, not on a log whose
// directory is gone.
func TestAResetACrashInterruptedIsFinishedAtStart(t *testing.T) {
	dir := t.TempDir()
	n, cfg, _ := startedNode(t, dir)
	old := n.View().ClusterID
	n.Close()
	for _, d := range []string{filepath.Join("shards", "0"), filepath.Join("shards", "1"), "meta"} {
		if err := os.Rename(filepath.Join(dir, d), filepath.Join(dir, d)+destroyingSuffix); err != nil {
			t.Fatal(err)
		}
	}
	n2, err := Open(cfg, &deadSeeds{})
	if err != nil {
		t.Fatalf("restart after the interrupted reset: %v", err)
	}
	defer n2.Close()
	for _, d := range []string{filepath.Join("shards", "0"), filepath.Join("shards", "1"), "meta"} {
		if exists(filepath.Join(dir, d) + destroyingSuffix) {
			t.Errorf("%s%s is still there", d, destroyingSuffix)
		}
	}
	if err := n2.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	if id := n2.View().ClusterID; id == old || id == "" {
		t.Errorf("cluster %q after the restart, want a new one (the old %s was being discarded)", id, old)
	}
}

// A tombstone a failed deletion left does not stop the next deletion of
// the same group, nor is a new replica opened on top of it.
func TestALeftoverTombstoneIsCleared(t *testing.T) {
	dir := t.TempDir()
	n, _, lb := startedNode(t, dir)
	defer n.Close()
	r := loggedReplica(t, n, 7)
	tomb := filepath.Join(dir, "shards", "7") + destroyingSuffix
	if err := os.MkdirAll(filepath.Join(tomb, "snapshots"), 0o755); err != nil {
		t.Fatal(err)
	}
	n.dropReplica(r)
	if log := lb.String(); strings.Contains(log, "delete shard replica") {
		t.Fatalf("the deletion failed: %s", log)
	}
	if exists(tomb) {
		t.Fatal("shard 7's tombstone is still there")
	}
	// And one left when a replica of its group is opened again.
	tomb = filepath.Join(dir, "shards", "8") + destroyingSuffix
	if err := os.MkdirAll(filepath.Join(tomb, "snapshots"), 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := n.ensureReplica(8); err != nil {
		t.Fatal(err)
	}
	if exists(tomb) {
		t.Fatal("a replica was opened beside its tombstone")
	}
}

// startedNode opens and starts a node of a single-node cluster of two
// shards on dir; the config opens it again.
func startedNode(t *testing.T, dir string) (*Node, Config, *lockedBuffer) {
	t.Helper()
	lb := &lockedBuffer{}
	cfg := Config{NodeID: "n1", DataDir: dir, GRPCAddr: loopback(t), RaftAddr: loopback(t), GossipAddr: loopback(t),
		Shards: 2, Replicas: 1, Logger: slog.New(slog.NewTextHandler(lb, nil))}
	n, err := Open(cfg, &deadSeeds{})
	if err != nil {
		t.Fatal(err)
	}
	if err := n.Start(context.Background()); err != nil {
		n.Close()
		t.Fatal(err)
	}
	return n, cfg, lb
}

// loggedReplica opens a replica of group id, which the cluster does not
// place here (its reconciler neither makes it again nor races a test's
// deletion of it), and starts it alone, so that its log holds an entry.
func loggedReplica(t *testing.T, n *Node, id int) *replica {
	t.Helper()
	r, err := n.ensureReplica(id)
	if err != nil {
		t.Fatal(err)
	}
	me := raft.Server{ID: raft.ServerID(n.cfg.NodeID), Address: raft.ServerAddress(n.cfg.RaftAddr)}
	if err := r.group.bootstrap([]raft.Server{me}); err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(n.wal.Groups(), shardName(id)) {
		t.Fatalf("group %d's log is empty after its bootstrap", id)
	}
	return r
}

// A replica whose earlier one is still being deleted is not opened: the
// deletion would drop its log (the raft of the new one then failed to
// save its term and panicked) or its files. Once the deletion is done,
// it opens.
func TestAReplicaIsNotOpenedWhileItsDeletionRuns(t *testing.T) {
	n, _, _ := startedNode(t, t.TempDir())
	defer n.Close()
	n.mu.Lock()
	n.dropping[9] = true // as dropReplica marks it for the deletion's length
	n.mu.Unlock()
	if _, err := n.ensureReplica(9); !errors.Is(err, errDropping) {
		t.Fatalf("opened while its deletion runs: %v", err)
	}
	n.dropReplica(loggedReplica(t, n, 7))
	if _, err := n.ensureReplica(7); err != nil {
		t.Fatalf("not opened once its deletion was done: %v", err)
	}
}
