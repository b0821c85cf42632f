package client

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/floodgate/floodgate/policy"
	pb "github.com/floodgate/floodgate/proto/floodgate/v1"
	"github.com/floodgate/floodgate/rpc/validate"
)

// loadRoutes asks the nodes for the cluster status and installs the shard
// count, the shard leaders and the node list of the first that answers.
// It asks one node at a time, the next when one fails or has not answered
// within statusHedge (the ones asked before may still answer): a node
// that takes the call but does not answer (paused, cut off: its
// connection stays up) would otherwise spend the whole refresh, every
// time, and the routes would go on naming it as a leader long after its
// groups failed over, while a node that is merely slow is still heard.
// The addresses the client was given are asked after the nodes it
// learned: when every node it learned has gone (the whole cluster
// restarted at new addresses), a seed that follows the cluster (a DNS
// name, a load balancer) still finds it. Nodes whose lanes are stalled
// (stall.go) are asked last of all.
func (c *Client) loadRoutes(ctx context.Context) error {
	c.mu.RLock()
	nodes := append([]string(nil), c.nodes...)
	c.mu.RUnlock()
	for _, addr := range c.opts.Addrs {
		if !slices.Contains(nodes, addr) {
			nodes = append(nodes, addr)
		}
	}
	// From a node picked at random, so that clients spread their
	// questions rather than all ask the first node they were given.
	if len(nodes) > 1 {
		k := rand.IntN(len(nodes))
		nodes = slices.Concat(nodes[k:], nodes[:k])
	}
	if c.co != nil {
		// A node that has stopped answering checks is asked last: its
		// routes are the ones to replace.
		if stalled := c.co.stalledAddrs(); stalled != nil {
			var well, late []string
			for _, addr := range nodes {
				if stalled[addr] {
					late = append(late, addr)
				} else {
					well = append(well, addr)
				}
			}
			nodes = append(well, late...)
		}
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel() // the calls still out
	type answer struct {
		v   *view
		err error
	}
	answers := make(chan answer, len(nodes)) // never blocks a late answer
	asked := 0
	ask := func() {
		addr := nodes[asked]
		asked++
		go func() {
			v, err := c.fetch(ctx, addr)
			answers <- answer{v, err}
		}()
	}
	ask()
	hedge := time.NewTimer(statusHedge)
	defer hedge.Stop()
	var last error
	for out := 1; out > 0; {
		select {
		case a := <-answers:
			out--
			if a.err == nil {
				c.install(a.v)
				return nil
			}
			last = a.err
		case <-hedge.C:
		}
		if asked < len(nodes) {
			ask()
			out++
			hedge.Reset(statusHedge)
		}
	}
	return fmt.Errorf("%w: %w", ErrNoNodes, last)
}

// statusHedge is how long a refresh waits for a node's answer before it
// asks the next node too: a node answers its status in milliseconds.
const statusHedge = 500 * time.Millisecond

// view is what one node told of the cluster.
type view struct {
	shards   int
	leaders  map[int]string
	table    []uint32
	nodes    []string
	policies map[string]*policy.Policy // nil: the list failed
}

// fetch asks the node at addr for its view of the cluster.
func (c *Client) fetch(ctx context.Context, addr string) (*view, error) {
	st, err := pb.NewAdminClient(c.conn(addr)).Status(ctx, &pb.StatusRequest{})
	if err != nil {
		return nil, err
	}
	if st.Shards == 0 {
		// Unavailable: a node that cannot answer yet (FailOpen admits).
		return nil, status.Errorf(codes.Unavailable, "%s is not a cluster member yet", addr)
	}
	v := &view{shards: int(st.Shards), leaders: make(map[int]string, len(st.ShardStatus)), table: slotTable(st)}
	addrOf := map[string]string{}
	for _, n := range st.Nodes {
		if n.GetGrpcAddr() == "" {
			continue // nowhere to send a check
		}
		addrOf[n.Id] = n.GrpcAddr
		v.nodes = append(v.nodes, n.GrpcAddr)
	}
	if len(v.nodes) == 0 {
		// A broken answer: installed, it would leave the client no node
		// to send a check to.
		return nil, fmt.Errorf("%s lists no nodes with a gRPC address", addr)
	}
	for _, s := range st.ShardStatus {
		v.leaders[int(s.Id)] = addrOf[s.Leader]
	}
	if list, err := pb.NewAdminClient(c.conn(addr)).ListPolicies(ctx, &pb.ListPoliciesRequest{}); err == nil {
		v.policies = map[string]*policy.Policy{}
		for _, pp := range list.Policies {
			if p, err := validate.Policy(pp, "", math.MaxInt64); err == nil {
				v.policies[p.Name] = p
			}
		}
	}
	return v, nil
}

// install makes v the client's routes and policies, and lets go of the
// connections of nodes no longer listed.
func (c *Client) install(v *view) {
	c.mu.Lock()
	c.shards, c.leaders, c.table, c.nodes = v.shards, v.leaders, v.table, v.nodes
	if v.policies != nil || c.policies == nil {
		// A list that failed does not forget what the client knew:
		// with no copy, requests go unchecked to the nodes, and a
		// FailOpen client would admit bad ones when none answers.
		c.policies = v.policies
	}
	drop := c.unlisted(time.Now())
	kept := make(map[string]bool, len(c.conns))
	for addr := range c.conns {
		kept[addr] = true
	}
	c.mu.Unlock()
	for _, cc := range drop {
		cc.Close()
	}
	if c.co != nil {
		c.co.keepOnly(kept)
	}
}

// unlisted takes out of c.conns, and returns, the connections to
// addresses that neither the cluster's node list nor Options.Addrs has
// named for a CallTimeout: a node that left, or restarted at another
// address. Kept, each would go on dialling an address nobody serves, one
// more for every such address in the client's life. The wait lets the calls
// routed to it before the list changed end as they would have (closing
// their connection would fail them as Canceled, which FailOpen does not
// admit). The caller holds c.mu.
func (c *Client) unlisted(now time.Time) []*grpc.ClientConn {
	var drop []*grpc.ClientConn
	if c.gone == nil {
		c.gone = map[string]time.Time{}
	}
	for addr, cc := range c.conns {
		if slices.Contains(c.nodes, addr) || slices.Contains(c.opts.Addrs, addr) {
			delete(c.gone, addr)
			continue
		}
		since, ok := c.gone[addr]
		if !ok {
			c.gone[addr] = now
			continue
		}
		if now.Sub(since) >= c.opts.CallTimeout {
			drop = append(drop, cc)
			delete(c.conns, addr)
			delete(c.gone, addr)
		}
	}
	return drop
}

func (c *Client) kick() {
	select {
	case c.refresh <- struct{}{}:
	default:
	}
}

// refresher reloads the routes every RefreshInterval and when kicked,
// until Close; its calls end with life.
func (c *Client) refresher(life context.Context) {
	defer close(c.done)
	t := time.NewTicker(c.opts.RefreshInterval)
	defer t.Stop()
	for {
		select {
		case <-c.stop:
			return
		case <-t.C:
		case <-c.refresh:
		}
		ctx, cancel := context.WithTimeout(life, 5*time.Second)
		_ = c.loadRoutes(ctx)
		cancel()
		// Kicks that came meanwhile wait: every check failing on a
		// degraded cluster kicks, and refreshing back to back asked a
		// node thousands of times a second, from every client, when it
		// could least afford it.
		select {
		case <-c.stop:
			return
		case <-time.After(minRefreshGap):
		}
	}
}

// minRefreshGap is the least time between two refreshes of the routes.
const minRefreshGap = 100 * time.Millisecond

func (c *Client) closeConns() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for addr, cc := range c.conns {
		cc.Close()
		delete(c.conns, addr)
	}
}

// maxSlots is the most slots a cluster has (cluster.MaxSlots; the SDK
// does not import the cluster). A status claiming more is broken, and
// expanding it would cost the client memory and time (8 GB for 2^31
// slots) at every refresh.
const maxSlots = 1 << 16

// slotTable expands a cluster of slots' table (runs) to slot → group; nil
// for a legacy cluster or a table that does not cover every slot (then
// every check goes to any node, which routes it).
func slotTable(st *pb.StatusResponse) []uint32 {
	if st.Slots <= 0 || st.Slots != st.Shards || st.Slots > maxSlots {
		return nil
	}
	table := make([]uint32, st.Slots)
	covered := 0
	for _, r := range st.SlotTable {
		if int(r.First) != covered || r.Count <= 0 || r.First+r.Count > st.Slots || r.Group < 0 {
			return nil
		}
		for s := r.First; s < r.First+r.Count; s++ {
			table[s] = uint32(r.Group)
		}
		covered += int(r.Count)
	}
	if covered != int(st.Slots) {
		return nil
	}
	return table
}
