package rpc

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"

	"github.com/floodgate/floodgate/cluster"
	"github.com/floodgate/floodgate/fsm"
	"github.com/floodgate/floodgate/policy"
	peerv1 "github.com/floodgate/floodgate/proto/floodgate/peer/v1"
)

// PeerServer implements the node-to-node Peer service.
type PeerServer struct {
	peerv1.UnimplementedPeerServer
	node   *cluster.Node
	maxLog int64
}

// NewPeerServer returns the Peer service of node.
func NewPeerServer(node *cluster.Node, cfg Config) *PeerServer {
	return &PeerServer{node: node, maxLog: cfg.MaxLogLength}
}

// Forward implements peerv1.PeerServer: it evaluates each shard's checks
// here and never forwards again, so a check makes at most one hop.
func (p *PeerServer) Forward(ctx context.Context, req *peerv1.ForwardRequest) (*peerv1.ForwardResponse, error) {
	out := &peerv1.ForwardResponse{Results: make([]*peerv1.ForwardResult, len(req.Checks))}
	byShard := map[int][]int{}
	checks := make([]fsm.Check, len(req.Checks))
	// Checks of one shard from one sender usually share a policy: decode
	// each distinct encoding once.
	decoded := map[string]*policy.Policy{}
	for i, c := range req.Checks {
		pol, ok := decoded[string(c.Policy)]
		if !ok {
			dp, _, err := policy.Decode(c.Policy)
			if err == nil {
				// The sender validated it against its own caps; here only
				// sanity matters, as in the FSM.
				err = dp.Validate(math.MaxInt64)
			}
			if err != nil {
				return nil, toStatus(fmt.Errorf("%w: checks[%d].policy: %w", ErrInvalid, i, err))
			}
			pol = &dp
			decoded[string(c.Policy)] = pol
		}
		checks[i] = fsm.Check{Key: c.Key, Policy: pol, Cost: c.Cost}
		byShard[int(c.Shard)] = append(byShard[int(c.Shard)], i)
	}
	var wg sync.WaitGroup
	for shard, idx := range byShard {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sub := make([]fsm.Check, len(idx))
			for j, i := range idx {
				sub[j] = checks[i]
			}
			res, err := p.node.Submit(ctx, shard, sub)
			for j, i := range idx {
				out.Results[i] = forwardResult(res, j, err)
			}
		}()
	}
	wg.Wait()
	return out, nil
}

// forwardResult encodes the j-th result of a shard, or the shard's error:
// NOT_LEADER when nothing was written, UNAVAILABLE when the outcome is
// unknown.
func forwardResult(res []policy.Result, j int, err error) *peerv1.ForwardResult {
	var nl *cluster.NotLeaderError
	switch {
	case err == nil:
		return &peerv1.ForwardResult{Decision: decisionToProto(res[j])}
	case errors.Is(err, cluster.ErrUnavailable):
		return &peerv1.ForwardResult{Code: peerv1.ForwardResult_UNAVAILABLE, Message: err.Error()}
	case errors.As(err, &nl):
		return &peerv1.ForwardResult{Code: peerv1.ForwardResult_NOT_LEADER, LeaderId: nl.LeaderID, LeaderAddr: nl.LeaderAddr, Message: err.Error()}
	case errors.Is(err, cluster.ErrNoLeader):
		return &peerv1.ForwardResult{Code: peerv1.ForwardResult_NOT_LEADER, Message: err.Error()}
	}
	return &peerv1.ForwardResult{Code: peerv1.ForwardResult_UNAVAILABLE, Message: err.Error()}
}

// ApplyMeta implements peerv1.PeerServer.
func (p *PeerServer) ApplyMeta(ctx context.Context, req *peerv1.ApplyMetaRequest) (*peerv1.ApplyMetaResponse, error) {
	if err := p.node.ApplyLocalMeta(req.Command); err != nil {
		return nil, toStatus(err)
	}
	return &peerv1.ApplyMetaResponse{}, nil
}

// ShardProgress implements peerv1.PeerServer.
func (p *PeerServer) ShardProgress(ctx context.Context, req *peerv1.ShardProgressRequest) (*peerv1.ShardProgressResponse, error) {
	group := int(req.Shard)
	if req.Meta {
		group = -1
	}
	info := p.node.Progress(group)
	return &peerv1.ShardProgressResponse{Present: info.Present, AppliedIndex: info.Applied, LastIndex: info.Last,
		Leader: info.Leader, Servers: info.Servers}, nil
}

// Hello implements peerv1.PeerServer.
func (p *PeerServer) Hello(ctx context.Context, req *peerv1.HelloRequest) (*peerv1.HelloResponse, error) {
	v := p.node.View()
	self := v.Node(p.node.ID())
	if self == nil {
		c := p.node.Config()
		self = nodeFromConfig(c)
	}
	return &peerv1.HelloResponse{Node: self, ClusterId: v.ClusterID, Fresh: p.node.Fresh()}, nil
}

// JoinCluster implements peerv1.PeerServer.
func (p *PeerServer) JoinCluster(ctx context.Context, req *peerv1.JoinClusterRequest) (*peerv1.JoinClusterResponse, error) {
	if len(req.Addrs) == 0 {
		return nil, toStatus(fmt.Errorf("%w: addrs: at least one cluster address is required", ErrInvalid))
	}
	cid, err := p.node.JoinCluster(ctx, req.Addrs)
	if err != nil {
		return nil, toStatus(err)
	}
	return &peerv1.JoinClusterResponse{ClusterId: cid}, nil
}

// AddNode implements peerv1.PeerServer.
func (p *PeerServer) AddNode(ctx context.Context, req *peerv1.AddNodeRequest) (*peerv1.AddNodeResponse, error) {
	cid, gossip, err := p.node.AddNode(ctx, req.Node)
	if err != nil {
		return nil, toStatus(err)
	}
	return &peerv1.AddNodeResponse{ClusterId: cid, GossipAddrs: gossip}, nil
}

// ResetKey implements peerv1.PeerServer: the receiver must lead the shard.
func (p *PeerServer) ResetKey(ctx context.Context, req *peerv1.PeerResetRequest) (*peerv1.PeerResetResponse, error) {
	pol, _, err := policy.Decode(req.Policy)
	if err == nil {
		err = pol.Validate(math.MaxInt64)
	}
	if err != nil {
		return nil, toStatus(fmt.Errorf("%w: policy: %w", ErrInvalid, err))
	}
	n, err := p.node.ResetKey(ctx, int(req.Shard), req.Key, &pol)
	if err != nil {
		return nil, toStatus(err)
	}
	return &peerv1.PeerResetResponse{States: int32(n)}, nil
}
