package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"
)

// floodgatectl join of a node still joining through its own --join (here
// an address nobody answers) is refused within seconds, saying so; it
// waited a minute before, then failed with a bare DeadlineExceeded.
func TestCtlJoinOfANodeStillStarting(t *testing.T) {
	c := startCluster(t, 1)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	late, err := c.NewNode("late")
	if err != nil {
		t.Fatal(err)
	}
	if err := late.Start("127.0.0.1:1"); err != nil {
		t.Fatal(err)
	}
	// Its gRPC port serves before it joins.
	waitFor(t, ctx, "the late node's first join attempt", func() error {
		if !strings.Contains(late.Log(), "cannot join the cluster yet") {
			return fmt.Errorf("not yet:\n%s", tail(late.Log(), 5))
		}
		return nil
	})
	t0 := time.Now()
	out, err := c.Ctl(ctx, c.Nodes[0].GRPC, "join", late.GRPC)
	if err == nil {
		t.Fatalf("joined a node still starting: %s", out)
	}
	if took := time.Since(t0); took > 15*time.Second {
		t.Errorf("refused after %s", took)
	}
	if !strings.Contains(err.Error(), "node_addr: node late at "+late.GRPC+" is still starting") {
		t.Fatalf("no error saying the node is still starting: %v", err)
	}
	if st, err := c.Status(ctx); err != nil || len(st.Nodes) != 1 {
		t.Fatalf("the cluster changed: %v %v", st, err)
	}
}
