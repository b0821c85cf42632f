package rpc

import (
	"context"
	"fmt"
	"maps"
	"slices"

	"github.com/floodgate/floodgate/cluster"
	"github.com/floodgate/floodgate/fsm"
	"github.com/floodgate/floodgate/policy"
	peerv1 "github.com/floodgate/floodgate/proto/floodgate/peer/v1"
	pb "github.com/floodgate/floodgate/proto/floodgate/v1"
	"github.com/floodgate/floodgate/rpc/validate"
)

// SetPolicies implements pb.AdminServer: every policy is validated before
// any is stored, and they are stored together.
func (a *AdminServer) SetPolicies(ctx context.Context, req *pb.SetPoliciesRequest) (*pb.SetPoliciesResponse, error) {
	ps, err := validate.Policies(req.Policies, a.cfg.MaxLogLength)
	if err != nil {
		return nil, toStatus(err)
	}
	if err := a.node.SetPolicies(ctx, ps); err != nil {
		return nil, toStatus(err)
	}
	return &pb.SetPoliciesResponse{Names: policyNames(ps)}, nil
}

// ValidatePolicies implements pb.AdminServer: SetPolicies's checks, and
// nothing stored. The one check the meta state machine makes when it
// stores (a change of colocate) is made against this node's view of the
// policies, caught up with the meta leader's as ListPolicies does.
func (a *AdminServer) ValidatePolicies(ctx context.Context, req *pb.ValidatePoliciesRequest) (*pb.ValidatePoliciesResponse, error) {
	ps, err := validate.Policies(req.Policies, a.cfg.MaxLogLength)
	if err != nil {
		return nil, toStatus(err)
	}
	cctx, cancel := context.WithTimeout(ctx, catchUpWait)
	_ = a.node.CatchUpMeta(cctx) // best effort: see writes made through other nodes
	cancel()
	v := a.node.View()
	for i, p := range ps {
		if err := v.CheckSetPolicy(i, p); err != nil {
			return nil, toStatus(err)
		}
	}
	return &pb.ValidatePoliciesResponse{Names: policyNames(ps)}, nil
}

// policyNames are the names of ps, sorted.
func policyNames(ps []*policy.Policy) []string {
	names := make([]string, len(ps))
	for i, p := range ps {
		names[i] = p.Name
	}
	slices.Sort(names)
	return names
}

// GetPolicy implements pb.AdminServer.
func (a *AdminServer) GetPolicy(ctx context.Context, req *pb.GetPolicyRequest) (*pb.Policy, error) {
	if err := validate.PolicyName("name", req.Name); err != nil {
		return nil, toStatus(err)
	}
	p, err := resolver(ctx, a.node)(req.Name)
	if err != nil {
		return nil, toStatus(err)
	}
	if p == nil {
		return nil, toStatus(fmt.Errorf("name: %w: %q", fsm.ErrUnknownPolicy, req.Name))
	}
	return validate.PolicyToProto(p), nil
}

// ListPolicies implements pb.AdminServer.
func (a *AdminServer) ListPolicies(ctx context.Context, req *pb.ListPoliciesRequest) (*pb.ListPoliciesResponse, error) {
	cctx, cancel := context.WithTimeout(ctx, catchUpWait)
	_ = a.node.CatchUpMeta(cctx) // best effort: show writes made through other nodes
	cancel()
	v := a.node.View()
	out := &pb.ListPoliciesResponse{}
	for _, name := range slices.Sorted(maps.Keys(v.Policies)) {
		out.Policies = append(out.Policies, validate.PolicyToProto(v.Policies[name]))
	}
	return out, nil
}

// DeletePolicy implements pb.AdminServer.
func (a *AdminServer) DeletePolicy(ctx context.Context, req *pb.DeletePolicyRequest) (*pb.DeletePolicyResponse, error) {
	if err := validate.PolicyName("name", req.Name); err != nil {
		return nil, toStatus(err)
	}
	switch p, err := resolver(ctx, a.node)(req.Name); {
	case err != nil:
		return nil, toStatus(err)
	case p == nil:
		return nil, toStatus(fmt.Errorf("name: %w: %q", fsm.ErrUnknownPolicy, req.Name))
	}
	if err := a.node.DeletePolicy(ctx, req.Name); err != nil {
		return nil, toStatus(err)
	}
	return &pb.DeletePolicyResponse{}, nil
}

// ResetKey implements pb.AdminServer. A reset is idempotent, so it is
// retried until the shard's leader has applied it.
func (a *AdminServer) ResetKey(ctx context.Context, req *pb.ResetKeyRequest) (*pb.ResetKeyResponse, error) {
	zero := int64(0)
	c, err := validate.Request(&pb.AllowRequest{
		Key: req.Key, Limit: req.Limit, Policy: req.Policy, Descriptors: req.Descriptors, Cost: &zero,
	}, "", a.cfg.MaxLogLength, resolver(ctx, a.node), nil)
	if err != nil {
		return nil, toStatus(err)
	}
	shard, err := a.node.ShardOf(c.Key)
	if err != nil {
		return nil, toStatus(err)
	}
	var n int
	err = onLeader(ctx, a.node, shard, a.cfg.LeaderWait, true, func(ctx context.Context, rt cluster.Route) error {
		if rt.Local {
			var err error
			n, err = a.node.ResetKey(ctx, shard, c.Key, c.Policy)
			return err
		}
		resp, err := peerv1.NewPeerClient(a.peers.conn(rt.Addr)).ResetKey(ctx,
			&peerv1.PeerResetRequest{Shard: uint32(shard), Key: c.Key, Policy: c.Policy.AppendBinary(nil)})
		if err == nil {
			n = int(resp.States)
		}
		return peerRefusal(rt.Addr, err)
	})
	if err != nil {
		return nil, toStatus(fmt.Errorf("reset %s: %w", c.Key, err))
	}
	return &pb.ResetKeyResponse{Key: c.Key, States: int32(n)}, nil
}
