package cluster

import (
	"context"
	"errors"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/floodgate/floodgate/fsm"
	metav1 "github.com/floodgate/floodgate/proto/floodgate/meta/v1"
)

// movePeers answers MoveApplied from the replica of a memGroup each
// address names; other calls fail as deadSeeds' do.
type movePeers struct {
	deadSeeds
	at    map[string]*fsm.Shard
	older map[string]bool // nodes of a release that does not answer
	asked []string
}

func (p *movePeers) MoveApplied(_ context.Context, addr string, _ int, move uint64, slots []uint32) (bool, bool, error) {
	p.asked = append(p.asked, addr)
	if p.older[addr] {
		return false, false, ErrNoMoveQuery
	}
	s, ok := p.at[addr]
	if !ok {
		return false, false, ErrNoLeader
	}
	f, in := s.MoveApplied(move, slots)
	return f, in, nil
}

// A peer's word that a move's step is done is logged only once a replica
// of the group that takes the step vouches for it: this node's own, else
// one the group's report names. Before that (a forged or early flip, a
// close before the import) it is refused as retryable, naming the move.
func TestConfirmMoveAsksTheGroup(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		src, dst := newMemGroup(t, 3), newMemGroup(t, 1)
		defer src.close()
		defer dst.close()
		lead := src.leader()
		apply := func(g *memGroup, entry []byte) {
			t.Helper()
			f := g.rafts[g.leader()].Apply(entry, time.Second)
			if err := f.Error(); err != nil {
				t.Fatal(err)
			}
			if err, ok := f.Response().(error); ok {
				t.Fatal(err)
			}
		}
		apply(src, fsm.EncodeInit(0, 8, []uint32{0, 1, 2, 3}))
		apply(dst, fsm.EncodeInit(1, 8, nil))
		time.Sleep(time.Second) // every replica applies the init

		node := func(id string) *metav1.Node { return &metav1.Node{Id: id, GrpcAddr: id + ":7070"} }
		v := &fsm.MetaView{
			Nodes: []*metav1.Node{node("n1"), node("n2"), node("n3")},
			Reports: []*metav1.ShardReport{
				{Shard: 0, Leader: "n2", Replicas: []*metav1.Replica{{NodeId: "n1"}, {NodeId: "n2"}, {NodeId: "n3"}}},
				{Shard: 1, Leader: "n3", Replicas: []*metav1.Replica{{NodeId: "n3"}}},
			},
		}
		mv := &fsm.SlotMove{ID: 7, From: 0, To: 1, Slots: []uint32{2, 3}, State: fsm.MovePlanned}
		peers := &movePeers{at: map[string]*fsm.Shard{"n2:7070": src.shards[lead]}}
		// n1 holds no replica of either group: it asks the reported ones.
		n := &Node{cfg: Config{NodeID: "n1"}, peers: peers, shards: map[int]*replica{}}
		refused := func(err error, text string) {
			t.Helper()
			if !errors.Is(err, ErrNoLeader) || !strings.Contains(err.Error(), text) {
				t.Errorf("%v, want a retryable refusal naming %q", err, text)
			}
		}
		refused(n.confirmMove(t.Context(), v, mv, 0, false), "move: no replica of group 0 asked has applied move 7's freeze")
		if strings.Join(peers.asked, " ") != "n2:7070 n3:7070" {
			t.Errorf("asked %v, want the report's leader, then its other replicas but n1", peers.asked)
		}

		apply(src, fsm.EncodeFreeze(7, mv.Slots))
		if err := n.confirmMove(t.Context(), v, mv, 0, false); err != nil {
			t.Errorf("after the freeze, asking the leader: %v", err)
		}
		// A replica of its own is enough: no call at all.
		follower := (lead + 1) % 3
		time.Sleep(time.Second)
		peers.at, peers.asked = nil, nil
		n.shards[0] = &replica{id: 0, group: &Group{raft: src.rafts[follower]}, fsm: src.shards[follower]}
		if err := n.confirmMove(t.Context(), v, mv, 0, false); err != nil || len(peers.asked) != 0 {
			t.Errorf("after the freeze, on its own replica: %v (asked %v)", err, peers.asked)
		}

		// The close of the move waits for the target's import.
		mv.State = fsm.MoveFlipped
		peers.at = map[string]*fsm.Shard{"n3:7070": dst.shards[0]}
		refused(n.confirmMove(t.Context(), v, mv, 1, true), "move 7's import")
		export, err := src.shards[lead].ExportSlots(7, mv.Slots)
		if err != nil {
			t.Fatal(err)
		}
		apply(dst, fsm.EncodeImport(7, 0, mv.Slots, export))
		if err := n.confirmMove(t.Context(), v, mv, 1, true); err != nil {
			t.Errorf("after the import: %v", err)
		}
		// The source's freeze does not stand for the target's import.
		peers.at = nil
		refused(n.confirmMove(t.Context(), v, mv, 0, true), "move 7's import")
		// Mid-roll, a replica of an older release cannot vouch: the step
		// is taken on the sender's word, as that release did.
		peers.older = map[string]bool{"n3:7070": true}
		if err := n.confirmMove(t.Context(), v, mv, 0, true); err != nil {
			t.Errorf("with an older replica asked: %v", err)
		}
	})
}
