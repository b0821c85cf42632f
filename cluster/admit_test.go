package cluster

import (
	"context"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

// voteAsker sends RequestVote to a node's meta group over the legacy
// wire (its group layer on the node's Raft port).
type voteAsker struct{ mux *Mux }

func newVoteAsker(t *testing.T) *voteAsker {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	m := NewMux(ln, nil, nil, slog.New(slog.DiscardHandler), false)
	t.Cleanup(func() { m.Close() })
	return &voteAsker{mux: m}
}

// ask asks the node at addr for a vote in term 1 and returns the
// transport's error: nil means its Raft heard the request. Each ask has
// a transport of its own, so no pooled connection outlives a node.
func (a *voteAsker) ask(addr string) error {
	layer, err := a.mux.Layer("meta")
	if err != nil {
		return err
	}
	trans := raft.NewNetworkTransport(layer, 1, 2*time.Second, io.Discard)
	defer trans.Close() // and the layer
	req := &raft.RequestVoteRequest{
		RPCHeader: raft.RPCHeader{ProtocolVersion: raft.ProtocolVersionMax, ID: []byte("candidate"), Addr: []byte(a.mux.Addr().String())},
		Term:      1,
	}
	var resp raft.RequestVoteResponse
	return trans.RequestVote("n1", raft.ServerAddress(addr), req, &resp)
}

// A node whose data dir the cluster has not taken hears no peer: a
// member's lost dir started again under its id neither takes its peers'
// log nor grants a vote (an empty configuration grants any) before the
// cluster can refuse it. Once taken (a bootstrap here) it answers, and
// after a restart at once; so does a member's dir of a release before
// incarnations, which may need its peers' votes to replay its own log.
func TestRaftPortOpensOnceTheClusterTookTheDir(t *testing.T) {
	asker := newVoteAsker(t)
	cfg := Config{
		NodeID: "n1", DataDir: t.TempDir(), GRPCAddr: loopback(t), RaftAddr: loopback(t), GossipAddr: loopback(t),
		Shards: 1, Replicas: 1, Logger: slog.New(slog.DiscardHandler),
	}
	open := func() *Node {
		t.Helper()
		n, err := Open(cfg, nil)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	n := open()
	if err := asker.ask(cfg.RaftAddr); err == nil {
		t.Fatal("a node on a new data dir answered a vote request before the cluster took it")
	}
	if n.mux.Refused() == 0 {
		t.Fatal("the request reached the node's Raft port, yet the mux counts no refusal")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := n.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if err := asker.ask(cfg.RaftAddr); err != nil {
		t.Fatalf("a started node refused a vote request at the transport: %v", err)
	}
	n.Close()

	n = open()
	if err := asker.ask(cfg.RaftAddr); err != nil {
		t.Fatalf("a member's restart refused a vote request before Start: %v", err)
	}
	n.Close()

	// The dir as a release before incarnations left it.
	for _, f := range []string{"incarnation", acceptedFile} {
		if err := os.Remove(filepath.Join(cfg.DataDir, f)); err != nil {
			t.Fatal(err)
		}
	}
	n = open()
	defer n.Close()
	if !n.newIncarnation {
		t.Fatal("the dir got no new incarnation")
	}
	if err := asker.ask(cfg.RaftAddr); err != nil {
		t.Fatalf("a member's dir of an earlier release refused a vote request before Start: %v", err)
	}
}

// A member's dir of a release before incarnations, its first start on
// this one stopped before Start took it (a kill, or a SIGTERM while it
// waited for its meta leader): the next start resumes it. The decision
// to take the dir as it is was made at the first start, and kept only in
// memory: the next found an incarnation, Raft state and no mark, and
// refused the dir as one the cluster never took.
func TestUpgradedMemberStoppedBeforeStartResumes(t *testing.T) {
	dir := t.TempDir()
	n, cfg, _ := startedNode(t, dir)
	n.Close()
	for _, f := range []string{incarnationFile, acceptedFile} {
		if err := os.Remove(filepath.Join(dir, f)); err != nil {
			t.Fatal(err)
		}
	}
	n, err := Open(cfg, &deadSeeds{})
	if err != nil {
		t.Fatal(err)
	}
	if !n.newIncarnation {
		t.Fatal("the dir got no new incarnation")
	}
	n.Close() // stopped before Start

	n, err = Open(cfg, &deadSeeds{})
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	defer n.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := n.Start(ctx); err != nil {
		t.Fatalf("second start of an upgraded member: %v", err)
	}
}
