package e2e

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"time"

	"google.golang.org/grpc"

	pb "github.com/floodgate/floodgate/proto/floodgate/v1"
)

// Cluster is a set of floodgate processes.
type Cluster struct {
	Bin   Binaries
	Dir   string
	Nodes []*Node
	Args  []string          // extra flags for every node
	Dial  []grpc.DialOption // how the test connects to a node (nil: plaintext)
}

// StartCluster starts n nodes: the first creates the cluster, the others
// join it. It returns once every shard is settled (see Settled).
func StartCluster(ctx context.Context, bin Binaries, dir string, n int, args ...string) (*Cluster, error) {
	return StartSecureCluster(ctx, bin, dir, n, nil, args...)
}

// StartSecureCluster is StartCluster for nodes the test must reach with
// dial (TLS credentials, a token).
func StartSecureCluster(ctx context.Context, bin Binaries, dir string, n int, dial []grpc.DialOption, args ...string) (*Cluster, error) {
	c := &Cluster{Bin: bin, Dir: dir, Args: args, Dial: dial}
	for i := 1; i <= n; i++ {
		node, err := c.NewNode(fmt.Sprintf("n%d", i))
		if err != nil {
			c.Close()
			return nil, err
		}
		var join []string
		if i > 1 {
			join = []string{c.Nodes[0].GRPC}
		}
		if err := node.Start(join...); err != nil {
			c.Close()
			return nil, err
		}
		if err := node.WaitServing(ctx); err != nil {
			c.Close()
			return nil, err
		}
	}
	if err := c.WaitSettled(ctx); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

// NewNode prepares a node with the cluster's flags and adds it to Nodes.
func (c *Cluster) NewNode(id string) (*Node, error) {
	node, err := NewNode(c.Bin, c.Dir, id, c.Args...)
	if err != nil {
		return nil, err
	}
	if c.Dial != nil {
		if err := node.Redial(c.Dial...); err != nil {
			return nil, err
		}
	}
	c.Nodes = append(c.Nodes, node)
	return node, nil
}

// Running returns the nodes whose process is up.
func (c *Cluster) Running() []*Node {
	var out []*Node
	for _, n := range c.Nodes {
		if n.Running() {
			out = append(out, n)
		}
	}
	return out
}

// Status asks the running nodes, in turn, for the cluster status.
func (c *Cluster) Status(ctx context.Context) (*pb.StatusResponse, error) {
	var last error
	for _, n := range c.Running() {
		cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		st, err := n.Admin().Status(cctx, &pb.StatusRequest{})
		cancel()
		if err == nil {
			return st, nil
		}
		last = err
	}
	return nil, fmt.Errorf("no node answered status: %v", last)
}

// Settled reports nil when every shard has exactly its placed replicas,
// all voting, and is led by its preferred leader, and a cluster of slots
// is balanced: no move in flight and none still to start.
func Settled(st *pb.StatusResponse) error {
	if st.Slots > 0 {
		if err := slotsSettled(st); err != nil {
			return err
		}
	}
	for _, s := range st.ShardStatus {
		if len(s.Desired) == 0 || s.Leader != s.Desired[0] {
			return fmt.Errorf("shard %d led by %q, preferred %v", s.Id, s.Leader, s.Desired)
		}
		if len(s.Replicas) != len(s.Desired) {
			return fmt.Errorf("shard %d has %d replicas, placement %v", s.Id, len(s.Replicas), s.Desired)
		}
		for _, r := range s.Replicas {
			if r.Suffrage != "voter" {
				return fmt.Errorf("shard %d: %s is a %s", s.Id, r.NodeId, r.Suffrage)
			}
		}
	}
	return nil
}

// slotsSettled reports why a cluster of slots is still changing: slot
// moves in flight, a group being drained, an active node home to no group.
func slotsSettled(st *pb.StatusResponse) error {
	if st.Moves > 0 {
		return fmt.Errorf("%d slot moves in flight", st.Moves)
	}
	if st.SlotsToMove > 0 {
		return fmt.Errorf("%d slots still to move", st.SlotsToMove)
	}
	homes := map[string]bool{}
	for _, s := range st.ShardStatus {
		if s.Retiring {
			return fmt.Errorf("group %d is being drained", s.Id)
		}
		homes[s.Home] = true
	}
	for _, n := range st.Nodes {
		if n.State == "active" && !homes[n.Id] {
			return fmt.Errorf("node %s is home to no group", n.Id)
		}
	}
	return nil
}

// settledFor is how long every node's status must stay Settled before
// WaitSettled believes it: the planner starts slot moves a batch at a
// time, up to a quarter second apart, and in a CI run a test that waited
// for settling flooded groups whose slots were still moving (its nodes'
// logs showed moves until 80 ms before it failed).
const settledFor = 750 * time.Millisecond

// WaitSettled waits until the status of every running node is Settled,
// and has stayed so for settledFor.
func (c *Cluster) WaitSettled(ctx context.Context) error {
	var last error
	var since time.Time // when every node was first seen settled, in a row
	for {
		last = nil
		for _, n := range c.Running() {
			cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			st, err := n.Admin().Status(cctx, &pb.StatusRequest{})
			cancel()
			if err == nil {
				err = Settled(st)
			}
			if err != nil {
				last = fmt.Errorf("%s: %w", n.ID, err)
				break
			}
		}
		switch {
		case last != nil:
			since = time.Time{}
		case since.IsZero():
			since = time.Now()
		case time.Since(since) >= settledFor:
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("cluster not settled: %w (last: %v)", ctx.Err(), last)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// Ctl runs floodgatectl with args against the node at addr.
func (c *Cluster) Ctl(ctx context.Context, addr string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, c.Bin.Ctl, append([]string{"--addr", addr}, args...)...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		return out.String(), fmt.Errorf("floodgatectl %v: %v: %s", args, err, errb.String())
	}
	return out.String(), nil
}

// Close kills every process.
func (c *Cluster) Close() {
	for _, n := range c.Nodes {
		n.Close()
	}
}

// Logs returns the tail of every node's log, for failure reports.
func (c *Cluster) Logs(lines int) string {
	var b bytes.Buffer
	for _, n := range c.Nodes {
		fmt.Fprintf(&b, "==== %s\n%s\n", n.ID, tail(n.Log(), lines))
	}
	return b.String()
}
