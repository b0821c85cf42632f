package client

import (
	"context"
	"errors"

	"google.golang.org/grpc/connectivity"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	pb "github.com/floodgate/floodgate/proto/floodgate/v1"
)

// probe asks the node at addr whether it answers at all (its gRPC health
// check): the coalescer's test of a stalled lane.
func (c *Client) probe(ctx context.Context, addr string) error {
	_, err := healthpb.NewHealthClient(c.conn(addr)).Check(ctx, &healthpb.HealthCheckRequest{})
	return err
}

// coalesced sends req to the node at addr through the coalescer. When
// that node's lane is stalled (errStalled: not sent), the check goes
// through the other nodes in turn, which forward it to its group's leader;
// when every lane is stalled, to addr in a call of its own, as it would
// without the stall watch.
func (c *Client) coalesced(ctx context.Context, addr string, req *pb.AllowRequest) (*pb.AllowResponse, error) {
	tried := []string{addr}
	for at := addr; ; {
		resp, err := c.co.allow(ctx, at, req)
		if !errors.Is(err, errStalled) {
			return resp, err
		}
		if at = c.otherAddr(tried); at == "" {
			return c.allowOn(ctx, addr, req)
		}
		tried = append(tried, at)
	}
}

// passOver reports whether checks should not be sent to the node at addr
// now: its connection is failing (the node is down), or it has answered
// none of this client's calls for a while (a stalled lane: paused, cut
// off). Another node forwards them to their group's leader instead.
func (c *Client) passOver(addr string) bool {
	return (c.co != nil && c.co.isStalled(addr)) || c.conn(addr).GetState() == connectivity.TransientFailure
}
