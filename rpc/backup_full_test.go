package rpc_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/floodgate/floodgate/backup"
	"github.com/floodgate/floodgate/cluster"
	"github.com/floodgate/floodgate/fsm"
	pb "github.com/floodgate/floodgate/proto/floodgate/v1"
	"github.com/floodgate/floodgate/test/inproc"
)

// A restore that would make a group hold more key states than
// --max-key-states is refused, naming the flag: it went through, and the
// group then refused every check of a new key (ResourceExhausted) until
// restored states expired, an hour here. A backup over the bound by
// itself is refused before anything is written; one that fits, into a
// group holding others, by the group's leader. A backup that fits
// restores, and again (its keys' states replaced, not added).
func TestRestoreBeyondMaxKeyStates(t *testing.T) {
	src := inproc.SlotCluster(t, 1, 64)[0]
	ctx := context.Background()
	if _, err := src.Admin().SetPolicies(ctx, &pb.SetPoliciesRequest{Policies: []*pb.Policy{
		{Name: "saved", Limits: []*pb.PolicyLimit{pl("m", pb.Algorithm_SLIDING_LOG, 10, 60_000)}}}}); err != nil {
		t.Fatal(err)
	}
	// A sliding log, not a fixed window: a fixed window ends at the next
	// epoch-aligned hour, and states expired by one passing between the
	// checks and the saves were left out of them.
	lim := &pb.Limit{Algorithm: pb.Algorithm_SLIDING_LOG, Limit: 10, WindowMs: time.Hour.Milliseconds()}
	allow := func(n *inproc.Node, from, to int) {
		req := &pb.AllowBatchRequest{}
		for k := from; k < to; k++ {
			req.Requests = append(req.Requests, &pb.AllowRequest{Key: fmt.Sprintf("full-%d", k), Limit: lim})
		}
		if _, err := n.Limiter().AllowBatch(ctx, req); err != nil {
			t.Fatal(err)
		}
	}
	allow(src, 0, 100)
	low := saveBackup(t, src) // keys 0 to 99
	allow(src, 100, 200)
	all := saveBackup(t, src) // keys 0 to 199
	b, err := backup.Parse(all)
	if err != nil {
		t.Fatal(err)
	}
	sp := fsm.Splitter{GroupOf: func(key string) int {
		k := 0
		if _, err := fmt.Sscanf(key, "full-%d", &k); err == nil && k >= 100 {
			return 0
		}
		return -1
	}}
	parts, _, err := sp.Split(b.States[0])
	if err != nil {
		t.Fatal(err)
	}
	high := writeBackup(t, nil, parts[0]) // keys 100 to 199

	dst := inproc.ClusterOf(t, 1, func(c *cluster.Config) { c.Shards, c.Slots, c.MaxKeyStates = 0, 64, 150 })[0]
	_, err = restoreBackup(t, dst, all)
	if status.Code(err) != codes.ResourceExhausted || !strings.Contains(err.Error(), "would hold 200 of its key states, over --max-key-states (150)") {
		t.Fatalf("a backup of 200 key states into a group bounded to 150: %v", err)
	}
	if _, err := dst.Admin().GetPolicy(ctx, &pb.GetPolicyRequest{Name: "saved"}); status.Code(err) != codes.NotFound {
		t.Fatalf("the refused backup's policy: %v", err)
	}
	for i := range 2 {
		if resp, err := restoreBackup(t, dst, low); err != nil || resp.Keys != 100 {
			t.Fatalf("restore %d of 100 keys into a group bounded to 150: %v, %v", i+1, resp, err)
		}
	}
	_, err = restoreBackup(t, dst, high)
	if status.Code(err) != codes.ResourceExhausted || !strings.Contains(err.Error(), "would make the group hold 200 key states, over --max-key-states (150)") {
		t.Fatalf("100 more keys into a group holding 100, bounded to 150: %v", err)
	}
	if _, err := dst.Limiter().Allow(ctx, &pb.AllowRequest{Key: "new", Limit: lim}); err != nil {
		t.Fatalf("a new key after the refused restores: %v", err)
	}
}

// A restore whose states would hold more bytes than --max-state-mib is
// refused alike, naming the flag: by itself before anything is written,
// into a group holding others by the group's leader; one that fits
// restores.
func TestRestoreBeyondMaxStateBytes(t *testing.T) {
	src := inproc.SlotCluster(t, 1, 64)[0]
	ctx := context.Background()
	// 80 KB a key: a sliding log of 10,000 timestamps.
	lim := &pb.Limit{Algorithm: pb.Algorithm_SLIDING_LOG, Limit: 10_000, WindowMs: time.Hour.Milliseconds()}
	allow := func(from, to int) {
		req := &pb.AllowBatchRequest{}
		for k := from; k < to; k++ {
			cost := int64(10_000)
			req.Requests = append(req.Requests, &pb.AllowRequest{Key: fmt.Sprintf("big-%d", k), Limit: lim, Cost: &cost})
		}
		if _, err := src.Limiter().AllowBatch(ctx, req); err != nil {
			t.Fatal(err)
		}
	}
	allow(0, 10)
	low := saveBackup(t, src) // keys 0 to 9: about 800 KB
	allow(10, 20)
	all := saveBackup(t, src) // keys 0 to 19: about 1.6 MB

	dst := inproc.ClusterOf(t, 1, func(c *cluster.Config) { c.Shards, c.Slots, c.MaxStateBytes = 0, 64, 1<<20 })[0]
	_, err := restoreBackup(t, dst, all)
	if status.Code(err) != codes.ResourceExhausted || !strings.Contains(err.Error(), "backup: group 0's states would hold") ||
		!strings.Contains(err.Error(), "over --max-state-mib (1048576 bytes)") {
		t.Fatalf("a backup of 1.6 MB of states into a group bounded to 1 MiB: %v", err)
	}
	if resp, err := restoreBackup(t, dst, low); err != nil || resp.Keys != 10 {
		t.Fatalf("a restore of 800 KB into a group bounded to 1 MiB: %v, %v", resp, err)
	}
	b, err := backup.Parse(all)
	if err != nil {
		t.Fatal(err)
	}
	sp := fsm.Splitter{GroupOf: func(key string) int {
		k := 0
		if _, err := fmt.Sscanf(key, "big-%d", &k); err == nil && k >= 10 {
			return 0
		}
		return -1
	}}
	parts, _, err := sp.Split(b.States[0])
	if err != nil {
		t.Fatal(err)
	}
	_, err = restoreBackup(t, dst, writeBackup(t, nil, parts[0])) // keys 10 to 19
	if status.Code(err) != codes.ResourceExhausted || !strings.Contains(err.Error(), "would make the group's states hold") ||
		!strings.Contains(err.Error(), "over --max-state-mib (1048576 bytes)") {
		t.Fatalf("800 KB more into a group holding 800 KB, bounded to 1 MiB: %v", err)
	}
}
