package rpc

import (
	"errors"
	"fmt"
	"time"

	"github.com/floodgate/floodgate/fsm"
	"github.com/floodgate/floodgate/policy"
	pb "github.com/floodgate/floodgate/proto/floodgate/v1"
	"github.com/floodgate/floodgate/window"
)

// Request bounds.
const (
	// MaxKeyLen is the longest key, in bytes.
	MaxKeyLen = 1024
	// MaxBatch is the most checks in one AllowBatch call.
	MaxBatch = 1000
)

// parseCheck validates one request and turns it into the check a shard log
// entry carries. field prefixes error messages ("requests[3]." in a batch)
// so they name the offending field exactly.
func parseCheck(req *pb.AllowRequest, field string, maxLog int64) (fsm.Check, error) {
	if req == nil {
		return fsm.Check{}, fmt.Errorf("%w: %s: missing", ErrInvalid, trimDot(field))
	}
	if req.Key == "" {
		return fsm.Check{}, fmt.Errorf("%w: %skey: must not be empty", ErrInvalid, field)
	}
	if len(req.Key) > MaxKeyLen {
		return fsm.Check{}, fmt.Errorf("%w: %skey: %d bytes is longer than %d", ErrInvalid, field, len(req.Key), MaxKeyLen)
	}
	l, err := limitFromProto(req.Limit, field+"limit.", maxLog)
	if err != nil {
		return fsm.Check{}, err
	}
	p := &policy.Policy{Limits: []window.Limit{l}}
	cost := int64(1)
	if req.Cost != nil {
		cost = *req.Cost
	}
	if err := p.ValidateCost(cost); err != nil {
		return fsm.Check{}, atField(field, err)
	}
	return fsm.Check{Key: req.Key, Policy: p, Cost: cost}, nil
}

// limitFromProto validates a proto Limit and converts it.
func limitFromProto(pl *pb.Limit, field string, maxLog int64) (window.Limit, error) {
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
		return window.Limit{}, atField(field, err)
	}
	return l, nil
}

// atField reports a validation error under its API path: prefix (such as
// "requests[3].limit.") and the field, in the proto's spelling.
func atField(prefix string, err error) error {
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

// limitToProto is the inverse of limitFromProto, for forwarding.
func limitToProto(l *window.Limit) *pb.Limit {
	return &pb.Limit{
		Algorithm: pb.Algorithm(l.Algorithm),
		Limit:     l.Limit,
		WindowMs:  l.Window / int64(time.Millisecond),
		Buckets:   l.Buckets,
		Calendar:  pb.CalendarUnit(l.Calendar),
		Burst:     l.Burst,
	}
}

// resultToProto converts a decision; times become Unix milliseconds, a
// retry-after rounded up so a client that waits exactly that long is in time.
func resultToProto(r policy.Result) *pb.AllowResponse {
	ms := int64(time.Millisecond)
	return &pb.AllowResponse{
		Allowed:      r.Allowed,
		Limit:        r.Limit,
		Remaining:    r.Remaining,
		ResetAtMs:    (r.ResetAt + ms - 1) / ms,
		RetryAfterMs: (r.RetryAfter + ms - 1) / ms,
	}
}

func trimDot(field string) string {
	if n := len(field); n > 0 && field[n-1] == '.' {
		return field[:n-1]
	}
	return field
}
