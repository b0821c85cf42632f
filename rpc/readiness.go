package rpc

import (
	"context"
	"time"

	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

// readiness is what WatchReadiness reads: whether the node has caught up
// with its groups' leaders since it started (cluster.Node.CaughtUp), and
// the cluster's refusal of it (cluster.Node.Refused), nil while there is
// none.
type readiness interface {
	CaughtUp() bool
	Refused() error
}

// readinessEvery is how often WatchReadiness looks.
const readinessEvery = time.Second

// WatchReadiness keeps the health of the services clients check limits
// with NOT_SERVING until the node has caught up with its groups' leaders
// and while the cluster refuses it (a restarted member whose --gossip-key,
// say, the cluster does not share), and SERVING otherwise, until ctx ends.
// A readiness probe on them then stops a rolling restart at a node that
// its peers do not reach yet, or that an operator must fix, instead of
// stopping the next node while the groups still count on this one. The
// server as a whole ("", MarkLive) stays SERVING: the process is alive,
// and a liveness probe must not restart it into the same state.
func WatchReadiness(ctx context.Context, hs *health.Server, node readiness) {
	t := time.NewTicker(readinessEvery)
	defer t.Stop()
	ready, known := false, false
	for {
		if now := node.CaughtUp() && node.Refused() == nil; now != ready || !known {
			ready, known = now, true
			st := healthpb.HealthCheckResponse_NOT_SERVING
			if ready {
				st = healthpb.HealthCheckResponse_SERVING
			}
			for _, s := range checkServices[1:] {
				hs.SetServingStatus(s, st)
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// MarkLive flips the health of the server as a whole ("") to SERVING: the
// node is a cluster member. The services clients check limits with follow
// its readiness (WatchReadiness).
func MarkLive(hs *health.Server) {
	hs.SetServingStatus(checkServices[0], healthpb.HealthCheckResponse_SERVING)
}

// Ready reports whether hs says the node is ready for checks (its
// RateLimiter service is SERVING), for readiness endpoints besides gRPC
// health (HTTP /readyz).
func Ready(hs *health.Server) bool {
	r, err := hs.Check(context.Background(), &healthpb.HealthCheckRequest{Service: checkServices[1]})
	return err == nil && r.Status == healthpb.HealthCheckResponse_SERVING
}

// StopServing turns every service's health to NOT_SERVING for good, so
// load balancers stop sending before the node shuts down; later changes
// (WatchReadiness) are ignored.
func StopServing(hs *health.Server) { hs.Shutdown() }
