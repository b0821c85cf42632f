package cluster

import (
	"io"
	"log/slog"
	"testing"
	"testing/synctest"
	"time"

	"github.com/floodgate/floodgate/fsm"
)

// A node watches the slots of a planned move on its replica of the move's
// source only if it leads the move's target (it exports from that
// replica); a watch refused because the replica has yet to learn it owns
// the slots is tried again on a later pass; a move no longer planned is
// forgotten.
func TestWatchMovesOnTheTargetLeader(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		src, tgt := newMemGroup(t, 3), newMemGroup(t, 1)
		defer src.close()
		defer tgt.close()
		follower := (src.leader() + 1) % 3
		n := &Node{log: slog.New(slog.NewTextHandler(io.Discard, nil)), shards: map[int]*replica{
			0: {id: 0, group: &Group{raft: src.rafts[follower]}, fsm: src.shards[follower]},
			1: {id: 1, group: &Group{raft: tgt.rafts[0]}, fsm: tgt.shards[0]},
		}}
		r := n.shards[0]
		v := &fsm.MetaView{Moves: []fsm.SlotMove{{ID: 7, From: 0, To: 1, Slots: []uint32{2}, State: fsm.MovePlanned}}}
		// The source has no ownership record yet: the watch is refused.
		n.watchMoves(r, v)
		n.wg.Wait()
		if r.fsm.Watched(7) || len(r.watching) != 0 {
			t.Fatalf("watched %v, started %v, before the group owns the slot", r.fsm.Watched(7), r.watching)
		}
		if err := src.rafts[src.leader()].Apply(fsm.EncodeInit(0, 4, []uint32{0, 1, 2, 3}), time.Second).Error(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Second) // the follower applies it
		n.watchMoves(r, v)
		n.wg.Wait()
		if !r.fsm.Watched(7) {
			t.Fatal("the target's leader did not watch the move on its replica of the source")
		}
		// A node that does not lead the target starts nothing.
		other := &replica{id: 0, group: &Group{raft: src.rafts[(follower+1)%3]}, fsm: src.shards[(follower+1)%3]}
		m := &Node{log: n.log, shards: map[int]*replica{0: other}}
		m.watchMoves(other, v)
		m.wg.Wait()
		if other.fsm.Watched(7) || len(other.watching) != 0 {
			t.Fatal("a node that does not lead the target watched the move")
		}
		// Once the move is frozen, it is no longer one to start.
		n.watchMoves(r, &fsm.MetaView{Moves: []fsm.SlotMove{{ID: 7, From: 0, To: 1, Slots: []uint32{2}, State: fsm.MoveFlipped}}})
		if len(r.watching) != 0 {
			t.Fatalf("a flipped move is still noted: %v", r.watching)
		}
	})
}
