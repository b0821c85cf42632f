package httpapi

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"

	pb "github.com/floodgate/floodgate/proto/floodgate/v1"
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

// setHeaders writes the rate-limit headers of one answer, and Retry-After
// when it is a denial. Times are whole seconds, rounded up, so a client
// that waits that long is never early.
func setHeaders(h http.Header, style Headers, r *pb.AllowResponse) {
	reset := ceilSeconds(r.GetResetAfterMs())
	if style == Draft || style == Both {
		name := sfString(r.GetDecidedBy())
		pol := name + ";q=" + strconv.FormatInt(r.GetLimit(), 10)
		if w := r.GetWindowMs(); w > 0 {
			pol += ";w=" + strconv.FormatInt(ceilSeconds(w), 10)
		}
		h.Set("RateLimit-Policy", pol)
		h.Set("RateLimit", name+";r="+strconv.FormatInt(max(r.GetRemaining(), 0), 10)+";t="+strconv.FormatInt(reset, 10))
	}
	if style == Legacy || style == Both {
		h.Set("X-RateLimit-Limit", strconv.FormatInt(r.GetLimit(), 10))
		h.Set("X-RateLimit-Remaining", strconv.FormatInt(max(r.GetRemaining(), 0), 10))
		h.Set("X-RateLimit-Reset", strconv.FormatInt(reset, 10))
	}
	if !r.GetAllowed() {
		h.Set("Retry-After", strconv.FormatInt(max(ceilSeconds(r.GetRetryAfterMs()), 1), 10))
	}
}

func ceilSeconds(ms int64) int64 { return (max(ms, 0) + 999) / 1000 }

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
