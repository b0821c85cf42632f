package rpc_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/floodgate/floodgate/cluster"
	pb "github.com/floodgate/floodgate/proto/floodgate/v1"
	"github.com/floodgate/floodgate/test/inproc"
)

// single starts a one-node cluster and returns it with a client.
func single(t *testing.T) (*cluster.Node, pb.RateLimiterClient) {
	n := inproc.Cluster(t, 1)[0]
	return n.Node, n.Limiter()
}

func cost(c int64) *int64 { return &c }

// lastIndexes returns every shard's last Raft log index.
func lastIndexes(node *cluster.Node) []uint64 {
	var out []uint64
	for s := 0; s < node.Shards(); s++ {
		out = append(out, node.Progress(s).Last)
	}
	return out
}

// Bad input is refused with InvalidArgument naming the field, and reaches
// no Raft log.
func TestBadInputNamesTheFieldAndChangesNothing(t *testing.T) {
	node, rl := single(t)
	ctx := context.Background()
	minute := &pb.Limit{Algorithm: pb.Algorithm_SLIDING_LOG, Limit: 10, WindowMs: 60_000}
	if _, err := rl.Allow(ctx, &pb.AllowRequest{Key: "warm", Limit: minute}); err != nil {
		t.Fatal(err)
	}
	before := lastIndexes(node)
	with := func(f func(l *pb.Limit)) *pb.Limit {
		l := &pb.Limit{Algorithm: pb.Algorithm_SLIDING_LOG, Limit: 10, WindowMs: 60_000}
		f(l)
		return l
	}
	for _, tc := range []struct {
		name  string
		req   *pb.AllowRequest
		field string
	}{
		{"empty key", &pb.AllowRequest{Limit: minute}, "key:"},
		{"oversized key", &pb.AllowRequest{Key: strings.Repeat("k", 1025), Limit: minute}, "key:"},
		{"no limit", &pb.AllowRequest{Key: "k"}, "limit:"},
		{"zero limit", &pb.AllowRequest{Key: "k", Limit: with(func(l *pb.Limit) { l.Limit = 0 })}, "limit.limit:"},
		{"negative limit", &pb.AllowRequest{Key: "k", Limit: with(func(l *pb.Limit) { l.Limit = -5 })}, "limit.limit:"},
		{"zero window", &pb.AllowRequest{Key: "k", Limit: with(func(l *pb.Limit) { l.WindowMs = 0 })}, "limit.window_ms:"},
		{"negative window", &pb.AllowRequest{Key: "k", Limit: with(func(l *pb.Limit) { l.WindowMs = -1 })}, "limit.window_ms:"},
		{"window past a year", &pb.AllowRequest{Key: "k", Limit: with(func(l *pb.Limit) { l.WindowMs = 367 * 24 * 3600 * 1000 })}, "limit.window_ms:"},
		{"negative cost", &pb.AllowRequest{Key: "k", Limit: minute, Cost: cost(-1)}, "cost:"},
		{"cost above the limit", &pb.AllowRequest{Key: "k", Limit: minute, Cost: cost(11)}, "cost:"},
		{"unknown algorithm", &pb.AllowRequest{Key: "k", Limit: with(func(l *pb.Limit) { l.Algorithm = 42 })}, "limit.algorithm:"},
		{"unset algorithm", &pb.AllowRequest{Key: "k", Limit: with(func(l *pb.Limit) { l.Algorithm = 0 })}, "limit.algorithm: required: one of SLIDING_LOG, "},
		{"uneven buckets", &pb.AllowRequest{Key: "k", Limit: with(func(l *pb.Limit) {
			l.Algorithm, l.WindowMs, l.Buckets = pb.Algorithm_SLIDING_COUNTER, 1000, 7
		})}, "limit.buckets:"},
		{"calendar on a log", &pb.AllowRequest{Key: "k", Limit: with(func(l *pb.Limit) {
			l.Calendar, l.WindowMs = pb.CalendarUnit_CALENDAR_UNIT_MONTH, 0
		})}, "limit.calendar:"},
		{"log too long", &pb.AllowRequest{Key: "k", Limit: with(func(l *pb.Limit) { l.Limit = 10_001 })}, "limit.limit:"},
	} {
		_, err := rl.Allow(ctx, tc.req)
		if status.Code(err) != codes.InvalidArgument || !strings.Contains(status.Convert(err).Message(), tc.field) {
			t.Errorf("%s: got %v, want InvalidArgument naming %q", tc.name, err, tc.field)
		}
	}
	// Batches: too many checks, or one bad check, refuse the whole batch.
	big := &pb.AllowBatchRequest{}
	for i := 0; i < 1001; i++ {
		big.Requests = append(big.Requests, &pb.AllowRequest{Key: "k", Limit: minute})
	}
	if _, err := rl.AllowBatch(ctx, big); status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "requests:") {
		t.Errorf("1001 checks: %v", err)
	}
	mixed := &pb.AllowBatchRequest{Requests: []*pb.AllowRequest{
		{Key: "a", Limit: minute}, {Key: "b", Limit: minute}, {Key: "c", Limit: minute}, {Key: "", Limit: minute},
	}}
	if _, err := rl.AllowBatch(ctx, mixed); status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "requests[3].key:") {
		t.Errorf("bad fourth check: %v", err)
	}
	after := lastIndexes(node)
	for s := range before {
		if after[s] != before[s] {
			t.Errorf("shard %d log grew from %d to %d: bad input reached Raft", s, before[s], after[s])
		}
	}
}

func TestAllowBatchAndPeek(t *testing.T) {
	_, rl := single(t)
	ctx := context.Background()
	lim := &pb.Limit{Algorithm: pb.Algorithm_FIXED_WINDOW, Limit: 3, WindowMs: 3_600_000}
	req := &pb.AllowBatchRequest{}
	for i := 0; i < 5; i++ {
		req.Requests = append(req.Requests, &pb.AllowRequest{Key: "batch", Limit: lim})
	}
	req.Requests = append(req.Requests, &pb.AllowRequest{Key: "other", Limit: lim, Cost: cost(3)})
	resp, err := rl.AllowBatch(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	want := []bool{true, true, true, false, false, true}
	for i, item := range resp.Results {
		if item.Error != nil || item.Response.Allowed != want[i] {
			t.Errorf("item %d: %v, want allowed=%v", i, item, want[i])
		}
	}
	if r := resp.Results[3].Response; r.RetryAfterMs <= 0 || r.Remaining != 0 || r.Limit != 3 {
		t.Errorf("denied item: %v", r)
	}
	// A peek answers without counting.
	for i := 0; i < 3; i++ {
		p, err := rl.Allow(ctx, &pb.AllowRequest{Key: "peeked", Limit: lim, Cost: cost(0)})
		if err != nil || !p.Allowed || p.Remaining != 3 {
			t.Fatalf("peek %d: %v %v", i, p, err)
		}
	}
}

// Requests of a batch with equal inline limits share one policy; each is
// still counted under its own limit, with more distinct limits in the
// batch than are shared, interleaved.
func TestAllowBatchCountsEachInlineLimit(t *testing.T) {
	_, rl := single(t)
	const limits, tries = 11, 13
	req := &pb.AllowBatchRequest{}
	for try := 0; try < tries; try++ {
		for n := int64(1); n <= limits; n++ {
			lim := &pb.Limit{Algorithm: pb.Algorithm_FIXED_WINDOW, Limit: n, WindowMs: 3_600_000}
			req.Requests = append(req.Requests, &pb.AllowRequest{Key: fmt.Sprint("limit-", n), Limit: lim})
		}
	}
	resp, err := rl.AllowBatch(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	admitted := map[int64]int64{}
	for i, item := range resp.Results {
		n := req.Requests[i].Limit.Limit
		if item.Error != nil || item.Response.Limit != n {
			t.Fatalf("item %d (limit %d): %v", i, n, item)
		}
		if item.Response.Allowed {
			admitted[n]++
		}
	}
	for n := int64(1); n <= limits; n++ {
		if admitted[n] != n {
			t.Errorf("limit %d admitted %d of %d", n, admitted[n], tries)
		}
	}
}
