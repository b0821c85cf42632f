package cluster_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	pb "github.com/floodgate/floodgate/proto/floodgate/v1"
	"github.com/floodgate/floodgate/test/inproc"
)

func TestThreeNodesSettle(t *testing.T) {
	nodes := inproc.Cluster(t, 3)
	inproc.WaitSettled(t, nodes, 10*time.Second)
	st, err := nodes[1].Admin().Status(context.Background(), &pb.StatusRequest{})
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range st.Nodes {
		if n.State != "active" || n.Health != "alive" || !n.MetaVoter {
			t.Errorf("node %s: state %s, health %s, meta voter %v", n.Id, n.State, n.Health, n.MetaVoter)
		}
		if n.Replicas != 8 {
			t.Errorf("node %s holds %d replicas, want all 8", n.Id, n.Replicas)
		}
	}
	leaders := map[string]int{}
	for _, s := range st.ShardStatus {
		leaders[s.Leader]++
	}
	if len(leaders) < 2 {
		t.Errorf("every shard led by one node: %v (leadership should follow the placement)", leaders)
	}
}

func TestJoinFreshNodeByAdmin(t *testing.T) {
	n1 := inproc.Start(t, inproc.Config(t, "n1"))
	n2 := inproc.Start(t, inproc.Config(t, "n2")) // a cluster of its own
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	resp, err := n1.Admin().Join(ctx, &pb.JoinRequest{NodeAddr: n2.Cfg.GRPCAddr})
	if err != nil {
		t.Fatal(err)
	}
	if resp.NodeId != "n2" || resp.ClusterId != n1.Node.View().ClusterID {
		t.Fatalf("join answered %v", resp)
	}
	inproc.WaitSettled(t, []*inproc.Node{n1, n2}, 30*time.Second)
	// Joined once, n2 is no longer fresh: it cannot be pulled elsewhere.
	n3 := inproc.Start(t, inproc.Config(t, "n3"))
	if _, err := n3.Admin().Join(ctx, &pb.JoinRequest{NodeAddr: n2.Cfg.GRPCAddr}); err == nil {
		t.Fatal("joined a member of another cluster")
	}
}

func TestLeaveDrainsAndRemoves(t *testing.T) {
	nodes := inproc.Cluster(t, 3)
	cfg := inproc.Config(t, "n4")
	cfg.Join = []string{nodes[0].Cfg.GRPCAddr}
	nodes = append(nodes, inproc.Start(t, cfg))
	inproc.WaitSettled(t, nodes, 30*time.Second)
	leave(t, nodes[0], nodes[1])
	rest := []*inproc.Node{nodes[0], nodes[2], nodes[3]}
	inproc.WaitSettled(t, rest, 30*time.Second)
	st, err := nodes[0].Admin().Status(context.Background(), &pb.StatusRequest{})
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range st.Nodes {
		if n.Id == "n2" {
			t.Fatalf("n2 still listed: %v", n)
		}
	}
	// The last active node cannot leave: nothing could take its replicas.
	lone := inproc.Start(t, inproc.Config(t, "lone"))
	if _, err := lone.Admin().Leave(context.Background(), &pb.LeaveRequest{}); err == nil {
		t.Fatal("the only node of a cluster left it")
	}
}

func TestRestartsKeepMembership(t *testing.T) {
	nodes := inproc.Cluster(t, 3)
	nodes[1].Restart()
	inproc.WaitSettled(t, nodes, 30*time.Second)
	inproc.RestartAll(t, nodes...)
	inproc.WaitSettled(t, nodes, 30*time.Second)
	st, err := nodes[2].Admin().Status(context.Background(), &pb.StatusRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Nodes) != 3 {
		t.Fatalf("%d nodes after a full restart", len(st.Nodes))
	}
}

// A node that left may come back under its old --node-id with an empty data
// dir (the README's way back): it replays the meta log, which lists it, then
// removes it (its leave), before its rejoin lists it again. It must stay
// through that replay, and the cluster settle with it.
func TestRejoinUnderTheSameID(t *testing.T) {
	nodes := inproc.SlotCluster(t, 3, 4096)
	leave(t, nodes[0], nodes[1])
	nodes[1].Stop()
	cfg := inproc.Config(t, "n2") // an empty data dir, new ports
	cfg.Shards, cfg.Slots = 0, 4096
	cfg.Join = []string{nodes[0].Cfg.GRPCAddr}
	back := inproc.Start(t, cfg)
	rest := []*inproc.Node{nodes[0], nodes[2], back}
	inproc.WaitSettled(t, rest, time.Minute)
	select {
	case <-back.Node.Left():
		t.Fatal("the rejoined n2 took its replayed leave for a removal")
	default:
	}
	// A restart replays its whole meta log, both lives included.
	back.Restart()
	inproc.WaitSettled(t, rest, time.Minute)
	select {
	case <-back.Node.Left():
		t.Fatal("the restarted n2 took its replayed leave for a removal")
	case <-back.Node.Replaced():
		t.Fatalf("the restarted n2 took its first life's record for another dir's: %v", back.Node.ReplacedErr())
	default:
	}
	st, err := nodes[0].Admin().Status(context.Background(), &pb.StatusRequest{})
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range st.Nodes {
		if n.Id == "n2" && (n.State != "active" || n.Replicas == 0) {
			t.Fatalf("n2 rejoined as %v", n)
		}
	}
}

// leave drains node through by's Admin API and waits until node knows it
// was removed (Left), as the process exits on it. A node taken out of the
// meta group may hold log entries it never hears committed: it must know
// itself removed all the same.
func leave(t *testing.T, by, node *inproc.Node) {
	t.Helper()
	if _, err := by.Admin().Leave(context.Background(), &pb.LeaveRequest{NodeId: node.ID}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-node.Node.Left():
	case <-time.After(30 * time.Second):
		t.Fatalf("%s was not removed", node.ID)
	}
}

// A member whose data dir was lost, started again under its --node-id
// with an empty one, is not the member it was: its Raft votes and log went
// with the old dir, so the cluster refuses it, naming what to do, and
// keeps the old member's record; once the old member is taken out
// (leave), the node joins as a new one.
func TestLostDataDirIsNotTheMemberItWas(t *testing.T) {
	nodes := inproc.SlotCluster(t, 3, 64)
	old := nodes[0].Node.View().Node("n3")
	nodes[2].Stop()
	cfg := nodes[2].Cfg // its addresses, an empty data dir
	cfg.DataDir = t.TempDir()
	cfg.Join = []string{nodes[0].Cfg.GRPCAddr}
	if _, err := inproc.TryStart(t, cfg); err == nil || !strings.Contains(err.Error(), "node.incarnation: n3 is a member whose data dir was another") ||
		!strings.Contains(err.Error(), "floodgatectl leave n3") {
		t.Fatalf("a wiped n3 started: %v, want a refusal naming node.incarnation", err)
	}
	// Started again on the dir of its refused start (a crash loop): its
	// Raft port stayed closed to its peers until the cluster would take
	// it, so the dir holds nothing of theirs, and it is refused again.
	if _, err := inproc.TryStart(t, cfg); err == nil || !strings.Contains(err.Error(), "node.incarnation") {
		t.Fatalf("a wiped n3 started again: %v, want a refusal naming node.incarnation", err)
	}
	// A dir holding Raft state the cluster never took it for (what a
	// release without that gate let peers write into a refused start's
	// dir; here n3's own, under a new incarnation and without its mark)
	// is not discarded on a guess: the node refuses to start, naming it.
	leftover := t.TempDir()
	if err := os.CopyFS(leftover, os.DirFS(nodes[2].Cfg.DataDir)); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(leftover, "incarnation.accepted")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(leftover, "incarnation"), []byte(strings.Repeat("ab", 16)+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	odd := cfg
	odd.DataDir = leftover
	if _, err := inproc.TryStart(t, odd); err == nil || !strings.Contains(err.Error(), "data-dir: "+leftover+" holds Raft state but not incarnation.accepted") {
		t.Fatalf("n3 on a dir of foreign Raft state started: %v, want a refusal naming the dir", err)
	}
	if _, err := os.Stat(filepath.Join(leftover, "incarnation.accepted")); !os.IsNotExist(err) {
		t.Fatalf("the refused start marked the dir accepted: %v", err)
	}
	if now := nodes[0].Node.View().Node("n3"); now.Incarnation != old.Incarnation || now.Incarnation == "" {
		t.Fatalf("n3's record after the refusal: %v, was %v", now, old)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := nodes[0].Admin().Leave(ctx, &pb.LeaveRequest{NodeId: "n3"}); err != nil {
		t.Fatal(err)
	}
	inproc.Eventually(t, time.Minute, "the old n3 removed", func() error {
		if nodes[0].Node.View().Node("n3") != nil {
			return errors.New("n3 still a member")
		}
		return nil
	})
	// Started again on that dir (the README's way back keeps the
	// volume), the node joins as a new member.
	back := inproc.Start(t, cfg)
	inproc.WaitSettled(t, []*inproc.Node{nodes[0], nodes[1], back}, time.Minute)
	if now := nodes[0].Node.View().Node("n3"); now == nil || now.Incarnation == old.Incarnation {
		t.Fatalf("n3 rejoined as %v", now)
	}
	select {
	case <-back.Node.Replaced():
		t.Fatalf("the rejoined n3 stopped: %v", back.Node.ReplacedErr())
	case <-back.Node.Left():
		t.Fatal("the rejoined n3 took itself for removed")
	case <-time.After(3 * time.Second):
	}
	// A copy of the old n3's dir (a disk restored from an image), started
	// in the new n3's place, resumes a life the cluster ended: it stops
	// once its peers' log tells it so, and changes nothing.
	back.Stop()
	stale := cfg
	stale.DataDir = t.TempDir()
	if err := os.CopyFS(stale.DataDir, os.DirFS(nodes[2].Cfg.DataDir)); err != nil {
		t.Fatal(err)
	}
	copied := inproc.Start(t, stale)
	select {
	case <-copied.Node.Replaced():
		if err := copied.Node.ReplacedErr(); !strings.Contains(err.Error(), "node.incarnation") {
			t.Fatalf("the stale copy stopped with %v, want it to name node.incarnation", err)
		}
	case <-copied.Node.Left():
	case <-time.After(time.Minute):
		t.Fatal("a stale copy of the old n3's dir went on as n3")
	}
	copied.Stop()
	if now := nodes[0].Node.View().Node("n3"); now == nil || now.Incarnation == old.Incarnation {
		t.Fatalf("n3's record after the stale copy: %v", now)
	}
	// And the new n3 resumes its life on a restart.
	back.Restart()
	inproc.WaitSettled(t, []*inproc.Node{nodes[0], nodes[1], back}, time.Minute)
}
