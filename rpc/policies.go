package rpc

import (
	"context"
	"fmt"
	"maps"
	"slices"

	"github.com/floodgate/floodgate/fsm"
	"github.com/floodgate/floodgate/policy"
	pb "github.com/floodgate/floodgate/proto/floodgate/v1"
	"github.com/floodgate/floodgate/rpc/validate"
)

// SetPolicies implements pb.AdminServer: every policy is validated before
// any is stored, and they are stored together.
func (a *AdminServer) SetPolicies(ctx context.Context, req *pb.SetPoliciesRequest) (*pb.SetPoliciesResponse, error) {
	ps, err := validate.Policies(req.Policies, maxLog(a.cfg.MaxLogLength, a.node))
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
	ps, err := validate.Policies(req.Policies, maxLog(a.cfg.MaxLogLength, a.node))
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
