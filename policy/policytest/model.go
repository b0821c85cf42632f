package policytest

import (
	"github.com/floodgate/floodgate/policy"
	"github.com/floodgate/floodgate/window"
	"github.com/floodgate/floodgate/window/windowtest"
)

// Model is the reference of one policy for one key.
type Model struct {
	p       *policy.Policy
	limits  []windowtest.Model
	reduced windowtest.Model
}

// New returns the reference of p for a fresh key.
func New(p *policy.Policy) *Model {
	m := &Model{p: p}
	for i := range p.Limits {
		m.limits = append(m.limits, windowtest.New(p.Limits[i].Limit))
	}
	if p.Reduced != nil {
		m.reduced = windowtest.New(p.Reduced.Limit)
	}
	return m
}

// Stretch is the percentage a policy's limits are read and counted at:
// 100 + SoftPercent for Soft, the ceiling for Elastic while the cluster
// has room (elastic), 100 otherwise.
func Stretch(p *policy.Policy, elastic bool) int64 {
	switch {
	case p.Mode == policy.Soft:
		return 100 + p.SoftPercent
	case p.Mode == policy.Elastic && elastic:
		return p.ElasticCeilingPercent
	}
	return 100
}

// Stretched is l at pct percent: limit and burst scaled, rounded down, at
// least 1 and at most window.MaxLimit (soft 10% of 50 is 55).
func Stretched(l window.Limit, pct int64) window.Limit {
	l.Limit = min(window.MaxLimit, max(1, l.Limit*pct/100))
	if l.Burst > 0 {
		l.Burst = min(window.MaxLimit, max(1, l.Burst*pct/100))
	}
	return l
}

// Check answers a request of cost at now, with the leader's elastic
// judgment, and counts it as the contract says:
//
//   - every limit is read stretched (Stretch); the request is admitted only
//     when every limit admits it, and then counted in every limit, with the
//     same stretch;
//   - the deciding limit is the denying one with the longest wait (the
//     first on ties), or the admitting one with the least remaining;
//   - a denied request goes to the reduced limit (never stretched) if any,
//     counted there only if admitted there;
//   - with CountDenied, a denied request is counted in every limit checked;
//   - a peek (cost 0) counts nothing;
//   - Shadow answers allowed, with WouldDeny when enforcing would deny, and
//     counts exactly what enforcing would;
//   - ResetAt is the latest time any checked limit is back to full, after
//     what was counted, and ResetAfter how long from now until the
//     deciding limit alone is.
func (m *Model) Check(now, cost int64, elastic bool) policy.Result {
	p, pct := m.p, Stretch(m.p, elastic)
	ds := make([]window.Decision, len(p.Limits))
	res := policy.Result{Allowed: true, Decider: -1}
	for i := range p.Limits {
		l := Stretched(p.Limits[i].Limit, pct)
		m.limits[i].SetLimit(l)
		ds[i] = windowtest.Check(m.limits[i], now, cost)
		res.ResetAt = max(res.ResetAt, ds[i].ResetAt)
		res.Allowed = res.Allowed && ds[i].Allowed
	}
	for i, d := range ds {
		switch {
		case res.Allowed: // all admit: the least remaining, the first on ties
			if res.Decider < 0 || d.Remaining < ds[res.Decider].Remaining {
				res.Decider = i
			}
		case !d.Allowed: // the longest wait among the denying, the first on ties
			if res.Decider < 0 || d.RetryAfter > ds[res.Decider].RetryAfter {
				res.Decider = i
			}
		}
	}
	d := ds[res.Decider]
	res.Limit = Stretched(p.Limits[res.Decider].Limit, pct).Limit
	counted := []windowtest.Model{}
	switch {
	case res.Allowed:
		res.Outcome, counted = policy.Admitted, m.limits
	case p.Reduced != nil:
		d = windowtest.Check(m.reduced, now, cost)
		res.ResetAt = max(res.ResetAt, d.ResetAt)
		res.Decider, res.Limit = len(p.Limits), p.Reduced.Limit.Limit
		if d.Allowed {
			res.Allowed, res.Outcome, counted = true, policy.AdmittedReduced, []windowtest.Model{m.reduced}
		} else if p.CountDenied {
			res.Outcome, counted = policy.DeniedCountedReduced, append(append(counted, m.limits...), m.reduced)
		}
	case p.CountDenied:
		res.Outcome, counted = policy.DeniedCounted, m.limits
	}
	res.Remaining, res.RetryAfter = d.Remaining, d.RetryAfter
	if cost == 0 {
		res.Outcome, counted = policy.Denied, nil
	}
	for _, c := range counted {
		c.Record(now, cost)
		res.ResetAt = max(res.ResetAt, windowtest.Check(c, now, 0).ResetAt)
	}
	if !res.Allowed && p.Mode == policy.Shadow {
		res.Allowed, res.WouldDeny = true, true
	}
	decider := m.reduced
	if res.Decider < len(p.Limits) {
		decider = m.limits[res.Decider]
	}
	res.ResetAfter = max(0, windowtest.Check(decider, now, 0).ResetAt-now)
	return res
}
