package main

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/spf13/cobra"

	pb "github.com/floodgate/floodgate/proto/floodgate/v1"
)

func joinCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "join NODE_ADDR",
		Short: "Add the fresh node at NODE_ADDR (its gRPC address) to the cluster of --addr",
		Long: "Add a node to the cluster. The node at NODE_ADDR must be fresh: started without\n" +
			"--join and never joined by another node. Its own single-node cluster is discarded.\n" +
			"Joining a member again changes nothing, and says so.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			conn, err := g.dial()
			if err != nil {
				return err
			}
			defer conn.Close()
			ctx, cancel := context.WithTimeout(context.Background(), max(g.timeout, 60*time.Second))
			defer cancel()
			// The members before: a join of a member changes nothing and
			// succeeds (a retried join does), which is said, not hidden.
			before, _ := admin(conn).Status(ctx, &pb.StatusRequest{})
			resp, err := admin(conn).Join(ctx, &pb.JoinRequest{NodeAddr: args[0]})
			if err != nil {
				return err
			}
			if g.json {
				return g.printJSON(resp)
			}
			for _, n := range before.GetNodes() {
				if n.Id == resp.NodeId {
					fmt.Fprintf(g.out, "node %s was a member of cluster %s already: nothing changed\n", resp.NodeId, resp.ClusterId)
					return nil
				}
			}
			fmt.Fprintf(g.out, "node %s joined cluster %s\n", resp.NodeId, resp.ClusterId)
			return nil
		},
	}
}

func leaveCmd(g *globals) *cobra.Command {
	var wait time.Duration
	cmd := &cobra.Command{
		Use:   "leave [NODE_ID]",
		Short: "Drain a node (the one at --addr by default): move its replicas and leaderships away, then remove it",
		Args:  cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 1 && args[0] == "" {
				// `leave "$NODE"` with NODE unset must not drain the node
				// at --addr, which is what no argument means.
				return fmt.Errorf("NODE_ID: empty; leave it out to drain the node at --addr")
			}
			if wait < 0 {
				// Refused before the drain starts: taken for 0, a typo
				// would drain the node and not wait.
				return fmt.Errorf("--wait: must be 0 (do not wait) or more, got %s", wait)
			}
			conn, err := g.dial()
			if err != nil {
				return err
			}
			defer conn.Close()
			req := &pb.LeaveRequest{}
			if len(args) == 1 {
				req.NodeId = args[0]
			}
			ctx, cancel := g.ctx()
			resp, err := admin(conn).Leave(ctx, req)
			cancel()
			if err != nil {
				return err
			}
			if wait > 0 {
				if err := waitGone(g, resp.NodeId, wait); err != nil {
					return err
				}
			}
			if g.json {
				return g.printJSON(resp)
			}
			if wait > 0 {
				fmt.Fprintf(g.out, "node %s drained and removed\n", resp.NodeId)
			} else {
				fmt.Fprintf(g.out, "node %s is draining\n", resp.NodeId)
			}
			return nil
		},
	}
	cmd.Flags().DurationVar(&wait, "wait", 2*time.Minute, "wait this long for the node to be drained and removed (0: do not wait)")
	return cmd
}

// waitGone polls status until node id is no longer a member. It asks the
// other members too once it knows them: the leaving node shuts itself
// down.
func waitGone(g *globals, id string, wait time.Duration) error {
	deadline := time.Now().Add(wait)
	addrs := []string{g.addr}
	last, lastReplicas := "", int32(-1)
	for {
		for _, a := range addrs {
			st, err := statusAt(g, a)
			if err != nil {
				last = err.Error()
				continue
			}
			var others []string
			member := false
			for _, n := range st.Nodes {
				if n.Id == id {
					member = true
					if n.Replicas != lastReplicas && !g.json {
						fmt.Fprintf(g.out, "node %s: %s, %d replicas left\n", id, n.State, n.Replicas)
						lastReplicas = n.Replicas
					}
				} else {
					others = append(others, n.GrpcAddr)
				}
			}
			if !member {
				return nil
			}
			addrs = pollOrder(g.addr, others)
			last = "still a member"
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("node %s not removed within %s (%s)", id, wait, last)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// pollOrder is the addresses waitGone asks, each once: the operator's
// first (a port-forward reaches what the members' own addresses, names
// inside the cluster, may not), then the other members'.
func pollOrder(first string, others []string) []string {
	out := []string{first}
	for _, a := range others {
		if !slices.Contains(out, a) {
			out = append(out, a)
		}
	}
	return out
}

// statusAt asks the node at addr for the cluster status.
func statusAt(g *globals, addr string) (*pb.StatusResponse, error) {
	conn, err := g.dialAt(addr) // TLS and token as for --addr: the other members are secured alike
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	ctx, cancel := g.ctx()
	defer cancel()
	return admin(conn).Status(ctx, &pb.StatusRequest{})
}
