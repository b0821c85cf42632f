package e2e

import (
	"context"
	"strconv"
	"syscall"
	"testing"
	"time"

	pb "github.com/floodgate/floodgate/proto/floodgate/v1"
)

// reportedWithin is how soon after its leader was paused every group's new
// leader must be what the other nodes' status says (and so where clients
// route): elections take about half a second here. A new shard leader's
// report, forwarded to the paused meta leader, was held for 5 s (11 of 30
// rounds; 3 took 15 s).
const reportedWithin = 2500 * time.Millisecond

// SIGSTOP of the meta leader, which also leads a group: its connections
// stay up, so nothing fails at once. The other nodes elect new leaders,
// and their status names them within reportedWithin, round after round
// (whichever group's election or the meta group's comes first).
func TestPausedMetaLeaderIsReplacedInEveryReport(t *testing.T) {
	c := startCluster(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for round := range 5 {
		st, err := c.Nodes[0].Admin().Status(ctx, &pb.StatusRequest{})
		if err != nil {
			t.Fatal(err)
		}
		var paused *Node
		var others []*Node
		for _, n := range c.Nodes {
			if n.ID == st.MetaLeader {
				paused = n
			} else {
				others = append(others, n)
			}
		}
		if paused == nil {
			t.Fatalf("round %d: no meta leader in %v", round, st)
		}
		if err := paused.Signal(syscall.SIGSTOP); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		var why string
		for why = stillNamed(ctx, others, paused.ID); why != "" && time.Since(start) < reportedWithin; why = stillNamed(ctx, others, paused.ID) {
			time.Sleep(50 * time.Millisecond)
		}
		took := time.Since(start)
		if err := paused.Signal(syscall.SIGCONT); err != nil {
			t.Fatal(err)
		}
		if why != "" {
			t.Fatalf("round %d: %s paused %v ago, and %s", round, paused.ID, took.Round(time.Millisecond), why)
		}
		t.Logf("round %d: %s paused; every group reported led elsewhere after %v", round, paused.ID, took.Round(10*time.Millisecond))
		if err := c.WaitSettled(ctx); err != nil {
			t.Fatal(err)
		}
	}
}

// stillNamed says which of nodes still names paused as a group's leader
// (or names none), "" when none does.
func stillNamed(ctx context.Context, nodes []*Node, paused string) string {
	for _, n := range nodes {
		cctx, cancel := context.WithTimeout(ctx, time.Second)
		st, err := n.Admin().Status(cctx, &pb.StatusRequest{})
		cancel()
		if err != nil {
			return n.ID + " did not answer its status: " + err.Error()
		}
		for _, s := range st.ShardStatus {
			if s.Leader == paused || s.Leader == "" {
				return n.ID + "'s status names " + paused + " (or nobody) as group " + strconv.Itoa(int(s.Id)) + "'s leader"
			}
		}
	}
	return ""
}
