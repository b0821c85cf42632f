package main

import (
	"fmt"
	"strings"
	"time"

	"github.com/floodgate/floodgate/test/e2e"
)

// idleResult is what an idle cluster costs.
type idleResult struct {
	perNode     []float64 // % of one core, per node
	total       float64   // % of one core, all nodes
	connections int       // established TCP connections to the raft ports
	elapsed     time.Duration
}

// measureIdle samples the CPU time (utime+stime from /proc/<pid>/stat) of
// every node of c over window, with no traffic, and counts the TCP
// connections on the nodes' raft ports at the end.
func measureIdle(c *e2e.Cluster, window time.Duration) (*idleResult, error) {
	pids := make([]int, len(c.Nodes))
	ports := map[int]bool{}
	for i, n := range c.Nodes {
		pid, err := pidOf(n.Dir)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", n.ID, err)
		}
		pids[i] = pid
		p, err := portOf(n.Raft)
		if err != nil {
			return nil, err
		}
		ports[p] = true
	}
	read := func() ([]int64, error) {
		out := make([]int64, len(pids))
		for i, pid := range pids {
			t, err := cpuTicks(pid)
			if err != nil {
				return nil, err
			}
			out[i] = t
		}
		return out, nil
	}
	before, err := read()
	if err != nil {
		return nil, err
	}
	t0 := time.Now()
	time.Sleep(window)
	after, err := read()
	if err != nil {
		return nil, err
	}
	res := &idleResult{elapsed: time.Since(t0)}
	for i := range pids {
		pct := 100 * float64(after[i]-before[i]) / clockTicks / res.elapsed.Seconds()
		res.perNode = append(res.perNode, pct)
		res.total += pct
	}
	if res.connections, err = raftConnections(ports); err != nil {
		return nil, err
	}
	return res, nil
}

// row is the table row of an idle measurement.
func (r *idleResult) row(nodes int) row {
	per := make([]string, len(r.perNode))
	for i, p := range r.perNode {
		per[i] = fmt.Sprintf("%.1f", p)
	}
	return row{
		workload: fmt.Sprintf("idle %d-node cluster, no traffic, %s", nodes, r.elapsed.Round(time.Second)),
		client:   "none",
		figure: fmt.Sprintf("%.1f%% of one core (%s per node); %d TCP connections on the raft ports",
			r.total, strings.Join(per, " / "), r.connections),
		target:  fmt.Sprintf("≤ %.0f%% of one core", targetIdle),
		verdict: judge(r.total <= targetIdle),
	}
}
