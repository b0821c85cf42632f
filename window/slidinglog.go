package window

import (
	"slices"
	"unsafe"
)

// A sliding log keeps one timestamp per unit of recorded cost, oldest
// first, in a ring buffer:
//
//	P  the ring's first element (nil when the log is empty)
//	A  the ring index of the oldest timestamp
//	B  count | capacity<<32 (both below 2^32: count <= Limit <= MaxLimit)
//
// Time never goes backwards for a State, so timestamps never decrease along
// the ring and the ones still inside the window are a suffix, found by
// binary search. The log holds at most Limit timestamps: once the newest
// Limit are all inside the window every request is denied anyway, so
// recording beyond that drops the oldest. The ring grows by about a quarter
// at a time (at least 4 slots), up to Limit, to the full size of the
// allocator's size class, so a key costs close to 8 bytes per timestamp it
// actually holds; it shrinks once it holds a quarter of that or less, and
// is freed once every timestamp has aged out.

// logRing is a decoded view of a sliding log's State.
type logRing struct {
	buf  []int64 // the whole ring, len = capacity
	head int     // index of the oldest timestamp
	n    int     // timestamps held
}

func loadLog(s *State) logRing {
	if s.P == nil {
		return logRing{}
	}
	return logRing{
		buf:  unsafe.Slice(s.P, int(uint64(s.B)>>32)),
		head: int(s.A),
		n:    int(uint32(s.B)),
	}
}

// store writes r back into s, freeing the buffer when r is empty and
// shrinking it when r holds a quarter of it or less: a key that once held
// many timestamps (a large cost, a limit lowered, a burst) and then a few
// kept the whole ring, up to 8 bytes per unit of Limit, as long as it
// stayed in use.
func (r *logRing) store(s *State) {
	if r.n == 0 {
		*s = State{}
		return
	}
	if len(r.buf) >= minShrink && r.n <= len(r.buf)/4 {
		r.realloc(r.n + max(r.n/4, 4))
	}
	s.P = &r.buf[0]
	s.A = int64(r.head)
	s.B = int64(r.n) | int64(len(r.buf))<<32
}

// at is the i-th oldest timestamp, 0 <= i < n.
func (r *logRing) at(i int) int64 {
	j := r.head + i
	if j >= len(r.buf) {
		j -= len(r.buf)
	}
	return r.buf[j]
}

// aged counts the oldest timestamps at or before cutoff: those out of a
// window ending at cutoff+Window.
func (r *logRing) aged(cutoff int64) int {
	if r.n == 0 || r.at(0) > cutoff {
		return 0 // the common case, one probe
	}
	lo, hi := 1, r.n
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if r.at(m) <= cutoff {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo
}

// drop forgets the k oldest timestamps.
func (r *logRing) drop(k int) {
	r.n -= k
	if r.n == 0 {
		r.head = 0
		return
	}
	r.head += k
	if r.head >= len(r.buf) {
		r.head -= len(r.buf)
	}
}

// grow reallocates the ring to hold at least need timestamps, oldest at
// index 0. limit caps the growth, not need.
func (r *logRing) grow(need, limit int) {
	// A new log starts at exactly what it needs (most keys see one request
	// and never grow); after that it grows by a quarter, at least 4.
	size := need
	if len(r.buf) > 0 {
		size = max(min(len(r.buf)+max(len(r.buf)/4, 4), limit), need)
	}
	r.realloc(size)
}

// minShrink is the smallest ring store shrinks: below it, the copy costs
// more than the few bytes it frees.
const minShrink = 16

// realloc moves the ring to a new buffer of at least size (>= n) slots,
// oldest at index 0.
func (r *logRing) realloc(size int) {
	// slices.Grow rounds the capacity up to the allocator's size class:
	// those slots are allocated anyway, so use them.
	buf := slices.Grow([]int64(nil), size)
	buf = buf[:cap(buf)]
	for i := 0; i < r.n; i++ {
		buf[i] = r.at(i)
	}
	r.buf, r.head = buf, 0
}

// logCheck answers a request against a sliding log.
func logCheck(l *Limit, s *State, now, cost int64) Decision {
	r := loadLog(s)
	if r.n == 0 {
		return decide(l.Limit, 0, cost, now, now)
	}
	newest := r.at(r.n - 1)
	asked := now
	now = max(now, newest)
	if k := r.aged(now - l.Window); k > 0 {
		r.drop(k)
		r.store(s)
		if r.n == 0 {
			return decide(l.Limit, 0, cost, now, now)
		}
	}
	used := int64(r.n)
	d := decide(l.Limit, used, cost, now, satAdd(newest, l.Window))
	if !d.Allowed && fits(l.Limit, cost) {
		// The cost fits once all but Limit-cost timestamps have aged out:
		// wait for the need-th oldest to leave the window.
		need := used - (l.Limit - max(cost, 1))
		d.RetryAfter = r.at(int(need-1)) + l.Window - now
	}
	return waitFrom(d, now, asked)
}

// logRecord appends cost copies of now to the log.
func logRecord(l *Limit, s *State, now, cost int64) {
	r := loadLog(s)
	if r.n > 0 {
		now = max(now, r.at(r.n-1))
		r.drop(r.aged(now - l.Window))
	}
	limit := int(l.Limit)
	c := int(min(cost, l.Limit))
	if over := r.n + c - limit; over > 0 {
		r.drop(min(over, r.n))
	}
	if r.n+c > len(r.buf) {
		r.grow(r.n+c, limit)
	}
	for ; c > 0; c-- {
		j := r.head + r.n
		if j >= len(r.buf) {
			j -= len(r.buf)
		}
		r.buf[j] = now
		r.n++
	}
	r.store(s)
}

// logExpiry is when the newest timestamp leaves the window.
func logExpiry(l *Limit, s *State) int64 {
	r := loadLog(s)
	if r.n == 0 {
		return 0
	}
	return satAdd(r.at(r.n-1), l.Window)
}

// logHeapBytes is the size of the ring.
func logHeapBytes(_ *Limit, s *State) int {
	return 8 * len(loadLog(s).buf)
}

// logHeapBound is the ring logRecord may leave at now or later: the one
// s has when the cost fits in it beside the timestamps still in the
// window at now (those aged out by then are dropped first, and more age
// out later), else the one grow makes for it, as the allocator may round
// it up.
func logHeapBound(l *Limit, s *State, now, cost int64) int {
	r := loadLog(s)
	held := r.n
	if r.n > 0 {
		held -= r.aged(max(now, r.at(r.n-1)) - l.Window)
	}
	limit := int(l.Limit)
	need := min(held+int(min(max(cost, 0), l.Limit)), limit)
	if need <= len(r.buf) {
		return 8 * len(r.buf)
	}
	size := need
	if len(r.buf) > 0 {
		size = max(min(len(r.buf)+max(len(r.buf)/4, 4), limit), need)
	}
	return allocBound(8 * size)
}
