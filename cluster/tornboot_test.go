package cluster

import (
	"context"
	"io"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"

	"github.com/floodgate/floodgate/raftlog"
)

// A group's stores opened on what a crash left: the term goes back to 0
// (raft then bootstraps the group again) only for what a bootstrap cut
// between its two writes leaves, term 1 and nothing else.
func TestUndoTornBootstrap(t *testing.T) {
	for _, tc := range []struct {
		name  string
		term  uint64 // 0: none written
		vote  uint64
		entry bool // a log entry at index 1
		snap  bool
		want  uint64 // the term after open; 0 with term 0: none
	}{
		{name: "torn bootstrap", term: 1, want: 0},
		{name: "new group", term: 0, want: 0},
		{name: "bootstrapped", term: 1, entry: true, want: 1},
		{name: "voted in term 1", term: 1, vote: 1, want: 1},
		{name: "restored from a snapshot", term: 1, snap: true, want: 1},
		{name: "past its first election", term: 2, want: 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			group := filepath.Join(dir, "g1")
			wal, err := raftlog.Open(filepath.Join(dir, walDir), raftlog.Options{NoSync: true})
			if err != nil {
				t.Fatal(err)
			}
			defer wal.Close()
			g := wal.Group("g1")
			must := func(err error) {
				t.Helper()
				if err != nil {
					t.Fatal(err)
				}
			}
			if tc.term > 0 {
				must(g.SetUint64(keyCurrentTerm, tc.term))
			}
			if tc.vote > 0 {
				must(g.SetUint64(keyLastVoteTerm, tc.vote))
			}
			if tc.entry {
				must(g.StoreLog(&raft.Log{Index: 1, Term: 1, Type: raft.LogConfiguration}))
			}
			if tc.snap {
				snaps, err := raft.NewFileSnapshotStoreWithLogger(group, snapshotsRetained, hclog.NewNullLogger())
				must(err)
				sink, err := snaps.Create(raft.SnapshotVersionMax, 10, 1, raft.Configuration{}, 1, nil)
				must(err)
				must(sink.Close())
			}
			st, err := openGroupStore(group, "g1", wal, hclog.NewNullLogger())
			must(err)
			got, err := st.state.GetUint64(keyCurrentTerm)
			if tc.term == 0 && tc.want == 0 {
				if err == nil {
					t.Fatalf("a new group got a term (%d)", got)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("term after open: %d, %v; want %d", got, err, tc.want)
			}
			if has, err := raft.HasExistingState(st.logs, st.state, st.snaps); err != nil || has != (tc.want > 0) {
				t.Fatalf("raft sees existing state: %v, %v; want %v", has, err, tc.want > 0)
			}
		})
	}
}

func tornBootCfg(t *testing.T, dir string) Config {
	return Config{NodeID: "n1", DataDir: dir, GRPCAddr: loopback(t), RaftAddr: loopback(t), GossipAddr: loopback(t),
		Replicas: 1, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
}

// A cluster's creation cut inside the meta group's bootstrap, after its
// term was written and before its configuration: the node starts again
// and creates its cluster (it waited for good for a meta leader).
func TestRestartAfterATornMetaBootstrap(t *testing.T) {
	dir := t.TempDir()
	n, err := Open(tornBootCfg(t, dir), &deadSeeds{})
	if err != nil {
		t.Fatal(err)
	}
	// What bootstrap had made durable at that point: the cluster's id,
	// the mark, and raft's first write.
	if err := recordCluster(dir, newClusterID()); err != nil {
		t.Fatal(err)
	}
	if err := markAccepted(dir); err != nil {
		t.Fatal(err)
	}
	if err := n.wal.Group(metaName).SetUint64(keyCurrentTerm, 1); err != nil {
		t.Fatal(err)
	}
	n.Close()
	restartTorn(t, dir)
}

// The same cut inside shard group 0's bootstrap: the group elects a
// leader after the restart (it had no configuration, and never would).
func TestRestartAfterATornShardBootstrap(t *testing.T) {
	dir := t.TempDir()
	n, err := Open(tornBootCfg(t, dir), &deadSeeds{})
	if err != nil {
		t.Fatal(err)
	}
	r, err := n.ensureReplica(0)
	if err != nil {
		t.Fatal(err)
	}
	if err := n.wal.Group(r.group.name).SetUint64(keyCurrentTerm, 1); err != nil {
		t.Fatal(err)
	}
	n.Close()
	n = restartTorn(t, dir)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := n.replica(0).group.waitLeader(ctx); err != nil {
		cfg, _ := n.replica(0).group.configuration()
		t.Fatalf("group 0 after the restart: %v (configuration %v)", err, cfg.Servers)
	}
}

// restartTorn opens and starts the node of dir again after the crash.
func restartTorn(t *testing.T, dir string) *Node {
	t.Helper()
	n, err := Open(tornBootCfg(t, dir), &deadSeeds{})
	if err != nil {
		t.Fatalf("reopen: %v", err)
	}
	t.Cleanup(func() { n.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := n.Start(ctx); err != nil {
		t.Fatalf("restart after a crash inside a bootstrap: %v", err)
	}
	return n
}
