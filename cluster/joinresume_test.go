package cluster

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	metav1 "github.com/floodgate/floodgate/proto/floodgate/meta/v1"
)

// takingSeeds answers AddNode as a meta leader of cluster "cafebabe" that
// committed the record, and never sends its meta log: the node stays in
// the window between its acceptance and its Raft state.
type takingSeeds struct {
	deadSeeds
	mu  sync.Mutex
	via []string // the addresses AddNode was asked at
}

func (s *takingSeeds) AddNode(_ context.Context, addr string, _ *metav1.Node, _ GossipProof) (string, []string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.via = append(s.via, addr)
	return "cafebabecafebabe", nil, nil
}

// Hello answers as a member (n1) of cluster "cafebabe".
func (s *takingSeeds) Hello(context.Context, string) (string, string, error) {
	return "n1", "cafebabecafebabe", nil
}

func (s *takingSeeds) asked() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.via...)
}

// A node that `floodgatectl join` moved into another cluster, stopped
// after that cluster took it but before its meta log arrived, restarts
// (without --join, as such a node runs) by joining again through the
// member that took it: not by creating a cluster of its own, which the
// cluster it joined would still list as its member and send clients and
// replicas to.
func TestAJoinStoppedBeforeTheLogArrivesIsFinishedAtRestart(t *testing.T) {
	dir := t.TempDir()
	var lb lockedBuffer
	cfg := Config{NodeID: "n4", DataDir: dir, GRPCAddr: loopback(t), RaftAddr: loopback(t), GossipAddr: loopback(t),
		Shards: 1, Replicas: 1, Logger: slog.New(slog.NewTextHandler(&lb, nil))}
	seeds := &takingSeeds{}
	n, err := Open(cfg, seeds)
	if err != nil {
		t.Fatal(err)
	}
	if err := n.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	own := n.View().ClusterID
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	_, err = n.JoinCluster(ctx, []string{"127.0.0.1:7700"})
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("JoinCluster without the meta log: %v, want the deadline", err)
	}
	n.Close()
	if got := joiningVia(dir); !slices.Equal(got, []string{"127.0.0.1:7700"}) {
		t.Fatalf("the data dir records the join through %q, want 127.0.0.1:7700", got)
	}

	n2, err := Open(cfg, seeds)
	if err != nil {
		t.Fatal(err)
	}
	defer n2.Close()
	sctx, scancel := context.WithTimeout(context.Background(), time.Second)
	defer scancel()
	err = n2.Start(sctx)
	if err == nil {
		t.Fatalf("the restart became a member of cluster %q (its own was %s) with no meta log from the cluster it joined", n2.View().ClusterID, own)
	}
	if id := n2.View().ClusterID; id != "" {
		t.Errorf("the restart created cluster %q", id)
	}
	if got := seeds.asked(); len(got) != 2 || got[1] != "127.0.0.1:7700" {
		t.Errorf("AddNode asked at %q, want the join's address again at restart", got)
	}
	if got := recordedCluster(dir); got != "cafebabecafebabe" {
		t.Errorf("cluster file %q after the restart, want the cluster joined", got)
	}
}

// The mark goes once the node is a member with Raft state of its own: a
// node created alone, then restarted, does not carry one.
func TestJoinedClearsTheMark(t *testing.T) {
	dir := t.TempDir()
	if err := markJoining(dir, []string{"10.0.0.1:7700", "dns:floodgate:7700"}); err != nil {
		t.Fatal(err)
	}
	if got := joiningVia(dir); !slices.Equal(got, []string{"10.0.0.1:7700", "dns:floodgate:7700"}) {
		t.Fatalf("joiningVia %q", got)
	}
	if err := joined(dir); err != nil {
		t.Fatal(err)
	}
	if err := joined(dir); err != nil { // nothing to remove: no error
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, joiningFile)); !os.IsNotExist(err) {
		t.Fatalf("the mark is still there: %v", err)
	}
}

// The mark is written before the cluster is asked: a join whose AddNode
// committed while the node heard nothing (its call timed out, it crashed
// mid-call) is asked again at restart, not taken for no join at all.
func TestTheMarkIsWrittenBeforeTheClusterIsAsked(t *testing.T) {
	var log lockedBuffer
	peers := &deadSeeds{err: ErrNoLeader} // the answer never comes back
	n := joiningNode(t, peers, &log, "127.0.0.1:1", "127.0.0.1:2")
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	if err := n.Start(ctx); err == nil {
		t.Fatal("joined through seeds that never answer")
	}
	if got := joiningVia(n.cfg.DataDir); !slices.Equal(got, []string{"127.0.0.1:1", "127.0.0.1:2"}) {
		t.Fatalf("the mark holds %q after a join that heard nothing, want both addresses", got)
	}
}

// A join asked again at restart that a member refuses took nothing: the
// mark goes and the node, started without --join, creates its own
// cluster as a fresh node does.
func TestARefusedUnfinishedJoinCreatesItsOwnCluster(t *testing.T) {
	dir := t.TempDir()
	if err := markJoining(dir, []string{"127.0.0.1:1"}); err != nil {
		t.Fatal(err)
	}
	var lb lockedBuffer
	peers := &deadSeeds{err: fmt.Errorf("%w: node.raft_addr: bad", ErrConfig)}
	n, err := Open(Config{NodeID: "n4", DataDir: dir, GRPCAddr: loopback(t), RaftAddr: loopback(t), GossipAddr: loopback(t),
		Shards: 1, Replicas: 1, Logger: slog.New(slog.NewTextHandler(&lb, nil))}, peers)
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := n.Start(ctx); err != nil {
		t.Fatalf("start: %v", err)
	}
	if peers.calls != 1 || n.View().ClusterID == "" || joiningVia(dir) != nil {
		t.Fatalf("%d AddNode calls, cluster %q, mark %q: want one refused call, then a cluster of its own, no mark",
			peers.calls, n.View().ClusterID, joiningVia(dir))
	}
}

// A join through addresses where no member of a cluster answers (a typo,
// a forged call) is refused before anything is discarded: the node keeps
// its cluster, its counts and its readiness, and a restart resumes it.
// Before, it discarded them, then tried the addresses at every start.
func TestAJoinNobodyAnswersDiscardsNothing(t *testing.T) {
	n, cfg, _ := startedNode(t, t.TempDir())
	own := n.View().ClusterID
	for !n.CaughtUp() {
		time.Sleep(10 * time.Millisecond) // a real node's watcher
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err := n.JoinCluster(ctx, []string{"127.0.0.1:7700"})
	if !errors.Is(err, ErrNoLeader) || !Retryable(err) {
		t.Fatalf("JoinCluster where nobody answers: %v, want ErrNoLeader", err)
	}
	if !n.Ready() || !n.CaughtUp() || n.View().ClusterID != own || joiningVia(cfg.DataDir) != nil {
		t.Fatalf("after the refused join: ready %v, caught up %v, cluster %q (was %q), joining %q",
			n.Ready(), n.CaughtUp(), n.View().ClusterID, own, joiningVia(cfg.DataDir))
	}
	n.Close()
	n2, err := Open(cfg, &deadSeeds{})
	if err != nil {
		t.Fatal(err)
	}
	defer n2.Close()
	if err := n2.Start(context.Background()); err != nil || n2.View().ClusterID != own {
		t.Fatalf("restart: %v, cluster %q, want %q", err, n2.View().ClusterID, own)
	}
}
