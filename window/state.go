package window

// State is the per-key state of one Limit. The zero State is a fresh key.
// Every algorithm uses the same 24-byte shape so the FSM can keep states in
// flat records: A and B are two integers whose meaning depends on the
// algorithm, and P points at the first element of a variable-size buffer
// (the sliding log's timestamps, the sliding counters' buckets), nil for the
// counter algorithms. The buffer's length is recoverable from A, B and the
// Limit, never stored separately.
type State struct {
	A, B int64
	P    *int64
}

// Decision is the answer of a Limit to one request.
type Decision struct {
	// Allowed reports whether the cost fits. A peek (cost 0) is allowed when
	// a request of cost 1 would be.
	Allowed bool
	// Remaining is the cost still admissible in the window after this
	// request (counting it when Allowed and cost > 0).
	Remaining int64
	// ResetAt is when the state will be back to full capacity, in Unix
	// nanoseconds, if nothing more is counted.
	ResetAt int64
	// RetryAfter is, when not Allowed, how long (ns) until the same cost
	// would be admitted if nothing more is counted; 0 when Allowed.
	RetryAfter int64
}

// Check evaluates a request of cost at time now against s without counting
// it. It may drop parts of s that have aged out of the window (that never
// changes a later answer) but never allocates. now must not go backwards
// for a given State; callers guarantee it (the FSM clamps log time). Should
// it anyway, nothing breaks: the sliding algorithms answer as at the newest
// time they hold (a denial's RetryAfter still counts from now) and a fixed
// window keeps counting its period. l must be
// valid (Validate). Times before the epoch count as the epoch and a
// negative cost as a peek.
//
// A cost above l.Capacity() can never be admitted (ValidateCost rejects
// it): it is denied with RetryAfter the time until the state is back to
// full capacity, at least 1ns.
func (l *Limit) Check(s *State, now, cost int64) Decision {
	now, cost = max(now, 0), max(cost, 0)
	switch l.Algorithm {
	case SlidingLog:
		return logCheck(l, s, now, cost)
	case SlidingCounter, SlidingCounterWeighted:
		return counterCheck(l, s, now, cost)
	case FixedWindow:
		return fixedCheck(l, s, now, cost)
	case TokenBucket, GCRA:
		return bucketCheck(l, s, now, cost)
	}
	return Decision{}
}

// Record counts cost at time now in s, whether or not Check admitted it
// (policies that count denied requests record them too). Recording more than
// the limit is allowed and saturates rather than overflowing.
func (l *Limit) Record(s *State, now, cost int64) {
	if cost <= 0 {
		return
	}
	now = max(now, 0)
	switch l.Algorithm {
	case SlidingLog:
		logRecord(l, s, now, cost)
	case SlidingCounter, SlidingCounterWeighted:
		counterRecord(l, s, now, cost)
	case FixedWindow:
		fixedRecord(l, s, now, cost)
	case TokenBucket, GCRA:
		bucketRecord(l, s, now, cost)
	}
}

// Expiry is the first time at which s behaves exactly like the zero State,
// so the FSM may drop it. A zero State expires at once (returns 0).
func (l *Limit) Expiry(s *State) int64 {
	switch l.Algorithm {
	case SlidingLog:
		return logExpiry(l, s)
	case SlidingCounter, SlidingCounterWeighted:
		return counterExpiry(l, s)
	case FixedWindow:
		return fixedExpiry(l, s)
	case TokenBucket, GCRA:
		return bucketExpiry(l, s)
	}
	return 0
}

// HeapBytes is the heap memory held by s's buffer, for memory accounting.
func (l *Limit) HeapBytes(s *State) int {
	switch l.Algorithm {
	case SlidingLog:
		return logHeapBytes(l, s)
	case SlidingCounter, SlidingCounterWeighted:
		return counterHeapBytes(l, s)
	}
	return 0
}

// HeapBound is the most HeapBytes(s) can be after Record(s, t, cost), at
// any t at or after now: what a check may make a state hold, judged
// before it is made (the FSM bounds a group's bytes with it). s is not
// changed.
func (l *Limit) HeapBound(s *State, now, cost int64) int {
	switch l.Algorithm {
	case SlidingLog:
		return logHeapBound(l, s, now, cost)
	case SlidingCounter, SlidingCounterWeighted:
		return 8 * shapeOf(l).words()
	}
	return 0
}

// HeapMax is the most HeapBytes can ever be for a state of l, whatever it
// records: a sliding log's ring at l.Limit timestamps, a counter's
// buckets.
func (l *Limit) HeapMax() int {
	switch l.Algorithm {
	case SlidingLog:
		return allocBound(8 * int(l.Limit))
	case SlidingCounter, SlidingCounterWeighted:
		return 8 * shapeOf(l).words()
	}
	return 0
}

// allocBound is the most the allocator hands out for a request of b
// bytes: a small object gets its size class, at most a quarter more than
// b past the smallest classes (which are 16 bytes apart at most); a large
// one whole 8 KiB pages. TestHeapBoundCoversTheAllocator checks it against
// the allocator, size by size.
func allocBound(b int) int {
	if b <= 32<<10 {
		return b + b/4 + 16
	}
	return (b + 8<<10 - 1) &^ (8<<10 - 1)
}

// AppendState appends the canonical encoding of s to dst: it depends only on
// what s means (never on buffer capacity or ring position), so two replicas
// that applied the same log, or one restored from the other's snapshot,
// encode byte for byte alike.
func (l *Limit) AppendState(dst []byte, s *State) []byte {
	return appendState(l, dst, s)
}

// DecodeState decodes a State that AppendState encoded for the same Limit
// and returns it with the number of bytes read. It uses only the fields
// that shape a State (Algorithm, Window, Buckets, Calendar), so a snapshot
// that identifies states by shape decodes without the limit's value.
// Errors wrap ErrCorrupt (bad bytes; it never panics) or ErrInvalid (a
// Limit that cannot shape a State).
func (l *Limit) DecodeState(src []byte) (State, int, error) {
	return decodeState(l, src)
}
