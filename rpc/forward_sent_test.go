package rpc

import (
	"context"
	"errors"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/floodgate/floodgate/cluster"
	"github.com/floodgate/floodgate/fsm"
	peerv1 "github.com/floodgate/floodgate/proto/floodgate/peer/v1"
	"github.com/floodgate/floodgate/test/fuzzseed"
)

// countingPeer answers Forward calls, counting them; while hangUp is set,
// a call stops the peer's server (its connections drop) instead of
// answering.
type countingPeer struct {
	peerv1.UnimplementedPeerServer
	calls  atomic.Int64
	hangUp atomic.Pointer[grpc.Server]
}

func (p *countingPeer) Forward(_ context.Context, req *peerv1.ForwardRequest) (*peerv1.ForwardResponse, error) {
	p.calls.Add(1)
	if gs := p.hangUp.Load(); gs != nil {
		go gs.Stop()
		time.Sleep(time.Second) // the connection drops before the answer
	}
	resp := &peerv1.ForwardResponse{}
	for range req.Checks {
		resp.Results = append(resp.Results, &peerv1.ForwardResult{Decision: &peerv1.Decision{Allowed: true}})
	}
	return resp, nil
}

// A forward whose peer connection broke after it was seen ready, before
// the call had it, reached nobody: it is answered not sent, so the check
// is routed again, not failed as an unknown outcome. One that reached the
// peer before its connection dropped stays an unknown outcome.
func TestForwardOnAConnectionThatBrokeIsNotSentOnlyIfItNeverLeft(t *testing.T) {
	for _, reached := range []bool{false, true} {
		name := "broke before the call"
		if reached {
			name = "broke during the call"
		}
		t.Run(name, func(t *testing.T) {
			ln := &memListener{conns: make(chan net.Conn), done: make(chan struct{})}
			srv := grpc.NewServer()
			peer := &countingPeer{}
			peerv1.RegisterPeerServer(srv, peer)
			go srv.Serve(ln)
			defer srv.Stop()
			// The interceptor runs after waitReady saw the connection up:
			// there the peer goes away (its listener too, so gRPC cannot
			// reconnect) and the call waits until the connection knows.
			intercept := func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
				if method == peerv1.Peer_Forward_FullMethodName && !reached {
					ln.Close()
					srv.Stop()
					for cc.GetState() == connectivity.Ready {
						cc.WaitForStateChange(ctx, connectivity.Ready)
					}
				}
				return invoker(ctx, method, req, reply, cc, opts...)
			}
			cc, err := grpc.NewClient("passthrough:///peer-1", grpc.WithTransportCredentials(insecure.NewCredentials()),
				grpc.WithContextDialer(ln.dial), grpc.WithUnaryInterceptor(intercept))
			if err != nil {
				t.Fatal(err)
			}
			defer cc.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			for cc.Connect(); cc.GetState() != connectivity.Ready; {
				if !cc.WaitForStateChange(ctx, cc.GetState()) {
					t.Fatal("connection never became ready")
				}
			}
			if reached {
				ln.Close()
				peer.hangUp.Store(srv)
			}
			peers := NewPeers()
			defer peers.Close()
			peers.conns["peer-1"] = cc
			f := newForwarder(peers, nil)
			_, err = f.forward(ctx, "peer-1", 0, []fsm.Check{{Key: "k", Policy: fuzzseed.Policies()[0], Cost: 1}})
			switch {
			case reached && (errors.Is(err, errNotSent) || !errors.Is(err, cluster.ErrUnavailable)):
				t.Errorf("a forward the peer took: %v, want an unknown outcome", err)
			case !reached && !errors.Is(err, errNotSent):
				t.Errorf("a forward that never left: %v, want not sent", err)
			}
			if want := int64(map[bool]int{false: 0, true: 1}[reached]); peer.calls.Load() != want {
				t.Errorf("the peer took %d calls, want %d", peer.calls.Load(), want)
			}
		})
	}
}
