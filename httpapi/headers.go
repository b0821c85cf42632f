package httpapi

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	pb "github.com/floodgate/floodgate/proto/floodgate/v1"
	"github.com/floodgate/floodgate/window"
)

// Headers picks which rate-limit headers answers carry.
type Headers int

// Header styles.
const (
	// Draft is the IETF draft's RateLimit-Policy and RateLimit (default).
	Draft Headers = iota
	// Legacy is X-RateLimit-Limit, X-RateLimit-Remaining and
	// X-RateLimit-Reset (seconds until full capacity).
	Legacy
	// Both sends both sets.
	Both
)

// ParseHeaders reads a header style: "draft", "legacy" or "both".
func ParseHeaders(s string) (Headers, error) {
	switch s {
	case "draft", "":
		return Draft, nil
	case "legacy":
		return Legacy, nil
	case "both":
		return Both, nil
	}
	return 0, fmt.Errorf("rate-limit headers %q: want draft, legacy or both", s)
}

// String implements fmt.Stringer.
func (h Headers) String() string {
	return [...]string{"draft", "legacy", "both"}[h]
}

// Quota is what the rate-limit headers say about one answer.
type Quota struct {
	Name       string // the limit that decided
	Allowed    bool
	Limit      int64
	Remaining  int64
	Window     time.Duration // 0: not sent (a calendar window)
	ResetAfter time.Duration
	RetryAfter time.Duration
}

// QuotaOf is the quota of a check's answer.
func QuotaOf(r *pb.AllowResponse) Quota {
	ms := time.Millisecond
	return Quota{Name: r.GetDecidedBy(), Allowed: r.GetAllowed(), Limit: r.GetLimit(), Remaining: r.GetRemaining(),
		Window: time.Duration(r.GetWindowMs()) * ms, ResetAfter: time.Duration(r.GetResetAfterMs()) * ms,
		RetryAfter: time.Duration(r.GetRetryAfterMs()) * ms}
}

// WriteHeaders sets the rate-limit headers of q in style, and Retry-After
// when q is a denial: the one place they are written, for the HTTP API and
// the SDK's middleware. Times are whole seconds, rounded up, so a client
// that waits that long is never early.
func WriteHeaders(h http.Header, style Headers, q Quota) {
	reset := window.CeilSeconds(q.ResetAfter)
	if style == Draft || style == Both {
		name := sfString(q.Name)
		pol := name + ";q=" + strconv.FormatInt(q.Limit, 10)
		if q.Window > 0 {
			pol += ";w=" + strconv.FormatInt(window.CeilSeconds(q.Window), 10)
		}
		h.Set("RateLimit-Policy", pol)
		h.Set("RateLimit", name+";r="+strconv.FormatInt(max(q.Remaining, 0), 10)+";t="+strconv.FormatInt(reset, 10))
	}
	if style == Legacy || style == Both {
		h.Set("X-RateLimit-Limit", strconv.FormatInt(q.Limit, 10))
		h.Set("X-RateLimit-Remaining", strconv.FormatInt(max(q.Remaining, 0), 10))
		h.Set("X-RateLimit-Reset", strconv.FormatInt(reset, 10))
	}
	if !q.Allowed {
		h.Set("Retry-After", strconv.FormatInt(max(window.CeilSeconds(q.RetryAfter), 1), 10))
	}
}

// sfString is s as a structured-field string (RFC 8941 §3.3.3): quoted,
// with '"' and '\' escaped; characters outside printable ASCII, which it
// cannot carry, become '?'.
func sfString(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '"' || c == '\\':
			b.WriteByte('\\')
			b.WriteByte(c)
		case c < 0x20 || c > 0x7e:
			b.WriteByte('?')
		default:
			b.WriteByte(c)
		}
	}
	b.WriteByte('"')
	return b.String()
}
