package rpc

import (
	"context"
	"errors"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/floodgate/floodgate/cluster"
	"github.com/floodgate/floodgate/fsm"
	"github.com/floodgate/floodgate/policy"
	"github.com/floodgate/floodgate/wallclock"
	"github.com/floodgate/floodgate/window"
)

// RLSServer implements Envoy's rate limit service,
// envoy.service.ratelimit.v3.RateLimitService, over floodgate's policies
// (the mapping is in rlsmap.go), so Envoy, Istio and Envoy Gateway can
// point their rate limit filter at any node.
type RLSServer struct {
	rlsv3.UnimplementedRateLimitServiceServer
	s *Server
}

// NewRLSServer returns the RLS service answering through s.
func NewRLSServer(s *Server) *RLSServer { return &RLSServer{s: s} }

// ShouldRateLimit implements rlsv3.RateLimitServiceServer. Every
// descriptor is validated first (InvalidArgument names the field, nothing
// is counted); then all of them go out in one dispatch, one call per
// leader. Descriptors under one colocated policy are one atomic set: all
// admitted and counted, or none. A descriptor whose cost is more than its
// limits admit at once is OVER_LIMIT (its set's too), counting nothing. A
// descriptor whose group cannot answer fails the whole request
// (Unavailable): Envoy's failure_mode_deny then decides whether the
// request goes through. A descriptor of a new key that its group has no
// room for (--max-key-states) is OVER_LIMIT (a shadow policy's: OK, would
// deny), counting nothing.
func (r *RLSServer) ShouldRateLimit(ctx context.Context, req *rlsv3.RateLimitRequest) (*rlsv3.RateLimitResponse, error) {
	if err := rlsSize(req); err != nil {
		return nil, refuse(1, err) // no checks, one bad request: see refuse
	}
	if err := r.s.ready(); err != nil {
		return nil, refuse(len(req.GetDescriptors()), err)
	}
	checks, tooBig, err := rlsChecks(req, r.s.node.View().Policy, maxLog(r.s.cfg.MaxLogLength, r.s.node))
	if err != nil {
		return nil, refuse(len(req.GetDescriptors()), err)
	}
	peekTooBigSets(checks, tooBig)
	at, limited := atomicSets(checks)
	results := make([]policy.Result, len(checks))
	if len(limited) > 0 {
		res, errs := r.s.disp.dispatch(ctx, limited)
		for k := range limited {
			if errs[k] == nil && tooBig[at[k]] {
				res[k] = overLimit(limited[k].Policy, res[k], wallclock.Now().UnixNano())
			}
		}
		r.s.count(limited, res, errs) // a full group's refusal counts as the check error it is
		for k, err := range errs {
			switch {
			case errors.Is(err, cluster.ErrFull):
				// No room for a new key's states: an answer, limited like
				// any other, so Envoy's failure mode does not let a flood
				// of new keys through.
				p := limited[k].Policy
				results[at[k]] = overLimit(p, policy.Result{Allowed: true, Limit: p.Limits[0].Limit.Limit}, wallclock.Now().UnixNano())
			case err != nil:
				return nil, toStatus(err)
			default:
				results[at[k]] = res[k]
			}
		}
	}
	out := &rlsv3.RateLimitResponse{OverallCode: rlsv3.RateLimitResponse_OK}
	var wouldDeny []any
	for i, c := range checks {
		st := rlsStatus(c, results[i])
		if st.Code == rlsv3.RateLimitResponse_OVER_LIMIT {
			out.OverallCode = rlsv3.RateLimitResponse_OVER_LIMIT
		}
		if results[i].WouldDeny {
			wouldDeny = append(wouldDeny, float64(i))
		}
		out.Statuses = append(out.Statuses, st)
	}
	if len(wouldDeny) > 0 {
		// Shadow mode: admitted, but say which descriptors enforcing would
		// have denied, for Envoy's access logs and filters.
		md, err := structpb.NewStruct(map[string]any{"floodgate.would_deny": true, "floodgate.would_deny_descriptors": wouldDeny})
		if err == nil {
			out.DynamicMetadata = md
		}
	}
	return out, nil
}

// peekTooBigSets spreads tooBig over atomic sets: every check of a
// colocated policy with a check too big for its limits is too big, so
// that the set counts nothing. The checks of a colocated policy share its
// pointer (an override makes a copy of its own, in no set).
func peekTooBigSets(checks []fsm.Check, tooBig []bool) {
	for i, c := range checks {
		if !tooBig[i] || c.Policy == nil || !c.Policy.Colocate {
			continue
		}
		for j := range checks {
			if checks[j].Policy == c.Policy {
				tooBig[j], checks[j].Cost = true, 0
			}
		}
	}
}

// overLimit turns the answer to a peek into the answer to a cost more than
// p admits at once, or to a check a full key store refused: denied, or in
// shadow mode admitted and would-deny. A peek of a key with no state says
// nothing about when to come back (ResetAfter 0), which Envoy sends as
// X-RateLimit-Reset: 0, and a client retried at once, for ever (a cost
// that never fits): the denial says p's longest window instead, by when
// every count it keeps has turned over (a calendar limit's: the end of
// its period after now, the node's clock, Unix ns).
func overLimit(p *policy.Policy, r policy.Result, now int64) policy.Result {
	if p.Mode == policy.Shadow {
		r.WouldDeny = true
		return r
	}
	r.Allowed = false
	if r.ResetAfter <= 0 {
		for _, l := range p.Limits {
			span := l.Limit.Window
			if l.Limit.Calendar != window.CalendarNone {
				span = window.PeriodEnd(l.Limit.Calendar, now) - now
			}
			r.ResetAfter = max(r.ResetAfter, span)
		}
	}
	return r
}

// atomicSets lists the checks that are limited (a policy), with where each
// came from, so that the checks of each colocated policy (the same policy,
// not an override's copy) follow each other as one atomic set.
func atomicSets(checks []fsm.Check) (at []int, limited []fsm.Check) {
	done := make([]bool, len(checks))
	for i, c := range checks {
		if c.Policy == nil || done[i] {
			continue
		}
		at, limited = append(at, i), append(limited, c)
		if !c.Policy.Colocate {
			continue
		}
		for j := i + 1; j < len(checks); j++ {
			if checks[j].Policy == c.Policy {
				done[j] = true
				d := checks[j]
				d.Joined = true
				at, limited = append(at, j), append(limited, d)
			}
		}
	}
	return at, limited
}
