package client

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/floodgate/floodgate/policy"
	pb "github.com/floodgate/floodgate/proto/floodgate/v1"
	"github.com/floodgate/floodgate/rpc/validate"
)

// Limiter is a named policy's limiter, shaped like golang.org/x/time/rate's
// (Allow, AllowN, Wait, WaitN) but per key: what a Policy handle offers,
// and what Local offers in-process, so code written against it can be
// tested without a cluster.
type Limiter interface {
	// Allow checks and counts one request of the key d makes.
	Allow(ctx context.Context, d D) (Decision, error)
	// AllowN checks and counts a request of cost n (0 peeks).
	AllowN(ctx context.Context, d D, n int64) (Decision, error)
	// Wait blocks until one request of d is admitted, or ctx ends.
	Wait(ctx context.Context, d D) error
	// WaitN blocks until a request of cost n is admitted, or ctx ends;
	// a denial whose RetryAfter is past ctx's deadline fails it at once.
	WaitN(ctx context.Context, d D, n int64) error
}

// Policy is a handle on a named policy of the cluster.
type Policy struct {
	c    *Client
	name string
}

var _ Limiter = (*Policy)(nil)

// Policy returns a handle on the named policy; nothing is checked until
// it is used (an unknown name then fails with InvalidArgument).
func (c *Client) Policy(name string) *Policy { return &Policy{c: c, name: name} }

// Allow implements Limiter.
func (p *Policy) Allow(ctx context.Context, d D) (Decision, error) { return p.AllowN(ctx, d, 1) }

// AllowN implements Limiter. Descriptors {"key": k} alone, for a policy
// without key_by, count under the key k itself; a policy whose key_by
// names "key" builds its key from them, as Local does.
func (p *Policy) AllowN(ctx context.Context, d D, n int64) (Decision, error) {
	req := &pb.AllowRequest{Policy: p.name, Cost: &n}
	known, keyedBy := p.keyedBy()
	k, plain := d["key"]
	if plain = plain && len(d) == 1 && !keyedBy; plain {
		req.Key = k
	} else {
		req.Descriptors = d
	}
	dec, err := p.c.decide(ctx, req)
	var sent sentRefusal
	if plain && !known && keyedByRefusal(err) && !errors.As(err, &sent) && p.learn(ctx) {
		// A policy created since the client's last refresh, which keys
		// by a descriptor named "key": the node refused k as a plain
		// key, and a refusal counted nothing, so asking again with the
		// descriptors cannot count twice. (A refusal by the client's
		// own copy, learned meanwhile, of a check whose answer was lost
		// is no such proof: sentRefusal.)
		req.Key, req.Descriptors = "", d
		return p.c.decide(ctx, req)
	}
	return dec, err
}

// keyedBy reports whether the client knows the policy, and whether, as it
// knows it, the policy builds its keys from descriptors (key_by).
func (p *Policy) keyedBy() (known, keyedBy bool) {
	p.c.mu.RLock()
	pol := p.c.policies[p.name]
	p.c.mu.RUnlock()
	return pol != nil, pol != nil && len(pol.KeyBy) > 0
}

// keyedByRefusal reports whether err is a node refusing a plain key for a
// policy with key_by: any other refusal (an unknown policy, a typo) needs
// no question about the policy, which would cost every such check a
// second call.
func keyedByRefusal(err error) bool {
	st := status.Convert(err)
	return st.Code() == codes.InvalidArgument && strings.Contains(st.Message(), validate.KeyedByDescriptors)
}

// learn asks a node for the policy and keeps it; it reports whether the
// policy keys by descriptors. It waits no longer than a call may.
func (p *Policy) learn(ctx context.Context) bool {
	addr := p.c.otherAddr(nil)
	if addr == "" {
		return false
	}
	ctx, cancel := context.WithTimeout(ctx, p.c.opts.CallTimeout)
	defer cancel()
	resp, err := pb.NewAdminClient(p.c.conn(addr)).GetPolicy(ctx, &pb.GetPolicyRequest{Name: p.name})
	if err != nil {
		return false
	}
	pol, err := validate.Policy(resp, "", math.MaxInt64)
	if err != nil {
		return false
	}
	p.c.mu.Lock()
	if p.c.policies == nil {
		p.c.policies = map[string]*policy.Policy{}
	}
	p.c.policies[pol.Name] = pol
	p.c.mu.Unlock()
	return len(pol.KeyBy) > 0
}

// Wait implements Limiter.
func (p *Policy) Wait(ctx context.Context, d D) error { return p.WaitN(ctx, d, 1) }

// WaitN implements Limiter: it sleeps each denial's RetryAfter and asks
// again, until admitted or ctx ends. A denial whose RetryAfter is past
// ctx's deadline ends the wait at once, as golang.org/x/time/rate's does,
// with an error wrapping context.DeadlineExceeded.
func (p *Policy) WaitN(ctx context.Context, d D, n int64) error {
	return waitN(ctx, func() (Decision, error) { return p.AllowN(ctx, d, n) })
}

// waitN asks allow until it admits, sleeping each RetryAfter between.
func waitN(ctx context.Context, allow func() (Decision, error)) error {
	for {
		dec, err := allow()
		if err != nil {
			return err
		}
		if dec.Allowed {
			return nil
		}
		wait := max(dec.RetryAfter, time.Millisecond)
		if end, ok := ctx.Deadline(); ok && time.Until(end) < wait {
			// Sleeping until the deadline would only hold the caller for
			// a denial known now.
			return fmt.Errorf("floodgate: denied, and admitted no sooner than %v from now, past the context's deadline: %w", wait, context.DeadlineExceeded)
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
	}
}
