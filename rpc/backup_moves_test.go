package rpc_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/floodgate/floodgate/backup"
	"github.com/floodgate/floodgate/cluster/hashing"
	"github.com/floodgate/floodgate/fsm"
	metav1 "github.com/floodgate/floodgate/proto/floodgate/meta/v1"
	pb "github.com/floodgate/floodgate/proto/floodgate/v1"
	"github.com/floodgate/floodgate/rpc"
	"github.com/floodgate/floodgate/test/inproc"
)

// keysOfSlot counts the keys of states (a backup's record or an export)
// in slot of slots, or in every slot when slot < 0.
func keysOfSlot(t *testing.T, states [][]byte, slot, slots int) int {
	t.Helper()
	sp := fsm.Splitter{GroupOf: func(key string) int {
		if slot < 0 || hashing.ShardOf(key, slots) == slot {
			return 0
		}
		return -1
	}}
	for _, s := range states {
		if _, _, err := sp.Split(s); err != nil {
			t.Fatal(err)
		}
	}
	return sp.Keys
}

// A slot that finishes a move between the export of its target and that
// of its source (the target had not imported it yet, the source has
// dropped it) is in neither export: the save takes the backup again
// rather than leaving the slot's keys out. A save while a node left (its
// group, exported last, drained into the others) lost keys so, silently.
func TestSaveWhileASlotMovesBackward(t *testing.T) {
	const slots, keys = 64, 640
	nodes := inproc.SlotCluster(t, 3, slots)
	ctx := context.Background()
	// A sliding log, not a fixed window: a fixed window ends at the next
	// epoch-aligned hour, and states expired by one passing before the
	// saves were left out of them (about one run in a few hundred).
	lim := &pb.Limit{Algorithm: pb.Algorithm_SLIDING_LOG, Limit: 10, WindowMs: time.Hour.Milliseconds()}
	req := &pb.AllowBatchRequest{}
	for k := range keys {
		req.Requests = append(req.Requests, &pb.AllowRequest{Key: fmt.Sprintf("mv-%d", k), Limit: lim})
	}
	if _, err := nodes[0].Limiter().AllowBatch(ctx, req); err != nil {
		t.Fatal(err)
	}
	v := nodes[0].Node.View()
	ids := v.GroupIDs()
	first, last := ids[0], ids[len(ids)-1]
	// One slot of the last group goes to the first, one of the first to
	// the last (so the cluster stays balanced and nothing else moves).
	data, err := backup.Parse(saveBackup(t, nodes[0]))
	if err != nil {
		t.Fatal(err)
	}
	slotOf := func(g uint32) uint32 {
		for s, owner := range v.Table {
			if owner == g && keysOfSlot(t, data.States, s, slots) > 0 {
				return uint32(s)
			}
		}
		t.Fatalf("group %d has no slot holding keys", g)
		return 0
	}
	back, fore := slotOf(last), slotOf(first)
	inBack := keysOfSlot(t, data.States, int(back), slots)

	peers := rpc.NewPeers()
	t.Cleanup(func() { peers.Close() })
	cfg := nodes[0].RPC
	cfg.LeaderWait = 2 * time.Second // NewServer's default, which NewAdminServer does not fill
	a := rpc.NewAdminServer(nodes[0].Node, peers, cfg)
	moved := false
	saved, err := rpc.SaveBackupWith(ctx, a, func(ctx context.Context, g int, own func(context.Context, int) ([]byte, error)) ([]byte, error) {
		states, err := own(ctx, g)
		if err != nil || uint32(g) != first || moved {
			return states, err
		}
		moved = true
		cmd, err := fsm.EncodeMeta(fsm.MetaPlanMoves, &metav1.PlanMoves{Moves: []*metav1.Move{
			{From: last, To: first, Slots: []uint32{back}},
			{From: first, To: last, Slots: []uint32{fore}},
		}})
		if err != nil {
			t.Fatal(err)
		}
		if err := nodes[0].Node.ApplyMeta(ctx, cmd); err != nil {
			t.Fatal(err)
		}
		inproc.Eventually(t, 30*time.Second, "the slot dropped by its source", func() error {
			if len(nodes[0].Node.View().Moves) > 0 {
				return fmt.Errorf("moves in flight")
			}
			src, err := own(ctx, int(last))
			if err != nil {
				return err
			}
			if n := keysOfSlot(t, [][]byte{src}, int(back), slots); n > 0 {
				return fmt.Errorf("the source still exports %d keys of slot %d", n, back)
			}
			return nil
		})
		return states, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	b, err := backup.Parse(saved)
	if err != nil {
		t.Fatal(err)
	}
	if got := keysOfSlot(t, b.States, -1, slots); got != keys {
		t.Fatalf("the backup holds %d keys of %d (slot %d, which moved from group %d to group %d under it, holds %d)",
			got, keys, back, last, first, inBack)
	}
}
