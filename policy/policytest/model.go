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
	// hist is every call made, so Clone can replay them on a fresh model.
	hist []call
}

type call struct {
	now, cost, wait int64
	elastic, refuse bool
}

// Clone returns an independent copy of m, built by replaying every call
// made on m on a fresh reference.
func (m *Model) Clone() *Model {
	c := New(m.p)
	for _, h := range m.hist {
		c.check(h)
	}
	return c
}

// New returns the reference of p for a fresh key.
func New(p *policy.Policy) *Model {
	m := &Model{p: p}
	for i := range p.Limits {
		m.limits = append(m.limits, windowtest.NewExact(p.Limits[i].Limit))
	}
	if p.Reduced != nil {
		m.reduced = windowtest.NewExact(p.Reduced.Limit)
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
//     counted there only if admitted there; denied there too, it may be
//     retried when the limits or the reduced limit admit it, whichever
//     comes first;
//   - with CountDenied, a denied request is counted in every limit checked,
//     and its RetryAfter is read after that (the count delays it);
//   - a peek (cost 0) counts nothing;
//   - Shadow answers allowed, with WouldDeny when enforcing would deny, and
//     counts exactly what enforcing would;
//   - ResetAt is the latest time any checked limit is back to full, after
//     what was counted, and ResetAfter how long from now until the
//     deciding limit alone is.
func (m *Model) Check(now, cost int64, elastic bool) policy.Result {
	return m.check(call{now: now, cost: cost, elastic: elastic})
}

// Refused answers a request its atomic set refuses (another request of the
// set was denied) and counts it as the contract says: decided as Check
// decides, but a request the policy would admit is denied instead, with
// RetryAfter the set's wait (at least 1ns), and counted only as a denial
// is (CountDenied: in every limit, and in the reduced limit if that is
// what admitted it, and the wait is then its own, read after that, if it
// has one; when nothing is counted, Remaining is what remained before the
// request).
func (m *Model) Refused(now, cost int64, elastic bool, wait int64) policy.Result {
	return m.check(call{now: now, cost: cost, elastic: elastic, refuse: true, wait: wait})
}

func (m *Model) check(c call) policy.Result {
	m.hist = append(m.hist, c)
	now, cost, elastic := c.now, c.cost, c.elastic
	p, pct := m.p, Stretch(m.p, elastic)
	if p.Reduced != nil {
		m.reduced.SetLimit(p.Reduced.Limit) // never stretched, maybe edited
	}
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
		limitsWait := d.RetryAfter
		d = windowtest.Check(m.reduced, now, cost)
		res.ResetAt = max(res.ResetAt, d.ResetAt)
		res.Decider, res.Limit = len(p.Limits), p.Reduced.Limit.Limit
		if d.Allowed {
			res.Allowed, res.Outcome, counted = true, policy.AdmittedReduced, []windowtest.Model{m.reduced}
		} else {
			if p.CountDenied {
				res.Outcome, counted = policy.DeniedCountedReduced, append(append(counted, m.limits...), m.reduced)
			}
			d.RetryAfter = m.firstAdmission(limitsWait, d.RetryAfter, cost)
		}
	case p.CountDenied:
		res.Outcome, counted = policy.DeniedCounted, m.limits
	}
	// Remaining is never over the limit (a bucket whose burst exceeds it).
	res.Remaining, res.RetryAfter = min(d.Remaining, res.Limit), d.RetryAfter
	if c.refuse && res.Allowed {
		reducedAdmitted := res.Outcome == policy.AdmittedReduced
		res.Allowed, res.RetryAfter, res.Outcome, counted = false, max(c.wait, 1), policy.Denied, nil
		if !p.CountDenied {
			// Nothing counted: what remained before the request.
			res.Remaining = min(d.Remaining+cost, res.Limit)
		}
		switch {
		case p.CountDenied && reducedAdmitted:
			res.Outcome, counted = policy.DeniedCountedReduced, append(append(counted, m.limits...), m.reduced)
		case p.CountDenied:
			res.Outcome, counted = policy.DeniedCounted, m.limits
		}
	}
	if cost == 0 {
		res.Outcome, counted = policy.Denied, nil
	}
	for _, c := range counted {
		c.Record(now, cost)
		res.ResetAt = max(res.ResetAt, windowtest.Check(c, now, 0).ResetAt)
	}
	if len(counted) > 0 && !res.Allowed {
		// A denial counted delays the very request it answers: its
		// wait is read after it (a refused request that would fit at
		// once keeps the set's, which CheckSet settles).
		if w := m.waitNow(now, cost); w > 0 {
			res.RetryAfter = w
		}
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

// waitNow is how long from now until a request of cost is admitted, if
// nothing more is counted: 0 if it is now; else the longest wait of the
// limits that deny it, or the reduced limit's if that is sooner
// (firstAdmission).
func (m *Model) waitNow(now, cost int64) int64 {
	var limitsWait int64
	for _, l := range m.limits {
		if d := windowtest.Check(l, now, cost); !d.Allowed {
			limitsWait = max(limitsWait, d.RetryAfter)
		}
	}
	if limitsWait == 0 || m.p.Reduced == nil {
		return limitsWait
	}
	d := windowtest.Check(m.reduced, now, cost)
	if d.Allowed {
		return 0
	}
	return m.firstAdmission(limitsWait, d.RetryAfter, cost)
}

// firstAdmission is the wait of a request that both the limits (after
// limitsWait, the longest of theirs) and the reduced limit (after
// reducedWait) deny: it is admitted as soon as either admits it, but a
// side counts only if its capacity holds the cost at all (the reduced
// limit's need not; an elastic policy's unstretched limits need not);
// with neither, the reduced limit's wait.
func (m *Model) firstAdmission(limitsWait, reducedWait, cost int64) int64 {
	c := max(cost, 1)
	limitsCan := true
	for _, l := range m.limits { // read stretched (SetLimit)
		limitsCan = limitsCan && c <= l.Capacity()
	}
	reducedCan := c <= m.reduced.Capacity()
	switch {
	case limitsCan && reducedCan:
		return min(limitsWait, reducedWait)
	case limitsCan:
		return limitsWait
	}
	return reducedWait
}

// CheckSet answers one atomic set: keys[i] (an index into models) at
// costs[i], all admitted or none. A key given twice is checked once at
// the sum of its costs (at most window.MaxLimit), and both answers are that check's. Whether the set
// is admitted is decided on clones: every distinct key must be admitted
// (enforcing: Shadow's would-deny is a denial); then each key is checked,
// or Refused with the longest wait among the denied keys.
func CheckSet(models []*Model, keys []int, costs []int64, now int64, elastic bool) []policy.Result {
	total := map[int]int64{}
	var order []int
	for i, k := range keys {
		if _, ok := total[k]; !ok {
			order = append(order, k)
		}
		total[k] = min(total[k]+costs[i], window.MaxLimit)
	}
	admitted, wait := true, int64(0)
	probes := map[int]policy.Result{}
	for _, k := range order {
		r := models[k].Clone().Check(now, total[k], elastic)
		probes[k] = r
		if !r.Allowed || r.WouldDeny {
			admitted, wait = false, max(wait, r.RetryAfter)
		}
	}
	byKey := map[int]policy.Result{}
	var refused []int
	for _, k := range order {
		if probe := probes[k]; admitted || !probe.Allowed || probe.WouldDeny {
			byKey[k] = models[k].Check(now, total[k], elastic)
		} else {
			byKey[k] = models[k].Refused(now, total[k], elastic, wait)
			refused = append(refused, k)
		}
	}
	if len(refused) > 0 && models[refused[0]].p.CountDenied {
		// Every key's denial was counted: the set is admitted once the
		// longest of the keys' waits, read after that, has passed.
		wait = 0
		for _, k := range order {
			wait = max(wait, byKey[k].RetryAfter)
		}
		for _, k := range refused {
			r := byKey[k]
			r.RetryAfter = wait
			byKey[k] = r
		}
	}
	out := make([]policy.Result, len(keys))
	for i, k := range keys {
		out[i] = byKey[k]
	}
	return out
}
