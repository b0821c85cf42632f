package rpc

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	pb "github.com/floodgate/floodgate/proto/floodgate/v1"
)

type fakeNode struct {
	caughtUp atomic.Bool
	err      atomic.Pointer[error]
}

func (f *fakeNode) CaughtUp() bool { return f.caughtUp.Load() }

func (f *fakeNode) Refused() error {
	if e := f.err.Load(); e != nil {
		return *e
	}
	return nil
}

// The check services go NOT_SERVING within a second of the cluster
// refusing the node and back once it takes it; the server as a whole stays
// SERVING (liveness); after StopServing nothing turns anything back on.
func TestWatchReadiness(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		hs := health.NewServer()
		MarkServing(hs)
		node := &fakeNode{}
		node.caughtUp.Store(true)
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan struct{})
		go func() { WatchReadiness(ctx, hs, node); close(done) }()
		status := func(svc string) healthpb.HealthCheckResponse_ServingStatus {
			r, err := hs.Check(context.Background(), &healthpb.HealthCheckRequest{Service: svc})
			if err != nil {
				t.Fatal(err)
			}
			return r.Status
		}
		want := func(what string, limiter, whole healthpb.HealthCheckResponse_ServingStatus) {
			t.Helper()
			if got := status(pb.RateLimiter_ServiceDesc.ServiceName); got != limiter {
				t.Errorf("%s: RateLimiter %v, want %v", what, got, limiter)
			}
			if got := status(""); got != whole {
				t.Errorf("%s: the server %v, want %v", what, got, whole)
			}
		}
		serving, not := healthpb.HealthCheckResponse_SERVING, healthpb.HealthCheckResponse_NOT_SERVING
		synctest.Wait()
		want("taken", serving, serving)
		err := errors.New("gossip_key: not this cluster's")
		node.err.Store(&err)
		time.Sleep(readinessEvery)
		synctest.Wait()
		want("refused", not, serving)
		node.err.Store(nil)
		time.Sleep(readinessEvery)
		synctest.Wait()
		want("taken again", serving, serving)
		StopServing(hs)
		node.err.Store(&err)
		time.Sleep(readinessEvery)
		node.err.Store(nil)
		time.Sleep(readinessEvery)
		synctest.Wait()
		want("after StopServing", not, not)
		cancel()
		<-done
	})
}

// A started node's check services stay NOT_SERVING until it has caught up
// with its groups' leaders (the server as a whole is SERVING: it is
// alive): a restarted member is a member at once, and a rolling restart
// that took it for ready stopped the next node while the groups still
// needed this one, or while its peers could not reach it at all.
func TestNotReadyUntilCaughtUp(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		hs := health.NewServer()
		MarkNotServing(hs)
		MarkLive(hs)
		node := &fakeNode{}
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan struct{})
		go func() { WatchReadiness(ctx, hs, node); close(done) }()
		want := func(what string, limiter healthpb.HealthCheckResponse_ServingStatus) {
			t.Helper()
			for svc, st := range map[string]healthpb.HealthCheckResponse_ServingStatus{
				pb.RateLimiter_ServiceDesc.ServiceName: limiter, "": healthpb.HealthCheckResponse_SERVING} {
				r, err := hs.Check(context.Background(), &healthpb.HealthCheckRequest{Service: svc})
				if err != nil {
					t.Fatal(err)
				}
				if r.Status != st {
					t.Errorf("%s: %q is %v, want %v", what, svc, r.Status, st)
				}
			}
			if Ready(hs) != (limiter == healthpb.HealthCheckResponse_SERVING) {
				t.Errorf("%s: Ready says %v", what, Ready(hs))
			}
		}
		time.Sleep(3 * readinessEvery)
		synctest.Wait()
		want("a member, not caught up", healthpb.HealthCheckResponse_NOT_SERVING)
		node.caughtUp.Store(true)
		time.Sleep(readinessEvery)
		synctest.Wait()
		want("caught up", healthpb.HealthCheckResponse_SERVING)
		cancel()
		<-done
	})
}
