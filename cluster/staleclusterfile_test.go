package cluster_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/floodgate/floodgate/test/inproc"
)

// A node that began to create a cluster and stopped before its meta
// group held anything (bootstrap records the id it chose before the Raft
// port opens, then bootstraps the meta group) has no cluster: started
// again with --join, it joins the one it is given. Before, the id it had
// chosen stayed in its cluster file, its handshakes named it, and it
// refused the cluster it had just joined (AdmitPeer): the meta leader
// never reached it and its start waited for good.
func TestJoinAfterACreationThatNeverBegan(t *testing.T) {
	if testing.Short() {
		t.Skip("an in-process cluster")
	}
	a := inproc.SlotCluster(t, 1, 32)[0]
	cfg := inproc.Config(t, "n2")
	cfg.Shards, cfg.Slots = 0, 32
	// What bootstrap leaves when stopped between recordCluster and the
	// meta group's bootstrap.
	if err := os.WriteFile(filepath.Join(cfg.DataDir, "cluster"), []byte("00000000deadbeef\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg.Join = []string{a.Cfg.GRPCAddr}
	n := inproc.Open(t, cfg)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute) // a join takes seconds; the old code waited for good
	defer cancel()
	if err := n.Node.Start(ctx); err != nil {
		t.Fatalf("join: %v", err)
	}
	if got, want := n.Node.View().ClusterID, a.Node.View().ClusterID; got != want {
		t.Errorf("joined cluster %q, want %s", got, want)
	}
}

// A node without Raft state that creates a cluster makes a new one, of
// an id of its own, whatever id its cluster file held: one a join
// recorded before the meta log came (joinOnce) is another cluster's, and
// a cluster of the same id would be taken for it at every handshake.
func TestCreationIgnoresAClusterFileWithoutRaftState(t *testing.T) {
	const stale = "00000000deadbeef"
	cfg := inproc.Config(t, "n1")
	cfg.Shards, cfg.Slots = 0, 32
	if err := os.WriteFile(filepath.Join(cfg.DataDir, "cluster"), []byte(stale+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	n := inproc.Start(t, cfg)
	if got := n.Node.View().ClusterID; got == stale || got == "" {
		t.Errorf("created cluster %q from a data dir without Raft state whose cluster file held %s", got, stale)
	}
}
