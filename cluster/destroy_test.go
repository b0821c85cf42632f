package cluster

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// A replica's deletion that a crash interrupted after its directory was
// renamed (a tombstone) is finished at the next start: the directory goes
// and so does the group's log, so the node neither trips on a half-deleted
// snapshot (Raft refused to open a snapshot's metadata whose state was
// deleted, and the node did not start) nor reopens the replica.
func TestADestroyACrashInterruptedIsFinishedAtStart(t *testing.T) {
	dir := t.TempDir()
	var lb lockedBuffer
	cfg := Config{NodeID: "n1", DataDir: dir, GRPCAddr: loopback(t), RaftAddr: loopback(t), GossipAddr: loopback(t),
		Shards: 2, Replicas: 1, Logger: slog.New(slog.NewTextHandler(&lb, nil))}
	n, err := Open(cfg, &deadSeeds{})
	if err != nil {
		t.Fatal(err)
	}
	if err := n.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	n.Close()

	// The crash: shard 1's directory renamed, its log not dropped yet,
	// and a snapshot's state deleted while its metadata stays.
	live := filepath.Join(dir, "shards", "1")
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
	if groups := n2.wal.Groups(); slices.Contains(groups, shardName(1)) || !slices.Contains(groups, shardName(0)) {
		t.Errorf("the shared log holds groups %q, want shard 0's and not shard 1's", groups)
	}
	if n2.replica(1) != nil {
		t.Error("shard 1's replica was opened again")
	}
}

// Dropping a replica leaves neither the replica's directory nor its tombstone, nor
// its log.
func TestDestroyRemovesEverything(t *testing.T) {
	dir := t.TempDir()
	var lb lockedBuffer
	cfg := Config{NodeID: "n1", DataDir: dir, GRPCAddr: loopback(t), RaftAddr: loopback(t), GossipAddr: loopback(t),
		Shards: 2, Replicas: 1, Logger: slog.New(slog.NewTextHandler(&lb, nil))}
	n, err := Open(cfg, &deadSeeds{})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	if err := n.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	r := n.replica(1)
	if r == nil {
		t.Fatal("no replica of shard 1")
	}
	n.dropReplica(r)
	if log := lb.String(); strings.Contains(log, "delete shard replica") {
		t.Fatalf("the deletion failed: %s", log)
	}
	live := filepath.Join(dir, "shards", "1")
	for _, p := range []string{live, live + destroyingSuffix} {
		if _, err := os.Stat(p); !os.IsNotExist(err) {
			t.Errorf("%s: %v, want it gone", p, err)
		}
	}
	if slices.Contains(n.wal.Groups(), shardName(1)) {
		t.Error("shard 1's log is still in the shared log")
	}
}
