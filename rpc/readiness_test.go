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

type fakeRefuser struct{ err atomic.Pointer[error] }

func (f *fakeRefuser) Refused() error {
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
		node := &fakeRefuser{}
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
