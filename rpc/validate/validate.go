// Package validate checks requests before anything is counted, naming the
// field at fault. Servers and the Go SDK share it, so a client learns of a
// bad request without a round trip, and never admits one by failing open.
// It imports no Raft or gRPC code.
package validate

import (
	"errors"
	"fmt"
	"time"

	"github.com/floodgate/floodgate/policy"
	pb "github.com/floodgate/floodgate/proto/floodgate/v1"
	"github.com/floodgate/floodgate/window"
)

// Errors.
var (
	// ErrInvalid marks a request that can never succeed; the message names
	// the field.
	ErrInvalid = errors.New("invalid request")
)

// Request bounds.
const (
	// MaxKeyLen is the longest key, in bytes.
	MaxKeyLen = 1024
	// MaxBatch is the most checks in one AllowBatch call.
	MaxBatch = 1000
)

// Check is a validated request: the key, the policy to apply and the cost.
type Check struct {
	Key    string
	Policy *policy.Policy
	Cost   int64
}

// Request validates one request with an inline limit. field prefixes error
// messages ("requests[3]." in a batch) so they name the field exactly;
// maxLog caps sliding logs (window.DefaultMaxLogLength when 0).
func Request(req *pb.AllowRequest, field string, maxLog int64) (Check, error) {
	if req == nil {
		return Check{}, fmt.Errorf("%w: %s: missing", ErrInvalid, trimDot(field))
	}
	if req.Key == "" {
		return Check{}, fmt.Errorf("%w: %skey: must not be empty", ErrInvalid, field)
	}
	if len(req.Key) > MaxKeyLen {
		return Check{}, fmt.Errorf("%w: %skey: %d bytes is longer than %d", ErrInvalid, field, len(req.Key), MaxKeyLen)
	}
	l, err := Limit(req.Limit, field+"limit.", maxLog)
	if err != nil {
		return Check{}, err
	}
	p := &policy.Policy{Limits: []window.Limit{l}}
	cost := int64(1)
	if req.Cost != nil {
		cost = *req.Cost
	}
	if err := p.ValidateCost(cost); err != nil {
		return Check{}, AtField(field, err)
	}
	return Check{Key: req.Key, Policy: p, Cost: cost}, nil
}

// Batch validates the size of a batch.
func Batch(n int) error {
	if n > MaxBatch {
		return fmt.Errorf("%w: requests: %d checks is more than %d", ErrInvalid, n, MaxBatch)
	}
	return nil
}

// Limit validates a proto Limit and converts it; field prefixes errors.
func Limit(pl *pb.Limit, field string, maxLog int64) (window.Limit, error) {
	if pl == nil {
		return window.Limit{}, fmt.Errorf("%w: %s: required", ErrInvalid, trimDot(field))
	}
	if pl.Algorithm <= pb.Algorithm_ALGORITHM_UNSPECIFIED || pl.Algorithm > pb.Algorithm_GCRA {
		return window.Limit{}, fmt.Errorf("%w: %salgorithm: unknown algorithm %q", ErrInvalid, field, pl.Algorithm.String())
	}
	if pl.Limit <= 0 || pl.Limit > window.MaxLimit {
		return window.Limit{}, fmt.Errorf("%w: %slimit: must be between 1 and %d, got %d", ErrInvalid, field, window.MaxLimit, pl.Limit)
	}
	if pl.Calendar < pb.CalendarUnit_CALENDAR_UNIT_UNSPECIFIED || pl.Calendar > pb.CalendarUnit_CALENDAR_UNIT_YEAR {
		return window.Limit{}, fmt.Errorf("%w: %scalendar: unknown calendar unit %d", ErrInvalid, field, pl.Calendar)
	}
	maxMS := window.MaxWindow / int64(time.Millisecond)
	if pl.Calendar == pb.CalendarUnit_CALENDAR_UNIT_UNSPECIFIED && (pl.WindowMs <= 0 || pl.WindowMs > maxMS) {
		return window.Limit{}, fmt.Errorf("%w: %swindow_ms: must be more than 0 and at most one year (%d), got %d",
			ErrInvalid, field, maxMS, pl.WindowMs)
	}
	if pl.WindowMs < 0 || pl.WindowMs > maxMS {
		return window.Limit{}, fmt.Errorf("%w: %swindow_ms: must be at most one year (%d), got %d", ErrInvalid, field, maxMS, pl.WindowMs)
	}
	l := window.Limit{
		Algorithm: window.Algorithm(pl.Algorithm),
		Limit:     pl.Limit,
		Window:    pl.WindowMs * int64(time.Millisecond),
		Buckets:   pl.Buckets,
		Calendar:  window.Unit(pl.Calendar),
		Burst:     pl.Burst,
	}
	if (l.Algorithm == window.SlidingCounter || l.Algorithm == window.SlidingCounterWeighted) && l.Buckets == 0 {
		// Spell the default out, so the log entry and the state identity
		// say exactly what was counted.
		l.Buckets = window.DefaultBuckets
	}
	if err := l.Validate(maxLog); err != nil {
		return window.Limit{}, AtField(field, err)
	}
	return l, nil
}

// LimitToProto is the inverse of Limit.
func LimitToProto(l *window.Limit) *pb.Limit {
	return &pb.Limit{
		Algorithm: pb.Algorithm(l.Algorithm),
		Limit:     l.Limit,
		WindowMs:  l.Window / int64(time.Millisecond),
		Buckets:   l.Buckets,
		Calendar:  pb.CalendarUnit(l.Calendar),
		Burst:     l.Burst,
	}
}

// AtField reports a validation error under its API path: prefix (such as
// "requests[3].limit.") and the field, in the proto's spelling.
func AtField(prefix string, err error) error {
	var fe *window.FieldError
	if !errors.As(err, &fe) {
		return fmt.Errorf("%w: %s%v", ErrInvalid, prefix, err)
	}
	name := fe.Field
	if name == "window" {
		name = "window_ms" // the API's spelling
	}
	return fmt.Errorf("%w: %s%s: %s", ErrInvalid, prefix, name, fe.Msg)
}

func trimDot(field string) string {
	if n := len(field); n > 0 && field[n-1] == '.' {
		return field[:n-1]
	}
	return field
}
