package fuzzseed

import (
	"os"
	"path/filepath"
	"runtime/metrics"
	"strconv"
	"testing"
)

// Seed is one named input of a []byte fuzz target.
type Seed struct {
	Name string
	Data []byte
}

// Add adds seeds to f, and writes them to its corpus directory when
// FLOODGATE_WRITE_FUZZ_SEEDS=1.
func Add(f *testing.F, seeds []Seed) {
	f.Helper()
	write := os.Getenv("FLOODGATE_WRITE_FUZZ_SEEDS") == "1"
	dir := filepath.Join("testdata", "fuzz", f.Name())
	if write {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			f.Fatal(err)
		}
	}
	for _, s := range seeds {
		f.Add(s.Data)
		if !write {
			continue
		}
		body := "go test fuzz v1\n[]byte(" + strconv.Quote(string(s.Data)) + ")\n"
		if err := os.WriteFile(filepath.Join(dir, s.Name), []byte(body), 0o644); err != nil {
			f.Fatal(err)
		}
	}
}

// Truncations returns seeds of every proper prefix of data (named
// name-cutN), which a decoder must refuse without panicking.
func Truncations(name string, data []byte, step int) []Seed {
	var out []Seed
	for n := 0; n < len(data); n += max(step, 1) {
		out = append(out, Seed{Name: name + "-cut" + strconv.Itoa(n), Data: data[:n:n]})
	}
	return out
}

var allocSample = []metrics.Sample{{Name: "/gc/heap/allocs:bytes"}}

// HeapAllocs is the bytes allocated on the heap so far by the whole
// process (allocations are counted per span, so it moves in steps of a few
// KiB): the difference around a call bounds what the call allocated.
func HeapAllocs() uint64 {
	metrics.Read(allocSample)
	return allocSample[0].Value.Uint64()
}

// CheckAllocs fails t when fn allocates more than fixed bytes plus perByte
// bytes per input byte: a decoder must bound what it allocates by the
// input it has, never by a count or length the input merely claims. The
// count is process-wide (a fuzzing worker allocates on other goroutines
// too), so an excess is measured twice more and the least taken: fn must
// be deterministic and safe to call again.
func CheckAllocs(t testing.TB, input []byte, fixed, perByte uint64, fn func()) {
	t.Helper()
	limit := fixed + perByte*uint64(len(input))
	least := ^uint64(0)
	for range 3 {
		before := HeapAllocs()
		fn()
		least = min(least, HeapAllocs()-before)
		if least <= limit {
			return
		}
	}
	t.Fatalf("%d-byte input allocated %d bytes, more than %d", len(input), least, limit)
}
