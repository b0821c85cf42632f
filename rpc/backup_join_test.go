package rpc_test

import (
	"context"
	"fmt"
	"io"
	"testing"
	"time"

	"github.com/floodgate/floodgate/backup"
	pb "github.com/floodgate/floodgate/proto/floodgate/v1"
	"github.com/floodgate/floodgate/test/inproc"
)

// A save as soon as a joining node's group exists, before it has a leader
// or slots, leaves it out (it holds nothing): the save waited for its
// leader, and failed (no leader) when the election took longer than
// --leader-wait (one save in three here).
func TestSaveAsANodeJoins(t *testing.T) {
	if testing.Short() {
		t.Skip("a cluster of four in-process nodes")
	}
	const slots = 64
	nodes := inproc.SlotCluster(t, 3, slots)
	ctx := context.Background()
	lim := &pb.Limit{Algorithm: pb.Algorithm_FIXED_WINDOW, Limit: 10, WindowMs: time.Hour.Milliseconds()}
	if _, err := nodes[0].Limiter().Allow(ctx, &pb.AllowRequest{Key: "j", Limit: lim}); err != nil {
		t.Fatal(err)
	}
	cfg := inproc.Config(t, "n4")
	cfg.Shards, cfg.Slots = 0, slots
	cfg.Join = []string{nodes[0].Cfg.GRPCAddr}
	// Started beside the test, so that the save runs while n4 joins; the
	// test waits for the start before it ends, or the cluster's cleanup
	// would close n4 mid-start.
	started := make(chan struct{})
	go func() {
		defer close(started)
		inproc.Start(t, cfg)
	}()
	defer func() { <-started }()
	inproc.Eventually(t, 30*time.Second, "n4's group", func() error {
		if n := len(nodes[0].Node.View().Groups); n != 4 {
			return fmt.Errorf("%d groups", n)
		}
		return nil
	})
	data, err := trySave(nodes[0])
	if err != nil {
		t.Fatal(err)
	}
	b, err := backup.Parse(data)
	if err != nil {
		t.Fatal(err)
	}
	if len(b.States) != 3 {
		t.Fatalf("%d group records: want the 3 groups holding slots", len(b.States))
	}
}

// trySave asks n for a backup, as floodgatectl snapshot save does.
func trySave(n *inproc.Node) ([]byte, error) {
	stream, err := n.Admin().SaveSnapshot(context.Background(), &pb.SaveSnapshotRequest{})
	if err != nil {
		return nil, err
	}
	var data []byte
	for {
		chunk, err := stream.Recv()
		if err == io.EOF {
			return data, nil
		}
		if err != nil {
			return nil, err
		}
		data = append(data, chunk.Data...)
	}
}
