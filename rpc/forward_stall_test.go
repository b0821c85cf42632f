package rpc

import (
	"context"
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"

	"github.com/floodgate/floodgate/cluster"
	"github.com/floodgate/floodgate/fsm"
	"github.com/floodgate/floodgate/policy"
	peerv1 "github.com/floodgate/floodgate/proto/floodgate/peer/v1"
	"github.com/floodgate/floodgate/window"
)

// stalledPeer is a Peer service that takes Forward calls and never
// answers them, as a SIGSTOPped or cut-off leader does, until the call's
// own deadline.
type stalledPeer struct {
	peerv1.UnimplementedPeerServer
	calls atomic.Int64
}

func (s *stalledPeer) Forward(ctx context.Context, _ *peerv1.ForwardRequest) (*peerv1.ForwardResponse, error) {
	s.calls.Add(1)
	<-ctx.Done()
	return nil, ctx.Err()
}

// A stalled leader costs its callers no more than their own deadline
// (the server's LeaderWait), and holds the per-peer call slots no longer:
// before, every call to it waited 7s and the calls behind them waited for
// those, so a 2s pause stalled the shard for its whole length.
func TestForwardToAStalledPeerEndsAtTheCallersDeadline(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	stalled := &stalledPeer{}
	gs := grpc.NewServer()
	peerv1.RegisterPeerServer(gs, stalled)
	go gs.Serve(ln)
	defer gs.Stop()
	peers := NewPeers()
	defer peers.Close()
	f := newForwarder(peers, nil)
	pol := &policy.Policy{Limits: []policy.Limit{{Limit: window.Limit{Algorithm: window.SlidingLog, Limit: 10, Window: int64(time.Minute)}}}}
	checks := []fsm.Check{{Key: "k", Policy: pol, Cost: 1}}
	const wait = 300 * time.Millisecond

	wave := func(n int) {
		t.Helper()
		var wg sync.WaitGroup
		start := time.Now()
		for range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				ctx, cancel := context.WithTimeout(context.Background(), wait)
				defer cancel()
				_, err := f.forward(ctx, ln.Addr().String(), 0, checks)
				if !errors.Is(err, cluster.ErrUnavailable) && !errors.Is(err, errNotSent) && !errors.Is(err, cluster.ErrNoLeader) {
					t.Errorf("forward to a stalled peer: %v, want unknown outcome or not sent", err)
				}
			}()
		}
		wg.Wait()
		if took := time.Since(start); took > wait+time.Second {
			t.Errorf("forwards to a stalled peer took %s, want about their %s deadline", took, wait)
		}
	}
	wave(3 * forwardInFlight) // fills every call slot and queues behind them
	before := stalled.calls.Load()
	if before == 0 {
		t.Fatal("no call reached the peer")
	}
	// The slots are free again: a new check is sent, not queued behind
	// calls nobody waits for.
	wave(1)
	if after := stalled.calls.Load(); after == before {
		t.Errorf("the peer saw no new call after the stalled ones ended (%d calls): slots still held", after)
	}
}
