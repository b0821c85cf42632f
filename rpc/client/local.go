package client

import (
	"context"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/floodgate/floodgate/policy"
	pb "github.com/floodgate/floodgate/proto/floodgate/v1"
	"github.com/floodgate/floodgate/rpc/validate"
	"github.com/floodgate/floodgate/window"
)

// Local is an in-process Limiter for one policy: the cluster's algorithms
// and policy rules, counted in this process's memory on its clock. Tests
// swap it in for a Policy handle; nothing is replicated or shared. An
// elastic policy uses its limits as written (Local knows no cluster rate).
type Local struct {
	p   *policy.Policy
	now func() time.Time

	mu   sync.Mutex
	keys map[string][]*window.State
}

var _ Limiter = (*Local)(nil)

// NewLocal validates p as the cluster would and returns its limiter.
func NewLocal(p *pb.Policy) (*Local, error) {
	pol, err := validate.Policy(p, "", 0)
	if err != nil {
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	return &Local{p: pol, now: time.Now, keys: map[string][]*window.State{}}, nil
}

// Allow implements Limiter.
func (l *Local) Allow(ctx context.Context, d D) (Decision, error) { return l.AllowN(ctx, d, 1) }

// AllowN implements Limiter.
func (l *Local) AllowN(_ context.Context, d D, n int64) (Decision, error) {
	var key string
	var err error
	if k, ok := d["key"]; ok && len(d) == 1 && len(l.p.KeyBy) == 0 {
		key, err = validate.Key(k, nil, l.p, "")
	} else {
		key, err = validate.Key("", d, l.p, "")
	}
	if err == nil {
		if cerr := l.p.ValidateCost(n); cerr != nil {
			err = validate.AtField("", cerr) // names the cost
		}
	}
	if err != nil { // as the cluster answers a bad request
		return Decision{}, status.Error(codes.InvalidArgument, err.Error())
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	states, ok := l.keys[key]
	if !ok {
		states = make([]*window.State, l.p.States())
		for i := range states {
			states[i] = &window.State{}
		}
		l.keys[key] = states
	}
	r := l.p.Evaluate(states, l.now().UnixNano(), n, false)
	return Decision{
		Allowed: r.Allowed, Limit: r.Limit, Remaining: r.Remaining,
		RetryAfter: time.Duration(r.RetryAfter), ResetAfter: time.Duration(r.ResetAfter),
		Window: time.Duration(l.p.WindowOf(r)), DecidedBy: l.p.DecidedBy(r), Key: policy.DisplayKey(key), WouldDeny: r.WouldDeny,
	}, nil
}

// Wait implements Limiter.
func (l *Local) Wait(ctx context.Context, d D) error { return l.WaitN(ctx, d, 1) }

// WaitN implements Limiter.
func (l *Local) WaitN(ctx context.Context, d D, n int64) error {
	return waitN(ctx, func() (Decision, error) { return l.AllowN(ctx, d, n) })
}
