package policy

import (
	"errors"
	"fmt"

	"github.com/floodgate/floodgate/window"
)

// Errors. Validation errors are *window.FieldError values (they match
// window.ErrInvalid) whose Field is a path such as "limits[1].window".
var (
	// ErrCorrupt marks an encoded policy that cannot be decoded.
	ErrCorrupt = errors.New("corrupt policy encoding")
)

// Bounds on a policy.
const (
	// MaxLimits is the most limits one policy checks together.
	MaxLimits = 8
	// MaxNameLen bounds a policy name.
	MaxNameLen = 128
)

// Policy is a list of limits checked atomically for one key.
type Policy struct {
	// Name is the policy's name, empty for a request's inline limit. It
	// scopes the counters: two policies never share state.
	Name string
	// Limits are checked together; each must have a distinct window.
	Limits []window.Limit
}

// Result is the answer of a policy to one request.
type Result struct {
	// Allowed reports whether every limit admitted the request.
	Allowed bool
	// Decider is the index of the limit that decided: the one that denied
	// (the longest wait, when several did), or the one with the least
	// remaining when all admitted.
	Decider int
	// Limit, Remaining, ResetAt and RetryAfter are those of the decider,
	// except ResetAt, the latest of all limits.
	Limit      int64
	Remaining  int64
	ResetAt    int64
	RetryAfter int64
}

// Validate reports why p can never be evaluated; maxLog caps sliding logs.
func (p *Policy) Validate(maxLog int64) error {
	if len(p.Name) > MaxNameLen {
		return invalid("name", "longer than %d bytes", MaxNameLen)
	}
	if len(p.Limits) == 0 {
		return invalid("limits", "a policy needs at least one limit")
	}
	if len(p.Limits) > MaxLimits {
		return invalid("limits", "at most %d limits, got %d", MaxLimits, len(p.Limits))
	}
	for i := range p.Limits {
		if err := p.Limits[i].Validate(maxLog); err != nil {
			return within(fmt.Sprintf("limits[%d].", i), err)
		}
		for j := 0; j < i; j++ {
			if sameWindow(&p.Limits[i], &p.Limits[j]) {
				return invalid(fmt.Sprintf("limits[%d].window", i), "duplicates the window of limits[%d]", j)
			}
		}
	}
	return nil
}

// ValidateCost reports why cost can never be admitted by p: negative, or
// more than one of its limits admits at once.
func (p *Policy) ValidateCost(cost int64) error {
	for i := range p.Limits {
		if err := p.Limits[i].ValidateCost(cost); err != nil {
			var fe *window.FieldError
			if len(p.Limits) > 1 && errors.As(err, &fe) {
				return invalid(fe.Field, "%s (limits[%d])", fe.Msg, i)
			}
			return err
		}
	}
	return nil
}

func invalid(field, format string, args ...any) error {
	return &window.FieldError{Field: field, Msg: fmt.Sprintf(format, args...)}
}

// within prefixes the field of a validation error with path.
func within(path string, err error) error {
	var fe *window.FieldError
	if errors.As(err, &fe) {
		return &window.FieldError{Field: path + fe.Field, Msg: fe.Msg}
	}
	return err
}

// Evaluate answers a request of cost at time now. states[i] is the state of
// Limits[i] for the request's key. When every limit admits and cost > 0, the
// cost is recorded in every state; otherwise no state changes meaning.
func (p *Policy) Evaluate(states []*window.State, now, cost int64) Result {
	var ds [MaxLimits]window.Decision
	res := Result{Allowed: true, Decider: -1}
	for i := range p.Limits {
		d := p.Limits[i].Check(states[i], now, cost)
		ds[i] = d
		if d.ResetAt > res.ResetAt {
			res.ResetAt = d.ResetAt
		}
		if !d.Allowed {
			if res.Allowed || d.RetryAfter > ds[res.Decider].RetryAfter {
				res.Decider = i
			}
			res.Allowed = false
			continue
		}
		if res.Allowed && (res.Decider < 0 || d.Remaining < ds[res.Decider].Remaining) {
			res.Decider = i
		}
	}
	if res.Allowed && cost > 0 {
		// After counting, the reset is when the newest count ages out:
		// each state's expiry (it behaves as fresh from then on).
		res.ResetAt = now
		for i := range p.Limits {
			p.Limits[i].Record(states[i], now, cost)
			res.ResetAt = max(res.ResetAt, p.Limits[i].Expiry(states[i]))
		}
	}
	d := ds[res.Decider]
	res.Limit = p.Limits[res.Decider].Limit
	res.Remaining = d.Remaining
	res.RetryAfter = d.RetryAfter
	return res
}

// sameWindow reports whether two limits count over the same window, which
// would make one of them redundant and their counters indistinguishable.
func sameWindow(a, b *window.Limit) bool {
	return a.Window == b.Window && a.Calendar == b.Calendar
}
