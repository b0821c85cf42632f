package cluster_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"google.golang.org/grpc"

	"github.com/floodgate/floodgate/cluster"
	peerv1 "github.com/floodgate/floodgate/proto/floodgate/peer/v1"
	"github.com/floodgate/floodgate/raftnet"
	"github.com/floodgate/floodgate/test/inproc"
)

// addsAnyone answers AddNode as a member of cluster id, and does nothing
// more: the node it adds waits for the meta log, which never comes.
type addsAnyone struct {
	peerv1.UnimplementedPeerServer
	id string
}

func (a *addsAnyone) AddNode(context.Context, *peerv1.AddNodeRequest) (*peerv1.AddNodeResponse, error) {
	return &peerv1.AddNodeResponse{ClusterId: a.id}, nil
}

// A node that joins a cluster names it from the moment its Raft port
// takes peers: a node of another cluster calling the address (a member of
// its own that had it, now gone: a leader dials it ten times a second) is
// refused, not let into the joining node's meta group before the meta log
// of the cluster it joins has told it its cluster. Before, it named none
// until that log arrived, and took anyone meanwhile.
func TestJoiningNodeNamesItsClusterOnceItsPortOpens(t *testing.T) {
	const joined, other = "aaaaaaaaaaaaaaaa", "bbbbbbbbbbbbbbbb"
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gs := grpc.NewServer()
	peerv1.RegisterPeerServer(gs, &addsAnyone{id: joined})
	go gs.Serve(ln)
	defer gs.Stop()

	cfg := inproc.Config(t, "j1")
	cfg.Shards, cfg.Slots = 0, 32
	cfg.Join = []string{ln.Addr().String()}
	j := inproc.Open(t, cfg)
	ctx, cancel := context.WithCancel(context.Background())
	started := make(chan error, 1)
	go func() { started <- j.Node.Start(ctx) }()
	defer func() { cancel(); <-started }()

	// A node of the other cluster, calling j's Raft port.
	xl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	mux := cluster.NewMux(xl, nil, nil, slog.New(slog.DiscardHandler), false)
	defer mux.Close()
	layer, err := mux.Layer(raftnet.LayerName)
	if err != nil {
		t.Fatal(err)
	}
	x := raftnet.New(raftnet.Config{Layer: layer, Timeout: 5 * time.Second, Logger: slog.New(slog.DiscardHandler),
		Cluster: func() string { return other },
		Admit: func(c string) error {
			if c != "" && c != other {
				return fmt.Errorf("cluster %s", c)
			}
			return nil
		}})
	defer x.Close()
	tr, err := x.Transport("meta", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	var last error
	var resp raft.AppendEntriesResponse
	inproc.Eventually(t, 20*time.Second, "j's Raft port takes peers", func() error {
		req := &raft.AppendEntriesRequest{RPCHeader: raft.RPCHeader{ProtocolVersion: raft.ProtocolVersionMax, ID: []byte("x1"), Addr: []byte(xl.Addr().String())},
			Term: 7, Entries: []*raft.Log{{Index: 1, Term: 7, Type: raft.LogNoop}}}
		resp = raft.AppendEntriesResponse{}
		last = tr.AppendEntries("x1", raft.ServerAddress(j.Node.Config().RaftAddr), req, &resp)
		if last != nil && strings.Contains(last.Error(), "takes no peer yet") {
			return last
		}
		return nil
	})
	if !errors.Is(last, raftnet.ErrOtherCluster) {
		t.Fatalf("a node of cluster %s calling a node joining cluster %s: %v (its meta group answered %+v), want ErrOtherCluster", other, joined, last, resp)
	}
}
