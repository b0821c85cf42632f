package policy_test

import (
	"bytes"
	"encoding/binary"
	"reflect"
	"testing"

	"github.com/floodgate/floodgate/policy"
	"github.com/floodgate/floodgate/test/fuzzseed"
)

// decodeSeeds are encodings of valid policies, their truncations, a
// version bump, and counts and lengths far beyond the input.
func decodeSeeds(t testing.TB) []fuzzseed.Seed {
	var seeds []fuzzseed.Seed
	for i, p := range fuzzseed.Policies() {
		if err := p.Validate(0); err != nil {
			t.Fatalf("sample policy %d is invalid: %v", i, err)
		}
		b := p.AppendBinary(nil)
		name := "valid-" + p.Name
		if p.Name == "" {
			name = "valid-inline"
		}
		seeds = append(seeds, fuzzseed.Seed{Name: name, Data: b})
		if i == 1 || i == 6 {
			seeds = append(seeds, fuzzseed.Truncations(name, b, 3)...)
		}
	}
	api := fuzzseed.Policies()[1].AppendBinary(nil)
	bumped := append([]byte{2}, api[1:]...)
	huge := binary.AppendUvarint(nil, 1<<62)
	seeds = append(seeds,
		fuzzseed.Seed{Name: "version-2", Data: bumped},
		fuzzseed.Seed{Name: "empty", Data: nil},
		// A name longer than the input.
		fuzzseed.Seed{Name: "name-length-huge", Data: append([]byte{1}, huge...)},
		// Counts of key_by descriptors and limits far beyond the input.
		fuzzseed.Seed{Name: "keyby-count-huge", Data: append([]byte{1, 0, 0, 0, 0, 0, 0, 0}, huge...)},
		fuzzseed.Seed{Name: "limit-count-huge", Data: append([]byte{1, 0, 0, 0, 0, 0, 0, 0, 0}, huge...)},
		// One limit whose buckets do not fit an int32.
		fuzzseed.Seed{Name: "buckets-overflow", Data: []byte{1, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 2, 0, 10, 60, 0x80, 0x80, 0x80, 0x80, 0x08, 0}},
	)
	return seeds
}

// FuzzDecode: any input either fails to decode, or decodes to a policy
// whose encoding decodes to the same policy (and re-encodes to the same
// bytes); decoding reads no more than the input and allocates in
// proportion to it.
func FuzzDecode(f *testing.F) {
	fuzzseed.Add(f, decodeSeeds(f))
	f.Fuzz(func(t *testing.T, data []byte) {
		var (
			p   policy.Policy
			n   int
			err error
		)
		fuzzseed.CheckAllocs(t, data, 256<<10, 64, func() { p, n, err = policy.Decode(data) })
		if err != nil {
			if n != 0 {
				t.Fatalf("error %v with %d bytes read", err, n)
			}
			return
		}
		if n <= 0 || n > len(data) {
			t.Fatalf("read %d bytes of %d", n, len(data))
		}
		enc := p.AppendBinary(nil)
		q, m, err := policy.Decode(enc)
		if err != nil {
			t.Fatalf("re-encoding of %+v does not decode: %v", p, err)
		}
		if m != len(enc) {
			t.Fatalf("re-encoding decoded %d of %d bytes", m, len(enc))
		}
		if !reflect.DeepEqual(p, q) {
			t.Fatalf("decode(encode(p)) = %+v, want %+v", q, p)
		}
		if again := q.AppendBinary(nil); !bytes.Equal(again, enc) {
			t.Fatalf("encoding is not stable: %x then %x", enc, again)
		}
		// Trailing bytes are the caller's: decoding a longer buffer reads
		// the same policy.
		r, k, err := policy.Decode(append(enc[:len(enc):len(enc)], 0xff))
		if err != nil || k != len(enc) || !reflect.DeepEqual(r, p) {
			t.Fatalf("with a trailing byte: %+v, %d, %v", r, k, err)
		}
	})
}

// Every valid policy survives the round trip exactly.
func TestDecodeRoundTripsValidPolicies(t *testing.T) {
	for _, p := range fuzzseed.Policies() {
		enc := p.AppendBinary(nil)
		q, n, err := policy.Decode(enc)
		if err != nil || n != len(enc) {
			t.Fatalf("%s: decode: %d of %d bytes, %v", p.Name, n, len(enc), err)
		}
		if err := q.Validate(0); err != nil {
			t.Errorf("%s: decoded policy is invalid: %v", p.Name, err)
		}
		if !reflect.DeepEqual(&q, p) && !(len(p.KeyBy) == 0 && equalIgnoringNilKeyBy(&q, p)) {
			t.Errorf("decode(encode(p)) = %+v, want %+v", q, *p)
		}
	}
}

func equalIgnoringNilKeyBy(a, b *policy.Policy) bool {
	x, y := *a, *b
	x.KeyBy, y.KeyBy = nil, nil
	return reflect.DeepEqual(x, y)
}
