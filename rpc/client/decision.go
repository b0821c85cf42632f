package client

import (
	"math"
	"time"

	pb "github.com/floodgate/floodgate/proto/floodgate/v1"
)

// D is a set of descriptors: D{"user": "42"} is counted under the key
// "user=42" (in the policy's key_by order).
type D map[string]string

// Decision is a typed answer to a check.
type Decision struct {
	// Allowed reports whether the request may go ahead (counted when its
	// cost was above 0).
	Allowed bool
	// Limit and Remaining are the deciding limit's; Remaining is -1 when
	// the answer FailedOpen.
	Limit     int64
	Remaining int64
	// RetryAfter is, when denied, how long until the same request would be
	// admitted; ResetAfter how long until the limit is back to full. Both
	// are measured on the deciding leader, so no clocks need agree.
	RetryAfter time.Duration
	ResetAfter time.Duration
	// Window is the deciding limit's window (0 for a calendar window).
	Window time.Duration
	// DecidedBy names the limit that decided (its name, or limits[i]).
	DecidedBy string
	// Key is the key the request was counted under.
	Key string
	// WouldDeny: a shadow policy admitted what enforcing would have denied.
	WouldDeny bool
	// FailedOpen: the cluster could not answer and Options.FailOpen
	// admitted the request.
	FailedOpen bool
}

// DecisionOf converts a raw answer.
func DecisionOf(r *pb.AllowResponse) Decision {
	return Decision{
		Allowed: r.GetAllowed(), Limit: r.GetLimit(), Remaining: r.GetRemaining(),
		RetryAfter: millis(r.GetRetryAfterMs()), ResetAfter: millis(r.GetResetAfterMs()),
		Window: millis(r.GetWindowMs()), DecidedBy: r.GetDecidedBy(), Key: r.GetKey(), WouldDeny: r.GetWouldDeny(),
	}
}

// millis is ms milliseconds, at least 0 and at most the longest Duration:
// a node's answer past that (a broken node) would otherwise wrap negative,
// and Wait, reading a denial's RetryAfter of thousands of years as 0,
// would ask again every millisecond.
func millis(ms int64) time.Duration {
	switch {
	case ms <= 0:
		return 0
	case ms > math.MaxInt64/int64(time.Millisecond):
		return math.MaxInt64
	}
	return time.Duration(ms) * time.Millisecond
}

// failedOpen is the decision of a check the cluster could not answer,
// admitted under FailOpen.
func failedOpen() Decision { return Decision{Allowed: true, Remaining: -1, FailedOpen: true} }
