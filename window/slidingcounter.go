package window

import (
	"math"
	"unsafe"
)

// The sliding counters split Window into N buckets of b = Window/N ns;
// bucket i covers [i·b, (i+1)·b). At now, in bucket cur = now/b, the plain
// counter uses the buckets (cur-N, cur]; the weighted one adds bucket cur-N
// weighted by the part of it still inside [now-Window, now]:
// ceil(count·(b-o)/b) with o = now mod b, rounded up so it never
// under-counts. Their State:
//
//	P  K uint32 counts, two per int64 element, bucket i in slot i mod K,
//	   where K = N (plain) or N+1 (weighted); nil when nothing is counted
//	A  the newest bucket with a count: the ring holds buckets (A-K, A]
//	B  the sum of all K slots, so a Check in the newest bucket is O(1)
//
// Counts saturate at math.MaxUint32, far above MaxLimit. Buckets before 0
// (before the epoch) are never counted; their slots read as zero.

// counterShape is the bucket layout of a sliding counter Limit.
type counterShape struct {
	b        int64 // bucket length, ns
	n        int64 // buckets inside the window
	k        int64 // buckets stored: n, plus the weighted one
	weighted bool
}

func shapeOf(l *Limit) counterShape {
	n := int64(l.buckets())
	sh := counterShape{b: l.Window / n, n: n, k: n, weighted: l.Algorithm == SlidingCounterWeighted}
	if sh.weighted {
		sh.k++
	}
	return sh
}

// words is the buffer length in int64 elements.
func (sh counterShape) words() int {
	return int(sh.k+1) / 2
}

// slots views s's buffer as the K bucket counts.
func (sh counterShape) slots(s *State) []uint32 {
	return unsafe.Slice((*uint32)(unsafe.Pointer(s.P)), int(sh.k))
}

// count is the count of bucket i of a ring whose newest bucket is a.
func (sh counterShape) count(slots []uint32, a, i int64) uint64 {
	if i < 0 || i > a || i <= a-sh.k {
		return 0
	}
	return uint64(slots[i%sh.k])
}

// weight is ceil(x·(b-o)/b), the part of a count x in the bucket sliding
// out of the window that still overlaps it, o ns into the current bucket.
func (sh counterShape) weight(x uint64, o int64) int64 {
	if x == 0 {
		return 0
	}
	q, r, _ := mulDiv(x, uint64(sh.b-o), uint64(sh.b)) // q <= x < 2^32
	if r > 0 {
		q++
	}
	return int64(q)
}

// counterCheck answers a request against a sliding counter.
func counterCheck(l *Limit, s *State, now, cost int64) Decision {
	if s.P == nil {
		return decide(l.Limit, 0, cost, now, now)
	}
	sh := shapeOf(l)
	cur, asked := now/sh.b, now
	if cur < s.A {
		cur, now = s.A, s.A*sh.b
	}
	if cur-s.A >= sh.k {
		*s = State{} // every count has aged out: free the buffer
		return decide(l.Limit, 0, cost, now, now)
	}
	slots := sh.slots(s)
	// S: the buckets (cur-N, A], the cached total less those that left
	// (A-K, cur-N] (for the weighted counter that includes bucket cur-N,
	// which is added back weighted).
	sum := s.B
	for i := max(s.A-sh.k+1, 0); i <= cur-sh.n; i++ {
		sum -= int64(slots[i%sh.k])
	}
	o := now - cur*sh.b
	used, x := sum, uint64(0)
	if sh.weighted {
		x = sh.count(slots, s.A, cur-sh.n)
		used += sh.weight(x, o)
	}
	d := decide(l.Limit, used, cost, now, satAdd(s.A*sh.b, sh.k*sh.b))
	if !d.Allowed && fits(l.Limit, cost) {
		d.RetryAfter = sh.retry(slots, s.A, cur, o, sum, x, l.Limit-max(cost, 1))
	}
	return waitFrom(d, now, asked)
}

// retry is the least d > 0 such that, with nothing more counted, at most
// room is used at now+d (now = cur·b + o). sum and x are S and the
// weighted bucket's count at now. Bucket by bucket from cur, S only falls
// (the bucket leaving it becomes the weighted one) and within a bucket the
// weighted part falls as o grows, so the first bucket where S <= room and
// the weighted part can shrink to room-S holds the answer.
func (sh counterShape) retry(slots []uint32, a, cur, o, sum int64, x uint64, room int64) int64 {
	now := cur*sh.b + o
	for c := cur; c <= a+sh.k; c++ {
		if c > cur {
			x = sh.count(slots, a, c-sh.n)
			sum -= int64(x)
		}
		if sum > room {
			continue
		}
		if !sh.weighted {
			if c > cur {
				return c*sh.b - now
			}
			continue
		}
		lo := int64(0)
		if c == cur {
			lo = o + 1
		}
		// ceil(x·(b-o')/b) <= r  <=>  x·(b-o') <= r·b  <=>  o' >= b - floor(r·b/x)
		at := lo
		if r := uint64(room - sum); x > r {
			q, _, _ := mulDiv(r, uint64(sh.b), x) // r < x, so q < b
			at = max(at, sh.b-int64(q))
		}
		if at < sh.b {
			return c*sh.b + at - now
		}
	}
	// Unreachable for room >= 0: at bucket A+K nothing is counted.
	return max(satAdd(a*sh.b, sh.k*sh.b)-now, 1)
}

// counterRecord adds cost to now's bucket, rotating out the buckets that
// left the ring since the newest one.
func counterRecord(l *Limit, s *State, now, cost int64) {
	sh := shapeOf(l)
	cur := now / sh.b
	if s.P == nil {
		buf := make([]int64, sh.words())
		s.P, s.A, s.B = &buf[0], cur, 0
	}
	slots := sh.slots(s)
	switch {
	case cur < s.A:
		cur = s.A // time went backwards: count it in the newest bucket
	case cur-s.A >= sh.k:
		clear(slots) // everything aged out: reuse the buffer
		s.B = 0
	default:
		// Count the steps, not the index: i <= cur always holds for cur
		// = math.MaxInt64 (1ns buckets at the end of time).
		for j := int64(1); j <= cur-s.A; j++ {
			i := (s.A + j) % sh.k
			s.B -= int64(slots[i])
			slots[i] = 0
		}
	}
	s.A = cur
	slot := &slots[cur%sh.k]
	n := min(uint64(*slot)+uint64(cost), math.MaxUint32)
	s.B += int64(n) - int64(*slot)
	*slot = uint32(n)
}

// counterExpiry is when the newest bucket leaves the ring.
func counterExpiry(l *Limit, s *State) int64 {
	if s.P == nil {
		return 0
	}
	sh := shapeOf(l)
	return satAdd(s.A*sh.b, sh.k*sh.b)
}

// counterHeapBytes is the size of the bucket buffer.
func counterHeapBytes(l *Limit, s *State) int {
	if s.P == nil {
		return 0
	}
	return 8 * shapeOf(l).words()
}
