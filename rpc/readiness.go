package rpc

import (
	"context"
	"time"

	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

// refuser is what WatchReadiness reads: the cluster's refusal of the node
// (cluster.Node.Refused), nil while there is none.
type refuser interface{ Refused() error }

// readinessEvery is how often WatchReadiness looks.
const readinessEvery = time.Second

// WatchReadiness keeps the health of the services clients check limits
// with NOT_SERVING while the cluster refuses the node (a restarted member
// whose --gossip-key, say, the cluster does not share), and SERVING
// otherwise, until ctx ends. A readiness probe on them then stops a
// rolling restart at the node an operator must fix. The server as a whole
// ("") stays SERVING: the process is alive, and a liveness probe must not
// restart it into the same refusal.
func WatchReadiness(ctx context.Context, hs *health.Server, node refuser) {
	t := time.NewTicker(readinessEvery)
	defer t.Stop()
	refused := false
	for {
		if now := node.Refused() != nil; now != refused {
			refused = now
			st := healthpb.HealthCheckResponse_SERVING
			if refused {
				st = healthpb.HealthCheckResponse_NOT_SERVING
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

// StopServing turns every service's health to NOT_SERVING for good, so
// load balancers stop sending before the node shuts down; later changes
// (WatchReadiness) are ignored.
func StopServing(hs *health.Server) { hs.Shutdown() }
