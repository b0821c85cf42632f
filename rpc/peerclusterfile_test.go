package rpc_test

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	peerv1 "github.com/floodgate/floodgate/proto/floodgate/peer/v1"
	"github.com/floodgate/floodgate/test/inproc"
)

// answersProgress answers ShardProgress, noting the cluster each call named.
type answersProgress struct {
	peerv1.UnimplementedPeerServer
	mu    sync.Mutex
	named []string
}

func (a *answersProgress) ShardProgress(ctx context.Context, _ *peerv1.ShardProgressRequest) (*peerv1.ShardProgressResponse, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.named = append(a.named, metadata.ValueFromIncomingContext(ctx, "floodgate-cluster")...)
	return &peerv1.ShardProgressResponse{}, nil
}

// A node's Peer calls name the cluster its Raft handshakes name: a
// member restarted on its data dir knows it from its cluster file before
// its meta state is replayed, and a node of another cluster at an
// address it calls refuses it then too, as at the Raft port. Before, its
// calls named none until the meta log had been replayed, and were taken.
func TestPeerCallsNameTheClusterOfTheDataDir(t *testing.T) {
	cfg := inproc.Config(t, "n1")
	const own = "0123456789abcdef"
	if err := os.WriteFile(filepath.Join(cfg.DataDir, "cluster"), []byte(own+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, peers, _ := openedNode(t, cfg)

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	other := &answersProgress{}
	ogs := grpc.NewServer()
	peerv1.RegisterPeerServer(ogs, other)
	go ogs.Serve(ln)
	defer ogs.Stop()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := peers.Progress(ctx, ln.Addr().String(), 0); err != nil {
		t.Fatal(err)
	}
	other.mu.Lock()
	defer other.mu.Unlock()
	if len(other.named) != 1 || other.named[0] != own {
		t.Errorf("a Peer call of a node whose data dir is of cluster %s named %q", own, other.named)
	}
}
