package window

import (
	"encoding/binary"
	"fmt"
	"math"
	"slices"
)

// State encoding, version 1: the version byte, then by algorithm
//
//	sliding log       count, then if count > 0: the oldest timestamp and
//	                  the count-1 gaps to each next one
//	sliding counters  n (0: nothing counted), then if n > 0: the newest
//	                  counted bucket's index and n counts, newest first, to
//	                  the oldest counted bucket
//	fixed window      count, then if count > 0: the period's end
//	token bucket/GCRA TAT's nanoseconds, TAT's fraction numerator
//
// every number a uvarint. It depends only on what the state means, never
// on ring capacity or position, and decoding accepts only what encoding
// produces (minimal varints, no zero counts at either end of a counter's
// buckets), so decode and re-encode is byte-identical.
//
// Decoding needs only the fields that shape a State (Algorithm, Window,
// Buckets, Calendar), not Limit or Burst: snapshots identify a state by
// its shape, so a changed limit value keeps its counts.
const stateVersion = 1

func appendState(l *Limit, dst []byte, s *State) []byte {
	dst = append(dst, stateVersion)
	switch l.Algorithm {
	case SlidingLog:
		r := loadLog(s)
		dst = binary.AppendUvarint(dst, uint64(r.n))
		prev := int64(0)
		for i := 0; i < r.n; i++ {
			t := r.at(i)
			dst = binary.AppendUvarint(dst, uint64(t-prev))
			prev = t
		}
	case SlidingCounter, SlidingCounterWeighted:
		if s.P == nil {
			return append(dst, 0)
		}
		sh := shapeOf(l)
		slots := sh.slots(s)
		// Trim empty buckets at both ends; A is normally the newest
		// counted one already.
		newest, oldest := s.A, max(s.A-sh.k+1, 0)
		for newest >= oldest && slots[newest%sh.k] == 0 {
			newest--
		}
		for oldest <= newest && slots[oldest%sh.k] == 0 {
			oldest++
		}
		if newest < oldest {
			return append(dst, 0)
		}
		dst = binary.AppendUvarint(dst, uint64(newest-oldest+1))
		dst = binary.AppendUvarint(dst, uint64(newest))
		for i := newest; i >= oldest; i-- {
			dst = binary.AppendUvarint(dst, uint64(slots[i%sh.k]))
		}
	case FixedWindow:
		if s.B <= 0 {
			return append(dst, 0)
		}
		dst = binary.AppendUvarint(dst, uint64(s.B))
		dst = binary.AppendUvarint(dst, uint64(s.A))
	case TokenBucket, GCRA:
		dst = binary.AppendUvarint(dst, uint64(s.A))
		dst = binary.AppendUvarint(dst, uint64(s.B))
	}
	return dst
}

func decodeState(l *Limit, src []byte) (State, int, error) {
	if err := l.shapeErr(); err != nil {
		return State{}, 0, err
	}
	d := decoder{src: src}
	if v := d.byte(); d.err == nil && v > stateVersion {
		return State{}, 0, fmt.Errorf("%w: %w: state version %d, this binary reads up to %d", ErrCorrupt, ErrNewerVersion, v, stateVersion)
	} else if d.err == nil && v != stateVersion {
		return State{}, 0, fmt.Errorf("%w: unknown state version %d", ErrCorrupt, v)
	}
	var s State
	switch l.Algorithm {
	case SlidingLog:
		s = d.log()
	case SlidingCounter, SlidingCounterWeighted:
		s = d.counter(shapeOf(l))
	case FixedWindow:
		if count := d.int("count"); count > 0 {
			end := d.int("period end")
			if d.err == nil && !fixedBoundary(l, end) {
				d.fail("%d does not end a %s period", end, l.period())
			}
			s = State{A: end, B: count}
		}
	case TokenBucket, GCRA:
		s.A = d.int("arrival time")
		// The fraction is below the Limit it was recorded under.
		if s.B = d.int("arrival fraction"); s.B >= MaxLimit {
			d.fail("arrival fraction %d is not below %d", s.B, MaxLimit)
		}
	}
	if d.err != nil {
		return State{}, 0, d.err
	}
	return s, d.off, nil
}

// log decodes a sliding log's timestamps into a ring of their own size.
func (d *decoder) log() State {
	n := d.int("count")
	// Every timestamp takes at least a byte: a count beyond what is left
	// is corrupt, and checking it first bounds the allocation.
	if d.err != nil || n == 0 {
		return State{}
	}
	if n > MaxLimit || n > int64(len(d.src)-d.off) {
		d.fail("%d timestamps in %d bytes", n, len(d.src)-d.off)
		return State{}
	}
	buf := slices.Grow([]int64(nil), int(n))
	buf = buf[:cap(buf)]
	t := int64(0)
	for i := range int(n) {
		gap := d.int("timestamp")
		if gap > math.MaxInt64-t {
			d.fail("timestamp overflows")
		}
		if d.err != nil {
			return State{}
		}
		t += gap
		buf[i] = t
	}
	r := logRing{buf: buf, n: int(n)}
	var s State
	r.store(&s)
	return s
}

// counter decodes a sliding counter's buckets.
func (d *decoder) counter(sh counterShape) State {
	n := d.int("bucket count")
	if d.err != nil || n == 0 {
		return State{}
	}
	if n > sh.k {
		d.fail("%d buckets, at most %d", n, sh.k)
		return State{}
	}
	newest := d.int("newest bucket")
	if d.err == nil && (newest < n-1 || newest > math.MaxInt64/sh.b) {
		d.fail("newest bucket %d out of range", newest)
	}
	if d.err != nil {
		return State{}
	}
	buf := make([]int64, sh.words())
	s := State{P: &buf[0], A: newest}
	slots := sh.slots(&s)
	for i := newest; i > newest-n; i-- {
		c := d.int("bucket")
		switch {
		case c > math.MaxUint32:
			d.fail("bucket count %d overflows", c)
		case c == 0 && (i == newest || i == newest-n+1):
			d.fail("empty bucket at an end of the counted range")
		}
		if d.err != nil {
			return State{}
		}
		slots[i%sh.k] = uint32(c)
		s.B += c
	}
	return s
}

// shapeErr reports why l cannot shape a State: the checks of Validate on
// the fields DecodeState relies on (the ones that make up a state's
// identity), so garbage cannot make it divide by zero.
func (l *Limit) shapeErr() error {
	switch l.Algorithm {
	case SlidingLog, TokenBucket, GCRA:
		return nil
	case SlidingCounter, SlidingCounterWeighted:
		if n := l.buckets(); n < 1 || n > MaxBuckets || l.Window <= 0 || l.Window%int64(n) != 0 {
			return fmt.Errorf("%w: buckets: window %d does not divide into %d buckets", ErrInvalid, l.Window, n)
		}
		return nil
	case FixedWindow:
		if l.Calendar == CalendarNone && l.Window <= 0 {
			return fmt.Errorf("%w: window: must be more than 0, got %d", ErrInvalid, l.Window)
		}
		if l.Calendar > CalendarYear {
			return fmt.Errorf("%w: calendar: unknown calendar unit %d", ErrInvalid, l.Calendar)
		}
		return nil
	}
	return fmt.Errorf("%w: algorithm: unknown algorithm %d", ErrInvalid, l.Algorithm)
}

// period names a fixed window's period for error messages.
func (l *Limit) period() string {
	if l.Calendar != CalendarNone {
		return l.Calendar.String()
	}
	return fmt.Sprintf("%dns", l.Window)
}

// decoder reads minimal uvarints, remembering the first error so call sites
// stay linear.
type decoder struct {
	src []byte
	off int
	err error
}

func (d *decoder) fail(format string, args ...any) {
	if d.err == nil {
		d.err = fmt.Errorf("%w: %s", ErrCorrupt, fmt.Sprintf(format, args...))
	}
}

func (d *decoder) byte() byte {
	if d.err != nil {
		return 0
	}
	if d.off >= len(d.src) {
		d.fail("truncated")
		return 0
	}
	b := d.src[d.off]
	d.off++
	return b
}

// int reads a uvarint that must fit an int64, in its shortest encoding.
func (d *decoder) int(what string) int64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.src[d.off:])
	switch {
	case n == 0:
		d.fail("%s: truncated", what)
	case n < 0 || v > math.MaxInt64:
		d.fail("%s: overflows", what)
	case n > 1 && d.src[d.off+n-1] == 0:
		d.fail("%s: non-minimal varint", what)
	}
	if d.err != nil {
		return 0
	}
	d.off += n
	return int64(v)
}
