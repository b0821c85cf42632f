package validate

import (
	"github.com/floodgate/floodgate/policy"
	"github.com/floodgate/floodgate/window"
)

// maxInline is how many distinct inline limits an Inline remembers: a
// batch rarely carries more, and past it a search costs more than it saves.
const maxInline = 8

// Inline shares one policy among the requests of a batch that give the same
// inline limit. Why: a forward encodes a policy once per distinct pointer,
// and a log entry encodes each pointer's before it finds equal ones, so a
// batch of a hundred requests with one inline limit builds and encodes one
// policy, not a hundred. Policies are never changed once built, so sharing
// is safe. Its zero value
// is ready; a nil *Inline shares nothing. Not safe for concurrent use: one
// call owns it.
type Inline struct {
	limits   [maxInline]window.Limit
	policies [maxInline]*policy.Policy
	n        int
}

// Policy returns the policy of the inline limit l: the one given before
// for an equal limit, or a new one.
func (in *Inline) Policy(l window.Limit) *policy.Policy {
	if in == nil {
		return newInline(l)
	}
	for i := range in.n {
		if in.limits[i] == l {
			return in.policies[i]
		}
	}
	p := newInline(l)
	if in.n < maxInline {
		in.limits[in.n], in.policies[in.n] = l, p
		in.n++
	}
	return p
}

// newInline is the policy of a request's inline limit.
func newInline(l window.Limit) *policy.Policy {
	return &policy.Policy{Limits: []policy.Limit{{Limit: l}}}
}
