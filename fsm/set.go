package fsm

import (
	"bytes"
	"fmt"

	"github.com/floodgate/floodgate/policy"
	"github.com/floodgate/floodgate/window"
)

// Atomic sets: checks of one policy on several keys, admitted and counted
// all or nothing (an Envoy request's descriptors under one policy). The
// keys of a set live in one group because their policy fixes their slot
// (policy.Policy.Colocate), so one log entry decides them all.

// ownsAll reports whether the shard owns the key of every check.
func (s *Shard) ownsAll(checks []entryCheck) bool {
	for i := range checks {
		if !s.owns(checks[i].key) {
			return false
		}
	}
	return true
}

// evalSet answers the checks of one set under p into out. Each distinct
// key is decided once, at the total cost the set puts on it; if any is
// denied, the others are refused (counted as a denial of p would be) and
// every check of the set answers denied. Nothing is counted before every
// key is decided, so a refused set leaves no trace beyond what its denial
// counts.
func (s *Shard) evalSet(p *policy.Policy, checks []entryCheck, out []policy.Result) {
	at, distinct, cost := distinctKeys(len(checks), func(i, j int) bool { return bytes.Equal(checks[i].key, checks[j].key) },
		func(i int) int64 { return checks[i].cost })
	t := &s.tt
	allOrNothing(p, distinct, cost, out, func(d int) policy.Result {
		s.gather(t, p, checks[d].key, true)
		res := p.Decide(t.states[:t.n], s.now, cost[d], checks[d].elastic)
		s.settle(t, p)
		return res
	}, func(d int) {
		// Gathered again: storing the previous key's new states may have
		// moved the table's records.
		s.gather(t, p, checks[d].key, true)
		p.Count(t.states[:t.n], s.now, cost[d], checks[d].elastic, &out[d])
		s.settle(t, p)
		if out[d].Outcome != policy.Denied {
			s.store(t)
			s.mirror(t, p, cost[d], out[d].Outcome, checks[d].elastic)
		}
	})
	for i := range checks {
		out[i] = out[at[i]]
	}
}

// allOrNothing is the rule of an atomic set, for strict and fast mode
// alike: decide(d) answers each distinct key d (at its total cost[d])
// without counting; if any is denied, the others are refused with the
// longest wait of the denied; then count(d) counts each out[d]. With
// CountDenied, what that counts delays the keys, so the refused ones are
// given the longest wait of all once counted.
func allOrNothing(p *policy.Policy, distinct []int, cost []int64, out []policy.Result, decide func(d int) policy.Result, count func(d int)) {
	refused, wait := false, int64(0)
	for _, d := range distinct {
		out[d] = decide(d)
		if !out[d].Allowed {
			refused, wait = true, max(wait, out[d].RetryAfter)
		}
	}
	var wasAdmitted []bool
	if refused && p.CountDenied {
		wasAdmitted = make([]bool, len(out))
	}
	for _, d := range distinct {
		if refused {
			if wasAdmitted != nil {
				wasAdmitted[d] = out[d].Allowed
			}
			p.Refuse(&out[d], cost[d], wait)
		}
		count(d)
	}
	if wasAdmitted != nil {
		// Counting the denials pushed each key's own wait back (Count):
		// the set is admitted once the last of them has passed.
		wait = 0
		for _, d := range distinct {
			wait = max(wait, out[d].RetryAfter)
		}
		for _, d := range distinct {
			if wasAdmitted[d] {
				out[d].RetryAfter = wait
			}
		}
	}
}

// distinctKeys finds the distinct keys of n checks (same says whether
// checks i and j have the same key): distinct lists the first check of
// each key, at[i] is the first check with check i's key, and cost[d] the
// sum of the costs of key d's checks.
func distinctKeys(n int, same func(i, j int) bool, costOf func(int) int64) (at, distinct []int, cost []int64) {
	at, cost = make([]int, n), make([]int64, n)
	for i := range n {
		at[i] = i
		for _, d := range distinct {
			if same(d, i) {
				at[i] = d
				break
			}
		}
		if at[i] == i {
			distinct = append(distinct, i)
		}
		cost[at[i]] = min(cost[at[i]]+costOf(i), maxCost)
	}
	return at, distinct, cost
}

// maxCost bounds a key's total cost in a set to the largest cost an entry
// carries: a set's sum stays a cost the log can replay (a Hit), and is
// denied as any cost above a limit is.
const maxCost = window.MaxLimit

// ValidateSets checks that checks form well-made atomic sets: a set
// starts with a check that is not Joined, and its checks share one policy
// (the same pointer). A key given twice in a set is counted once at the
// sum of its costs. The error names the check.
func ValidateSets(checks []Check) error {
	start := 0
	for i := range checks {
		if !checks[i].Joined {
			start = i
			continue
		}
		switch {
		case i == 0:
			return fmt.Errorf("checks[0]: joins a set with no check before it")
		case checks[i].Policy != checks[start].Policy:
			return fmt.Errorf("checks[%d]: joins a set of another policy", i)
		}
	}
	return nil
}

// ValidatePolicies checks every policy of checks as apply will, so that a
// check the state machine would refuse never joins a log entry: one
// invalid policy in an entry fails the whole entry, every other caller's
// checks with it. Checks of one call share policies, so each distinct
// pointer in a row is checked once.
func ValidatePolicies(checks []Check) error {
	var last *policy.Policy
	for i := range checks {
		p := checks[i].Policy
		if p == last {
			continue
		}
		last = p
		if p == nil {
			return fmt.Errorf("checks[%d]: no policy", i)
		}
		if err := p.Validate(window.MaxLogLength); err != nil {
			return fmt.Errorf("checks[%d].policy: %w", i, err)
		}
	}
	return nil
}
