package rpc

import (
	"context"
	"errors"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/floodgate/floodgate/cluster"
	metav1 "github.com/floodgate/floodgate/proto/floodgate/meta/v1"
	peerv1 "github.com/floodgate/floodgate/proto/floodgate/peer/v1"
)

// startingPeer answers Hello as a node that finishes starting at upAt
// (zero: never), or fails every call with err.
type startingPeer struct {
	peerv1.PeerClient
	upAt    time.Time
	err     error
	cluster string // the cluster id it reports
	calls   int
}

func noMember(string) bool { return false }

func (p *startingPeer) Hello(context.Context, *peerv1.HelloRequest, ...grpc.CallOption) (*peerv1.HelloResponse, error) {
	p.calls++
	if p.err != nil {
		return nil, p.err
	}
	starting := p.upAt.IsZero() || time.Now().Before(p.upAt)
	return &peerv1.HelloResponse{Node: &metav1.Node{Id: "c"}, ClusterId: p.cluster, Starting: starting}, nil
}

// Join waits a few seconds for a node that is still starting (one joining
// this cluster through its own --join is then a member), and refuses one
// still starting after that at once, naming node_addr, instead of
// waiting for the whole join's deadline.
func TestHelloStarted(t *testing.T) {
	t.Run("up after a second", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			p := &startingPeer{upAt: time.Now().Add(time.Second)}
			hello, err := helloStarted(context.Background(), p, "127.0.0.1:7730", "ours", noMember)
			if err != nil || hello.Starting {
				t.Fatalf("got %v, %v", hello, err)
			}
			if p.calls < 2 {
				t.Fatalf("asked %d times", p.calls)
			}
		})
	})
	t.Run("still starting", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			p := &startingPeer{}
			t0 := time.Now()
			_, err := helloStarted(context.Background(), p, "127.0.0.1:7730", "ours", noMember)
			if !errors.Is(err, cluster.ErrNotFresh) || !strings.Contains(err.Error(), "node_addr: node c at 127.0.0.1:7730 is still starting") {
				t.Fatalf("got %v", err)
			}
			if waited := time.Since(t0); waited < startingWait || waited > startingWait+startingPoll {
				t.Fatalf("refused after %s, want %s", waited, startingWait)
			}
		})
	})
	t.Run("a member still starting is answered at once", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			p := &startingPeer{cluster: "ours"}
			hello, err := helloStarted(context.Background(), p, "127.0.0.1:7730", "ours", func(id string) bool { return id == "c" })
			if err != nil || !hello.Starting || p.calls != 1 {
				t.Fatalf("got %v, %v after %d calls", hello, err, p.calls)
			}
		})
	})
	t.Run("resuming this cluster: no advice to start afresh", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			p := &startingPeer{cluster: "ours"}
			_, err := helloStarted(context.Background(), p, "127.0.0.1:7730", "ours", noMember)
			if !errors.Is(err, cluster.ErrNotReady) || !strings.Contains(err.Error(), "still resuming its membership of this cluster") ||
				strings.Contains(err.Error(), "empty --data-dir") {
				t.Fatalf("got %v", err)
			}
		})
	})
	t.Run("unreachable", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			p := &startingPeer{err: errors.New("connection refused")}
			// Unavailable, about the node named: not "no leader".
			_, err := helloStarted(context.Background(), p, "127.0.0.1:7730", "ours", noMember)
			if status.Code(err) != codes.Unavailable || !strings.HasPrefix(status.Convert(err).Message(), "node_addr: cannot reach the node at 127.0.0.1:7730") || p.calls != 1 {
				t.Fatalf("got %v after %d calls", err, p.calls)
			}
		})
	})
}
