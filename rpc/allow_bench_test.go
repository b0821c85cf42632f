package rpc_test

import (
	"context"
	"fmt"
	"testing"

	pb "github.com/floodgate/floodgate/proto/floodgate/v1"
	"github.com/floodgate/floodgate/rpc"
	"github.com/floodgate/floodgate/test/inproc"
)

// BenchmarkAllowFastLocal is a single fast check answered by the node that
// leads its key's group, called in-process (no gRPC): the Allow path's own
// CPU and allocations, from validation to the fast lane's answer.
func BenchmarkAllowFastLocal(b *testing.B) {
	node := inproc.Cluster(b, 1)[0]
	ctx := context.Background()
	if _, err := node.Admin().SetPolicies(ctx, &pb.SetPoliciesRequest{Policies: []*pb.Policy{{
		Name: "fast", Consistency: pb.Consistency_CONSISTENCY_FAST,
		Limits: []*pb.PolicyLimit{pl("per-second", pb.Algorithm_SLIDING_LOG, 1000, 1000)},
	}}}); err != nil {
		b.Fatal(err)
	}
	peers := rpc.NewPeers()
	defer peers.Close()
	srv := rpc.NewServer(node.Node, peers, rpc.Config{})
	keys := make([]string, 1024)
	for i := range keys {
		keys[i] = fmt.Sprint("bench:", i)
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		if _, err := srv.Allow(ctx, &pb.AllowRequest{Key: keys[i%len(keys)], Policy: "fast"}); err != nil {
			b.Fatal(err)
		}
		i++
	}
}

// BenchmarkAllowBatchStrictLocal is an AllowBatch of 100 strict checks with
// the same inline limit, all on one node's groups, called in-process (no
// gRPC): validation, the dispatcher, the log entry and its apply, per call.
func BenchmarkAllowBatchStrictLocal(b *testing.B) {
	node := inproc.Cluster(b, 1)[0]
	ctx := context.Background()
	peers := rpc.NewPeers()
	defer peers.Close()
	srv := rpc.NewServer(node.Node, peers, rpc.Config{})
	limit := &pb.Limit{Algorithm: pb.Algorithm_SLIDING_LOG, Limit: 1000, WindowMs: 1000}
	reqs := make([]*pb.AllowRequest, 100)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		for j := range reqs {
			reqs[j] = &pb.AllowRequest{Key: fmt.Sprint("bench:", (i*len(reqs)+j)%100_000), Limit: limit}
		}
		resp, err := srv.AllowBatch(ctx, &pb.AllowBatchRequest{Requests: reqs})
		if err != nil {
			b.Fatal(err)
		}
		if e := resp.Results[0].GetError(); e != nil {
			b.Fatal(e.Message)
		}
		i++
	}
}
