package main

import (
	"fmt"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	pb "github.com/floodgate/floodgate/proto/floodgate/v1"
)

func statusCmd(g *globals) *cobra.Command {
	var shards bool
	cmd := &cobra.Command{
		Use:   "status",
		Short: "Show the nodes, their health, and every shard's replicas and leader",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			conn, err := g.dial()
			if err != nil {
				return err
			}
			defer conn.Close()
			ctx, cancel := g.ctx()
			defer cancel()
			st, err := admin(conn).Status(ctx, &pb.StatusRequest{})
			if err != nil {
				return err
			}
			if g.json {
				return g.printJSON(st)
			}
			return printStatus(g, st, shards)
		},
	}
	cmd.Flags().BoolVar(&shards, "shards", true, "list every shard")
	return cmd
}

// replicasEach says how many replicas a group is placed on: the cluster's
// replication factor, or as many as there are active nodes when they are
// fewer (cluster.placementOf), with the factor the cluster will grow back
// to, so that two active nodes never read as three copies.
func replicasEach(st *pb.StatusResponse) string {
	active := 0
	for _, n := range st.Nodes {
		if n.State == "active" {
			active++
		}
	}
	if active >= int(st.Replicas) {
		return fmt.Sprintf("%d replicas each", st.Replicas)
	}
	return fmt.Sprintf("%d of %d replicas each (%d active %s)", active, st.Replicas, active, plural(active, "node", "nodes"))
}

func printStatus(g *globals, st *pb.StatusResponse, shards bool) error {
	unit := "shards"
	if st.Slots > 0 {
		unit = "groups"
		groups := "groups"
		if len(st.ShardStatus) == 1 {
			groups = "group"
		}
		fmt.Fprintf(g.out, "cluster %s: %d slots over %d %s, %s; %s; answered by %s; meta leader %s\n\n",
			st.ClusterId, st.Slots, len(st.ShardStatus), groups, replicasEach(st), rebalancing(st), st.NodeId, orNone(st.MetaLeader))
	} else {
		fmt.Fprintf(g.out, "cluster %s: %d shards, %s; answered by %s; meta leader %s\n\n",
			st.ClusterId, st.Shards, replicasEach(st), st.NodeId, orNone(st.MetaLeader))
	}
	tw := tabwriter.NewWriter(g.out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NODE\tSTATE\tHEALTH\tGRPC\tRAFT\tREGION\tMETA\tREPLICAS\tLEADS\tVERSION")
	for _, n := range st.Nodes {
		meta := "follower"
		if n.MetaVoter {
			meta = "voter"
		}
		if n.Id == st.MetaLeader {
			meta = "leader"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%d\t%d\t%s\n", n.Id, n.State, n.Health, n.GrpcAddr, n.RaftAddr,
			orNone(n.Region), meta, n.Replicas, n.Leaders, orNone(n.Version))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	leaderless := 0
	for _, s := range st.ShardStatus {
		if s.Leader == "" {
			leaderless++
		}
	}
	fmt.Fprintf(g.out, "\n%d of %d %s have a leader\n", len(st.ShardStatus)-leaderless, len(st.ShardStatus), unit)
	if !shards {
		return nil
	}
	fmt.Fprintln(g.out)
	tw = tabwriter.NewWriter(g.out, 0, 4, 2, ' ', 0)
	if st.Slots > 0 {
		fmt.Fprintln(tw, "GROUP\tSLOTS\tHOME\tLEADER\tTERM\tREPLICAS\tPLACEMENT")
	} else {
		fmt.Fprintln(tw, "SHARD\tLEADER\tTERM\tREPLICAS\tPLACEMENT")
	}
	for _, s := range st.ShardStatus {
		var reps []string
		for _, r := range s.Replicas {
			name := r.NodeId
			if r.Suffrage != "voter" {
				name += "(" + r.Suffrage + ")"
			}
			reps = append(reps, name)
		}
		if st.Slots > 0 {
			home := s.Home
			if s.Retiring {
				home += " (retiring)"
			}
			fmt.Fprintf(tw, "%d\t%d\t%s\t%s\t%d\t%s\t%s\n", s.Id, s.Slots, orNone(home), orNone(s.Leader), s.Term,
				strings.Join(reps, ","), strings.Join(s.Desired, ","))
			continue
		}
		fmt.Fprintf(tw, "%d\t%s\t%d\t%s\t%s\n", s.Id, orNone(s.Leader), s.Term, strings.Join(reps, ","), strings.Join(s.Desired, ","))
	}
	return tw.Flush()
}

// rebalancing says "balanced", or what a cluster of slots has still to do
// before it is: slot moves in flight, slots still to move, an active node
// that is home to no group yet (the meta leader adds one a few seconds
// after a join, and only then plans moves to it), a group being drained.
func rebalancing(st *pb.StatusResponse) string {
	homes := map[string]bool{}
	draining := 0
	for _, s := range st.ShardStatus {
		homes[s.Home] = true
		if s.Retiring {
			draining++
		}
	}
	waiting := 0
	for _, n := range st.Nodes {
		if n.State == "active" && !homes[n.Id] {
			waiting++
		}
	}
	var left []string
	for _, c := range []struct {
		n         int
		one, many string
	}{
		{int(st.Moves), "slot move in flight", "slot moves in flight"},
		{int(st.SlotsToMove), "slot still to move", "slots still to move"},
		{waiting, "node without a group yet", "nodes without a group yet"},
		{draining, "group draining", "groups draining"},
	} {
		switch {
		case c.n == 1:
			left = append(left, "1 "+c.one)
		case c.n > 1:
			left = append(left, fmt.Sprintf("%d %s", c.n, c.many))
		}
	}
	if len(left) == 0 {
		return "balanced"
	}
	return "rebalancing: " + strings.Join(left, ", ")
}

func orNone(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
