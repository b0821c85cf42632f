package e2e

import (
	"context"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	collectorpb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/grpc"

	pb "github.com/floodgate/floodgate/proto/floodgate/v1"
)

// collector is a fake OTLP/gRPC trace collector: it keeps every span it
// is sent, as (trace id, span name, node).
type collector struct {
	collectorpb.UnimplementedTraceServiceServer
	mu    sync.Mutex
	spans []span
}

type span struct{ trace, name, node string }

func (c *collector) Export(_ context.Context, req *collectorpb.ExportTraceServiceRequest) (*collectorpb.ExportTraceServiceResponse, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, rs := range req.ResourceSpans {
		node := ""
		for _, a := range rs.GetResource().GetAttributes() {
			if a.Key == "service.instance.id" {
				node = a.GetValue().GetStringValue()
			}
		}
		for _, ss := range rs.ScopeSpans {
			for _, s := range ss.Spans {
				c.spans = append(c.spans, span{trace: fmt.Sprintf("%x", s.TraceId), name: s.Name, node: node})
			}
		}
	}
	return &collectorpb.ExportTraceServiceResponse{}, nil
}

// A check sent to one node and forwarded to its key's leader on another
// is one trace: the entry node's dispatch and forward, the leader's gRPC
// handling and Raft commit, exported by OTLP from both nodes.
func TestTracesFollowAForwardedCheck(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	col := &collector{}
	gs := grpc.NewServer()
	collectorpb.RegisterTraceServiceServer(gs, col)
	go gs.Serve(ln)
	defer gs.Stop()

	c := startCluster(t, 3, "--otlp-endpoint", ln.Addr().String(), "--otlp-insecure")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	entry := c.Running()[0]
	for i := range 30 { // about two in three are forwarded
		if _, err := entry.Limiter().Allow(ctx, &pb.AllowRequest{Key: fmt.Sprintf("trace:%d", i), Limit: slidingLog(5, time.Minute)}); err != nil {
			t.Fatal(err)
		}
	}
	for _, n := range c.Running() {
		n.Stop() // a clean stop flushes the node's spans
	}
	col.mu.Lock()
	defer col.mu.Unlock()
	byTrace := map[string][]span{}
	for _, s := range col.spans {
		byTrace[s.trace] = append(byTrace[s.trace], s)
	}
	forwarded := 0
	for _, spans := range byTrace {
		has := map[string]string{}
		for _, s := range spans {
			has[s.name] = s.node
		}
		if has["floodgate.decide"] != entry.ID || has["floodgate.forward"] != entry.ID {
			continue
		}
		leader, ok := has["raft.commit"]
		if ok && leader != entry.ID && has["floodgate.peer.v1.Peer/Forward"] == leader {
			forwarded++
		}
	}
	if forwarded == 0 {
		t.Fatalf("no trace runs from %s's dispatch through a forward to another node's commit; got %d spans in %d traces: %v",
			entry.ID, len(col.spans), len(byTrace), col.spans[:min(len(col.spans), 20)])
	}
	t.Logf("%d forwarded checks traced end to end (%d spans)", forwarded, len(col.spans))
}
