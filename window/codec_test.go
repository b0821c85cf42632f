package window

import (
	"bytes"
	"errors"
	"math"
	"math/rand/v2"
	"testing"
)

// codecLimits covers every algorithm and state shape.
func codecLimits() []Limit {
	return []Limit{
		{Algorithm: SlidingLog, Limit: 20, Window: 100},
		{Algorithm: SlidingCounter, Limit: 20, Window: 100, Buckets: 4},
		{Algorithm: SlidingCounterWeighted, Limit: 20, Window: 100, Buckets: 4},
		{Algorithm: SlidingCounterWeighted, Limit: MaxLimit, Window: MaxWindow, Buckets: 1},
		{Algorithm: FixedWindow, Limit: 20, Window: 100},
		{Algorithm: FixedWindow, Limit: 20, Calendar: CalendarMonth},
		{Algorithm: FixedWindow, Limit: 20, Calendar: CalendarWeek},
		{Algorithm: TokenBucket, Limit: 7, Window: 100, Burst: 20},
		{Algorithm: GCRA, Limit: 7, Window: 100, Burst: 3},
	}
}

// Encodings are compact and canonical: the same meaning gives the same
// bytes whatever the ring's position and capacity.
func TestEncodingCanonical(t *testing.T) {
	l := Limit{Algorithm: SlidingLog, Limit: 4, Window: 100}
	var a, b State
	// a's ring has wrapped and grown; b was built at once.
	for i := range int64(9) {
		l.Record(&a, 10*i, 1)
	}
	l.Record(&b, 50, 1)
	l.Record(&b, 60, 1)
	l.Record(&b, 70, 1)
	l.Record(&b, 80, 1)
	ea, eb := l.AppendState(nil, &a), l.AppendState(nil, &b)
	if !bytes.Equal(ea, eb) {
		t.Fatalf("same log, different encodings: %x, %x", ea, eb)
	}
	// version, count 4, first 50, gaps of 10.
	if want := []byte{stateVersion, 4, 50, 10, 10, 10}; !bytes.Equal(ea, want) {
		t.Fatalf("encoding %x, want %x", ea, want)
	}

	// A counter's encoding trims empty buckets at both ends.
	c := Limit{Algorithm: SlidingCounter, Limit: 20, Window: 100, Buckets: 4}
	var s State
	c.Record(&s, 60, 2)  // bucket 2
	c.Record(&s, 80, 3)  // bucket 3
	c.Record(&s, 130, 1) // bucket 5; bucket 4 is empty, 2 is still in the ring
	if got, want := c.AppendState(nil, &s), []byte{stateVersion, 4, 5, 1, 0, 3, 2}; !bytes.Equal(got, want) {
		t.Fatalf("counter encoding %x, want %x", got, want)
	}
	for _, l := range codecLimits() {
		var z State
		if got := l.AppendState(nil, &z); len(got) > 3 {
			t.Errorf("%s: a zero state takes %d bytes", l.Algorithm, len(got))
		}
	}
}

func TestDecodeStateErrors(t *testing.T) {
	log := codecLimits()[0]
	counter := codecLimits()[1]
	month := codecLimits()[5]
	bucket := codecLimits()[7]
	for _, tc := range []struct {
		name string
		l    Limit
		src  []byte
	}{
		{"empty", log, nil},
		{"unknown version", log, []byte{2, 0}},
		{"truncated", log, []byte{stateVersion, 3, 1, 1}},
		{"count beyond the bytes", log, []byte{stateVersion, 0xff, 0xff, 0x03, 0}},
		{"non-minimal varint", log, []byte{stateVersion, 0x81, 0x00, 5}},
		{"timestamp overflow", log, []byte{stateVersion, 2, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f, 1}},
		{"varint beyond int64", bucket, []byte{stateVersion, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01, 0}},
		{"too many buckets", counter, []byte{stateVersion, 5, 9, 1, 1, 1, 1, 1}},
		{"bucket before the epoch", counter, []byte{stateVersion, 3, 1, 1, 1, 1}},
		{"empty newest bucket", counter, []byte{stateVersion, 2, 5, 0, 1}},
		{"empty oldest bucket", counter, []byte{stateVersion, 2, 5, 1, 0}},
		{"bucket count overflow", counter, []byte{stateVersion, 1, 5, 0x80, 0x80, 0x80, 0x80, 0x10}},
		{"not a period end", month, []byte{stateVersion, 1, 7}},
		{"fraction too big", bucket, []byte{stateVersion, 5, 0x80, 0x94, 0xeb, 0xdc, 0x03}},
	} {
		if _, _, err := tc.l.DecodeState(tc.src); !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s: %v, want ErrCorrupt", tc.name, err)
		}
	}
	// A Limit that cannot shape a state is invalid, not the bytes.
	bad := Limit{Algorithm: SlidingCounter, Window: 10, Buckets: 3}
	if _, _, err := bad.DecodeState([]byte{stateVersion, 0}); !errors.Is(err, ErrInvalid) {
		t.Errorf("invalid shape: %v, want ErrInvalid", err)
	}
}

// FuzzDecodeState: DecodeState never panics, fails only with ErrCorrupt,
// accepts only canonical encodings (re-encoding gives the same bytes), and
// whatever it accepts is safe to use.
func FuzzDecodeState(f *testing.F) {
	rng := rand.New(rand.NewPCG(3, 3))
	for i, l := range codecLimits() {
		var s State
		now := rng.Int64N(1000)
		for range 30 {
			now += rng.Int64N(30)
			l.Record(&s, now, rng.Int64N(3)+1)
			f.Add(uint8(i), l.AppendState(nil, &s))
		}
	}
	limits := codecLimits()
	f.Fuzz(func(t *testing.T, which uint8, src []byte) {
		l := limits[int(which)%len(limits)]
		s, n, err := l.DecodeState(src)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("error %v is not ErrCorrupt", err)
			}
			return
		}
		if n < 1 || n > len(src) {
			t.Fatalf("read %d of %d bytes", n, len(src))
		}
		if re := l.AppendState(nil, &s); !bytes.Equal(re, src[:n]) {
			t.Fatalf("decoded %x, re-encoded %x", src[:n], re)
		}
		// Whatever was accepted is safe to use, up to the end of time.
		for i, now := range []int64{0, 37, 1 << 62, math.MaxInt64 - MaxWindow, math.MaxInt64} {
			l.Check(&s, now, int64(i))
			l.Record(&s, now, int64(i)+1)
			l.Check(&s, now, MaxLimit)
			_ = l.Expiry(&s)
			_ = l.HeapBytes(&s)
		}
	})
}
