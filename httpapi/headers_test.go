package httpapi

import (
	"math"
	"net/http"
	"testing"
	"time"
)

// Times in the headers are whole seconds rounded up, at every edge: none
// is 0 on a denial, sub-second rounds up to 1, and the longest duration
// (golang.org/x/time/rate's InfDuration, "never", which a Limiter shaped
// like it may answer through the SDK's middleware) stays the longest.
// Before, a duration within a second of math.MaxInt64 overflowed while
// rounding up and was sent as Retry-After: 1, inviting the client back at
// once.
func TestHeaderTimesRoundUpAtTheEdges(t *testing.T) {
	const inf = time.Duration(math.MaxInt64)
	for _, tc := range []struct {
		d             time.Duration
		retry, window string
	}{
		{0, "1", ""},
		{time.Nanosecond, "1", "1"},
		{999 * time.Millisecond, "1", "1"},
		{time.Second, "1", "1"},
		{time.Second + time.Nanosecond, "2", "2"},
		{inf, "9223372037", "9223372037"},
		{-time.Second, "1", ""},
	} {
		h := http.Header{}
		WriteHeaders(h, Both, Quota{Name: "n", Limit: 1, Window: tc.d, ResetAfter: tc.d, RetryAfter: tc.d})
		if got := h.Get("Retry-After"); got != tc.retry {
			t.Errorf("RetryAfter %v: Retry-After %q, want %q", tc.d, got, tc.retry)
		}
		reset := tc.window
		if reset == "" {
			reset = "0"
		}
		if got := h.Get("X-RateLimit-Reset"); got != reset {
			t.Errorf("ResetAfter %v: X-RateLimit-Reset %q, want %q", tc.d, got, reset)
		}
		pol := `"n";q=1`
		if tc.window != "" {
			pol += ";w=" + tc.window
		}
		if got := h.Get("RateLimit-Policy"); got != pol {
			t.Errorf("Window %v: RateLimit-Policy %q, want %q", tc.d, got, pol)
		}
	}
}
