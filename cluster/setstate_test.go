package cluster

import (
	"context"
	"testing"
	"time"

	"github.com/floodgate/floodgate/fsm"
	metav1 "github.com/floodgate/floodgate/proto/floodgate/meta/v1"
)

// The meta leader's reconcile pass writes a member dead (or active again)
// from the view it read; a leave written after that read is not
// overwritten by the pass's write. It was: the member, meant to drain and
// go, was taken for dead (or active) and its leave never ended.
func TestReconcileStateWriteSparesALeave(t *testing.T) {
	// Gossip never sees n8 and n9: an hour before the node's own passes
	// would take them for dead.
	n := startOneWith(t, func(c *Config) { c.DeadAfter = time.Hour })
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	meta := n.metaGroup()
	for _, id := range []string{"n8", "n9"} {
		cmd, err := fsm.EncodeMeta(fsm.MetaUpsertNode, &metav1.UpsertNode{Node: &metav1.Node{
			Id: id, GrpcAddr: "127.0.0.1:1", RaftAddr: "127.0.0.1:2", GossipAddr: "127.0.0.1:3"}})
		if err != nil {
			t.Fatal(err)
		}
		if err := n.applyLocalMeta(meta, cmd); err != nil {
			t.Fatal(err)
		}
	}
	// No pass of the node's own starts from here on (one under way read
	// both members active and not yet dead): the test plays one.
	n.recon.pause.Lock()
	defer n.recon.pause.Unlock()
	v := n.View() // the pass's view: both members active
	if err := n.Leave(ctx, "n9"); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"n8", "n9"} {
		n.setState(ctx, id, v.Node(id).State, metav1.NodeState_NODE_STATE_DEAD)
	}
	if st := n.View().Node("n9").State; st != metav1.NodeState_NODE_STATE_LEAVING {
		t.Errorf("n9 left, then the pass wrote it: %v, want LEAVING", st)
	}
	if st := n.View().Node("n8").State; st != metav1.NodeState_NODE_STATE_DEAD {
		t.Errorf("n8, active as the pass read it: %v, want DEAD", st)
	}
}
