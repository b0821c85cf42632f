package rpc

import (
	"context"
	"fmt"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	peerv1 "github.com/floodgate/floodgate/proto/floodgate/peer/v1"
)

// clusterHeader carries the cluster of the node making a Peer call, as
// raftnet's handshake does for Raft: a member's address reused by a node
// of another cluster would otherwise take the member's cluster's meta
// commands, slot exports and restores, and answer its progress queries
// about a group of the same name.
const clusterHeader = "floodgate-cluster"

// peerPrefix begins the full method name of every Peer call.
var peerPrefix = "/" + peerv1.Peer_ServiceDesc.ServiceName + "/"

// crossCluster are the Peer calls made between nodes that need not be of
// one cluster: Hello asks a node which cluster it is of, JoinCluster asks
// a fresh node (of a single-node cluster of its own) to join another,
// and AddNode comes from the node joining.
var crossCluster = map[string]bool{
	peerv1.Peer_Hello_FullMethodName:       true,
	peerv1.Peer_JoinCluster_FullMethodName: true,
	peerv1.Peer_AddNode_FullMethodName:     true,
}

// nameCluster is Peers' client interceptor: every call carries the
// cluster Peers.cluster names, when it names one.
func (p *Peers) nameCluster(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn,
	invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	if f := p.cluster.Load(); f != nil {
		if id := (*f)(); id != "" {
			ctx = metadata.AppendToOutgoingContext(ctx, clusterHeader, id)
		}
	}
	return invoker(ctx, method, req, reply, cc, opts...)
}

// NameCluster makes every Peer call of p name the cluster id returns
// ("" while the node knows none).
func (p *Peers) NameCluster(id func() string) { p.cluster.Store(&id) }

// admitPeerCalls refuses a Peer call (but the crossCluster ones) from a
// node of a cluster admit refuses (cluster.Node.AdmitPeer), answering
// Unavailable, as for a node that cannot be reached: nothing was done,
// and the caller's own caller may try elsewhere.
func admitPeerCalls(admit func(cluster string) error) grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		if strings.HasPrefix(info.FullMethod, peerPrefix) && !crossCluster[info.FullMethod] {
			var theirs string
			if v := metadata.ValueFromIncomingContext(ctx, clusterHeader); len(v) > 0 {
				theirs = v[0]
			}
			if err := admit(theirs); err != nil {
				return nil, status.Error(codes.Unavailable, fmt.Sprintf("%s refused: %v", info.FullMethod, err))
			}
		}
		return handler(ctx, req)
	}
}
