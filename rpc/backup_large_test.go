package rpc_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/floodgate/floodgate/backup"
	"github.com/floodgate/floodgate/cluster"
	pb "github.com/floodgate/floodgate/proto/floodgate/v1"
	"github.com/floodgate/floodgate/test/inproc"
)

// A group holding more states than one gRPC message takes (4 MiB a peer
// client reads by default, 16 MiB a node's server sends or reads, 65 MiB
// it sent before) and than one backup record holds (backup.MaxRecord, 64
// MiB) is saved and restored through a node that does not lead it: its
// states cross to the leader and back, and the backup cuts them into
// records. They travelled in one message, so the save failed ("received
// message larger than max") for any group over 4 MiB led elsewhere, later
// for any over 64 MiB wherever it was led, and the restore for any over
// 16 MiB.
func TestSaveAndRestoreAGroupOverOneMessage(t *testing.T) {
	if testing.Short() {
		t.Skip("writes 70 MiB of states")
	}
	nodes := inproc.ClusterOf(t, 2, func(c *cluster.Config) { c.Shards, c.Replicas = 1, 2 })
	var via *inproc.Node // the node that does not lead the one group
	inproc.Eventually(t, 10*time.Second, "a node that does not lead shard 0", func() error {
		for _, n := range nodes {
			if rt, err := n.Node.Route(0); err == nil && !rt.Local && rt.Addr != "" {
				via = n
				return nil
			}
		}
		return fmt.Errorf("no follower knows the leader")
	})
	ctx := context.Background()
	const batches, perBatch = 70, 1000
	long := strings.Repeat("k", 1000)
	// A sliding log, not a fixed window: a fixed window ends at the next
	// epoch-aligned hour, and states expired by one passing between the
	// batches and the save were left out of it.
	limit := &pb.Limit{Algorithm: pb.Algorithm_SLIDING_LOG, Limit: 10, WindowMs: 3_600_000}
	for b := range batches {
		req := &pb.AllowBatchRequest{}
		for i := range perBatch {
			req.Requests = append(req.Requests, &pb.AllowRequest{Key: fmt.Sprintf("%s%06d", long, b*perBatch+i), Limit: limit})
		}
		if _, err := via.Limiter().AllowBatch(ctx, req); err != nil {
			t.Fatal(err)
		}
	}
	data := saveBackup(t, via)
	b, err := backup.Parse(data)
	if err != nil {
		t.Fatal(err)
	}
	total := 0
	for _, r := range b.States {
		total += len(r)
	}
	if len(b.States) < 3 || total < 68<<20 {
		t.Fatalf("%d group records of %d bytes in all: want the group's 68 MiB or more cut into 3 or more", len(b.States), total)
	}
	resp, err := restoreBackup(t, via, data)
	if err != nil || resp.Keys != batches*perBatch {
		t.Fatalf("restore through the follower: %v keys, %v", resp.GetKeys(), err)
	}
}
