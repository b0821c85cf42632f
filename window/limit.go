package window

import (
	"errors"
	"fmt"
	"time"
)

// Errors. Validate's errors are *FieldError values, which match ErrInvalid
// and name the offending field, so callers can map them to an
// InvalidArgument answer; DecodeState's wrap ErrCorrupt, so a damaged
// snapshot is told apart from a bad request.
var (
	// ErrInvalid marks a Limit (or a cost) that can never be evaluated.
	ErrInvalid = errors.New("invalid limit")
	// ErrCorrupt marks an encoded State that cannot be decoded.
	ErrCorrupt = errors.New("corrupt limit state")
	// ErrNewerVersion marks, besides ErrCorrupt, a State encoded in a
	// newer version than this binary reads: a newer floodgate wrote it
	// (package fsm stops on it rather than refuse it).
	ErrNewerVersion = errors.New("state encoded by a newer floodgate")
)

// FieldError is a validation error naming the field at fault, so an API
// can report it under its own path ("limit.window_ms", "limits[1].burst").
type FieldError struct {
	// Field is the Limit field: algorithm, limit, window, buckets,
	// calendar, burst, or cost.
	Field string
	// Msg says what is wrong with it.
	Msg string
}

func (e *FieldError) Error() string { return e.Field + ": " + e.Msg }

// Is makes errors.Is(err, ErrInvalid) hold.
func (e *FieldError) Is(target error) bool { return target == ErrInvalid }

func invalid(field, format string, args ...any) error {
	return &FieldError{Field: field, Msg: fmt.Sprintf(format, args...)}
}

// Algorithm names a rate-limit algorithm. The numeric values are stored in
// Raft log entries and snapshots: never renumber them.
type Algorithm uint8

// The algorithms. Each keeps its per-key state in a State.
const (
	// AlgorithmUnknown is the zero value and is never valid.
	AlgorithmUnknown Algorithm = 0
	// SlidingLog keeps one timestamp per unit of admitted cost and counts
	// exactly over the last Window.
	SlidingLog Algorithm = 1
	// SlidingCounter splits Window into Buckets equal buckets and counts the
	// newest Buckets buckets (the current one included).
	SlidingCounter Algorithm = 2
	// SlidingCounterWeighted is SlidingCounter plus the bucket just before
	// the window, weighted by how much of it still overlaps [now-Window, now].
	SlidingCounterWeighted Algorithm = 3
	// FixedWindow counts in consecutive windows of length Window (aligned to
	// the Unix epoch), or in calendar periods when Calendar is set.
	FixedWindow Algorithm = 4
	// TokenBucket holds Burst tokens (default Limit) refilled at
	// Limit per Window.
	TokenBucket Algorithm = 5
	// GCRA is the generic cell rate algorithm (a leaky bucket as a meter):
	// requests are spaced Window/Limit apart, with a tolerance of Burst
	// requests (default 1).
	GCRA Algorithm = 6
)

// Unit is a calendar period in UTC for calendar-aligned fixed windows.
type Unit uint8

// The calendar units. Stored in log entries: never renumber them.
const (
	// CalendarNone means a rolling (non-calendar) window.
	CalendarNone Unit = 0
	// CalendarMinute is a UTC minute.
	CalendarMinute Unit = 1
	// CalendarHour is a UTC hour.
	CalendarHour Unit = 2
	// CalendarDay is a UTC day.
	CalendarDay Unit = 3
	// CalendarWeek is an ISO week, Monday 00:00 UTC to the next Monday.
	CalendarWeek Unit = 4
	// CalendarMonth is a calendar month in UTC.
	CalendarMonth Unit = 5
	// CalendarYear is a calendar year in UTC.
	CalendarYear Unit = 6
)

// Bounds on a Limit. They keep every computation inside int64 nanoseconds
// and a State inside the memory budget.
const (
	// MaxWindow is the longest window: one leap year.
	MaxWindow = int64(366 * 24 * time.Hour)
	// MaxLimit is the largest limit (and the largest cost) of any algorithm.
	MaxLimit = int64(1_000_000_000)
	// DefaultBuckets is the bucket count of a sliding counter whose Buckets
	// is zero, when it divides the window: 60, so an hour has one-minute
	// buckets (DefaultBucketsFor is the rule for every window).
	DefaultBuckets = 60
	// MaxBuckets bounds the bucket count of a sliding counter.
	MaxBuckets = 1024
	// DefaultMaxLogLength is the default cap on a sliding log's Limit: the
	// log keeps one timestamp per unit of cost, so larger limits belong in a
	// sliding counter.
	DefaultMaxLogLength = 10_000
	// MaxLogLength is the hard cap on a sliding log's Limit, whatever a
	// node's --max-log-length says: the state machines validate every log
	// entry's policies against it, on every replica alike, so no entry can
	// make replicas allocate gigabytes of timestamps.
	MaxLogLength = 1_000_000
	// MaxRefill bounds how long an empty TokenBucket or GCRA takes to fill
	// up again (Capacity × Window / Limit): ten years. Their state is the
	// time at which the bucket is full again, in int64 nanoseconds, so the
	// debt it can run up (up to twice the capacity) must stay far inside
	// the int64 range. Only a Burst far above Limit·Window comes near it.
	MaxRefill = 10 * MaxWindow
)

// Limit is one rate limit: at most Limit units of cost per Window, counted
// with Algorithm. Times are Unix nanoseconds everywhere in this package.
type Limit struct {
	// Algorithm picks how cost is counted.
	Algorithm Algorithm
	// Limit is the most cost admitted per window (the bucket's refill per
	// Window for TokenBucket and GCRA). 1..MaxLimit.
	Limit int64
	// Window is the window length in nanoseconds, 1..MaxWindow. Zero when
	// Calendar is set: the calendar unit is the window.
	Window int64
	// Buckets is the bucket count of the sliding counters (0 means
	// DefaultBucketsFor(Window)). Window must divide evenly into Buckets.
	Buckets int32
	// Calendar aligns a FixedWindow to UTC calendar periods.
	Calendar Unit
	// Burst is the bucket size of TokenBucket (0 means Limit) and the burst
	// tolerance of GCRA in requests (0 means 1).
	Burst int64
}

// Validate reports why l can never be evaluated. maxLog caps the Limit of a
// SlidingLog (0 means DefaultMaxLogLength; never above MaxLogLength). The
// error wraps ErrInvalid and names the field: "algorithm", "limit",
// "window", "buckets", "calendar" or "burst".
func (l Limit) Validate(maxLog int64) error {
	if maxLog <= 0 {
		maxLog = DefaultMaxLogLength
	}
	maxLog = min(maxLog, MaxLogLength)
	if l.Algorithm < SlidingLog || l.Algorithm > GCRA {
		return invalid("algorithm", "unknown algorithm %d", l.Algorithm)
	}
	if l.Limit <= 0 || l.Limit > MaxLimit {
		return invalid("limit", "must be between 1 and %d, got %d", MaxLimit, l.Limit)
	}
	if l.Calendar != CalendarNone {
		if l.Algorithm != FixedWindow {
			return invalid("calendar", "only fixed_window counts in calendar periods, not %s", l.Algorithm)
		}
		if l.Calendar > CalendarYear {
			return invalid("calendar", "unknown calendar unit %d", l.Calendar)
		}
		if l.Window != 0 {
			return invalid("window", "must be unset when calendar is set (the calendar unit is the window)")
		}
	} else if l.Window <= 0 || l.Window > MaxWindow {
		return invalid("window", "must be more than 0 and at most one year (%s), got %s", time.Duration(MaxWindow), time.Duration(l.Window))
	}
	switch l.Algorithm {
	case SlidingLog:
		if l.Limit > maxLog {
			return invalid("limit", "a sliding_log keeps one timestamp per request and is capped at %d; use sliding_counter for a limit of %d", maxLog, l.Limit)
		}
	case SlidingCounter, SlidingCounterWeighted:
		n := l.buckets()
		if n < 1 || n > MaxBuckets {
			return invalid("buckets", "must be between 1 and %d, got %d", MaxBuckets, n)
		}
		if l.Window%int64(n) != 0 {
			return invalid("buckets", "window %s does not divide into %d equal buckets", time.Duration(l.Window), n)
		}
	}
	if l.Buckets != 0 && l.Algorithm != SlidingCounter && l.Algorithm != SlidingCounterWeighted {
		return invalid("buckets", "only the sliding counters have buckets")
	}
	if l.Burst < 0 || l.Burst > MaxLimit {
		return invalid("burst", "must be between 0 and %d, got %d", MaxLimit, l.Burst)
	}
	if l.Burst != 0 && l.Algorithm != TokenBucket && l.Algorithm != GCRA {
		return invalid("burst", "only token_bucket and gcra have a burst")
	}
	if l.Algorithm == TokenBucket || l.Algorithm == GCRA {
		// Only a burst above the limit can exceed it: without one the
		// bucket refills within Window.
		if refill, _, ok := mulDiv(uint64(l.Capacity()), uint64(l.Window), uint64(l.Limit)); !ok || refill > uint64(MaxRefill) {
			return invalid("burst", "a bucket of %d refilled %d per %s takes more than %s to refill", l.Capacity(), l.Limit, time.Duration(l.Window), time.Duration(MaxRefill))
		}
	}
	return nil
}

// ValidateCost reports why cost can never be admitted under l: negative, or
// more than the most l can ever admit at once (so it would be denied forever).
func (l Limit) ValidateCost(cost int64) error {
	if cost < 0 {
		return invalid("cost", "must not be negative, got %d", cost)
	}
	if capacity := l.Capacity(); cost > capacity {
		return invalid("cost", "%d is more than the limit admits at once (%d)", cost, capacity)
	}
	return nil
}

// Capacity is the most cost l admits at one instant from a fresh State.
func (l Limit) Capacity() int64 {
	switch l.Algorithm {
	case TokenBucket:
		if l.Burst > 0 {
			return l.Burst
		}
	case GCRA:
		if l.Burst > 0 {
			return l.Burst
		}
		return 1
	}
	return l.Limit
}

// buckets is the effective bucket count of a sliding counter.
func (l Limit) buckets() int {
	if l.Buckets == 0 {
		return int(DefaultBucketsFor(l.Window))
	}
	return int(l.Buckets)
}

// DefaultBucketsFor is the bucket count of a sliding counter over window
// (nanoseconds) when none is asked for: DefaultBuckets if they divide it,
// else the most below that do. A second does not divide into 60 buckets
// and gets 50, so any window asked for in milliseconds (a multiple of
// 10^6 ns) has 50 or more; refusing it instead would make every caller
// of a one-second sliding counter learn the bucket rule. For windows 60
// divides it is 60, as before, so no counted state changes identity.
func DefaultBucketsFor(window int64) int32 {
	n := int64(DefaultBuckets)
	for n > 1 && window%n != 0 {
		n--
	}
	return int32(n)
}

// String names the algorithm as the API spells it.
func (a Algorithm) String() string {
	switch a {
	case SlidingLog:
		return "sliding_log"
	case SlidingCounter:
		return "sliding_counter"
	case SlidingCounterWeighted:
		return "sliding_counter_weighted"
	case FixedWindow:
		return "fixed_window"
	case TokenBucket:
		return "token_bucket"
	case GCRA:
		return "gcra"
	}
	return fmt.Sprintf("algorithm(%d)", uint8(a))
}

// String names the calendar unit as the API spells it.
func (u Unit) String() string {
	switch u {
	case CalendarNone:
		return "none"
	case CalendarMinute:
		return "minute"
	case CalendarHour:
		return "hour"
	case CalendarDay:
		return "day"
	case CalendarWeek:
		return "week"
	case CalendarMonth:
		return "month"
	case CalendarYear:
		return "year"
	}
	return fmt.Sprintf("unit(%d)", uint8(u))
}
