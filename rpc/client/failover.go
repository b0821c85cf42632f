package client

import (
	"context"
	"slices"

	"google.golang.org/grpc"
	"google.golang.org/grpc/peer"

	pb "github.com/floodgate/floodgate/proto/floodgate/v1"
	"github.com/floodgate/floodgate/rpc/sent"
)

// onNodes makes call on the node at addr and, when that call never left
// the client (the node is down: no connection could be made), on the
// other nodes in turn, each at most once. Such a call reached no node, so
// nothing was counted and sending it elsewhere cannot count it twice;
// without this, every check routed to a node in the moments after it
// died failed (or, under FailOpen, was admitted unasked) although the
// rest of the cluster could answer it. A call that reached a node and
// then failed is never sent again: its outcome is unknown.
func onNodes[T any](ctx context.Context, c *Client, addr string,
	call func(pb.RateLimiterClient, ...grpc.CallOption) (T, error)) (T, error) {
	tried := []string{addr}
	for {
		var p peer.Peer
		resp, err := call(pb.NewRateLimiterClient(c.conn(addr)), grpc.Peer(&p))
		if !sent.Never(err, &p) || ctx.Err() != nil {
			return resp, err
		}
		c.kick() // the routes named a node that is gone
		if addr = c.otherAddr(tried); addr == "" {
			return resp, err
		}
		tried = append(tried, addr)
	}
}

// otherAddr picks a node not in tried, round-robin, preferring one not
// known to be down or stalled (passOver); "" when every node was tried.
func (c *Client) otherAddr(tried []string) string {
	c.mu.RLock()
	nodes := c.nodes
	c.mu.RUnlock()
	start := int(c.rr.Add(1))
	fallback := ""
	for i := range nodes {
		addr := nodes[(start+i)%len(nodes)]
		if slices.Contains(tried, addr) {
			continue
		}
		if !c.passOver(addr) {
			return addr
		}
		if fallback == "" {
			fallback = addr
		}
	}
	return fallback
}
