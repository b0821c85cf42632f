package backup

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	pb "github.com/floodgate/floodgate/proto/floodgate/v1"
)

func sample(t *testing.T) ([]byte, []*pb.Policy, [][]byte) {
	t.Helper()
	ps := []*pb.Policy{{Name: "api", KeyBy: []string{"user"}}, {Name: "login"}}
	states := [][]byte{[]byte("FGSS group 0"), {}, bytes.Repeat([]byte{7}, 300)}
	var buf bytes.Buffer
	w := NewWriter(&buf)
	if err := w.Policies(ps); err != nil {
		t.Fatal(err)
	}
	for _, s := range states {
		if err := w.States(s); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes(), ps, states
}

func TestRoundTrip(t *testing.T) {
	data, ps, states := sample(t)
	b, err := Read(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	if len(b.Policies) != len(ps) || len(b.States) != len(states) {
		t.Fatalf("read %d policies, %d states", len(b.Policies), len(b.States))
	}
	for i := range ps {
		if !proto.Equal(ps[i], b.Policies[i]) {
			t.Fatalf("policy %d: %v", i, b.Policies[i])
		}
	}
	for i := range states {
		if !bytes.Equal(states[i], b.States[i]) {
			t.Fatalf("states %d differ", i)
		}
	}
}

// Every damage is refused before anything is used: one flipped bit
// anywhere, a cut anywhere, another version, bytes after the end.
func TestDamageIsRefused(t *testing.T) {
	data, _, _ := sample(t)
	for i := range data {
		bad := bytes.Clone(data)
		bad[i] ^= 0x10
		if _, err := Parse(bad); !errors.Is(err, ErrBadBackup) {
			t.Fatalf("bit flipped at byte %d: %v", i, err)
		}
	}
	for n := range len(data) {
		if _, err := Parse(data[:n]); !errors.Is(err, ErrBadBackup) {
			t.Fatalf("cut at byte %d: %v", n, err)
		}
	}
	if _, err := Parse(append(bytes.Clone(data), 0)); !errors.Is(err, ErrBadBackup) {
		t.Fatalf("a byte after the end: %v", err)
	}
}

// An error says what is wrong and at which byte: bytes appended after a
// whole backup are trailing bytes, not a missing checksum; a damaged byte
// is a checksum mismatch; a cut names where the file ends.
func TestErrorsSayWhatAndWhere(t *testing.T) {
	data, _, states := sample(t)
	n := len(data)
	for _, tc := range []struct {
		name string
		data []byte
		want []string
	}{
		{"appended bytes", append(bytes.Clone(data), "junk"...),
			[]string{"4 trailing bytes after the checksum", fmt.Sprintf("ends at byte %d", n)}},
		{"appended checksum-like bytes", append(bytes.Clone(data), 0, 1, 2, 3, 4),
			[]string{"5 trailing bytes after the checksum", fmt.Sprintf("ends at byte %d", n)}},
		{"a damaged body", func() []byte { b := bytes.Clone(data); b[n-40] ^= 1; return b }(),
			[]string{"checksum mismatch", fmt.Sprintf("checksum at byte %d", n-4)}},
		{"a damaged body and bytes after", func() []byte { b := bytes.Clone(data); b[n-40] ^= 1; return append(b, 9, 9) }(),
			[]string{"checksum mismatch", fmt.Sprintf("checksum at byte %d", n-4), "2 bytes follow it"}},
		{"a cut checksum", data[:n-2], []string{fmt.Sprintf("truncated at byte %d", n-2), fmt.Sprintf("checksum at byte %d is cut short", n-4)}},
		{"a cut record", data[:n-5-len(states[2])/2], []string{"run past the end of the file", "truncated or damaged"}},
		{"no end record", data[:n-5], []string{fmt.Sprintf("truncated at byte %d", n-5)}},
		// snapshot save's example pipes the backup through gzip.
		{"a gzip-compressed backup", gzipped(t, data), []string{"gzip-compressed", "gunzip -c FILE | floodgatectl snapshot restore -"}},
	} {
		_, err := Parse(tc.data)
		if !errors.Is(err, ErrBadBackup) {
			t.Errorf("%s: %v, want ErrBadBackup", tc.name, err)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: %q does not say %q", tc.name, err, w)
			}
		}
	}
}

// gzipped is data compressed by gzip.
func gzipped(t *testing.T, data []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	z := gzip.NewWriter(&buf)
	if _, err := z.Write(data); err != nil {
		t.Fatal(err)
	}
	if err := z.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// Parse says where each group's states record starts, for errors inside
// it.
func TestStatesOffsets(t *testing.T) {
	data, _, states := sample(t)
	b, err := Parse(data)
	if err != nil {
		t.Fatal(err)
	}
	if len(b.StatesAt) != len(states) {
		t.Fatalf("%d offsets for %d records", len(b.StatesAt), len(states))
	}
	for i, off := range b.StatesAt {
		// kind, a uvarint length, then the body read back.
		if data[off] != kindStates || !bytes.HasPrefix(data[off+1+uvarintLen(len(states[i])):], states[i]) {
			t.Errorf("record %d: offset %d is not where it starts", i, off)
		}
	}
}

func uvarintLen(n int) int { return len(binary.AppendUvarint(nil, uint64(n))) }

func TestRecordLimit(t *testing.T) {
	w := NewWriter(&bytes.Buffer{})
	if err := w.States(make([]byte, MaxRecord+1)); err == nil {
		t.Fatal("a record over the limit was written")
	}
}

func FuzzParse(f *testing.F) {
	data, _, _ := sample(&testing.T{})
	f.Add(data)
	f.Fuzz(func(t *testing.T, data []byte) {
		b, err := Parse(data)
		if err != nil {
			if !errors.Is(err, ErrBadBackup) {
				t.Fatalf("an error that is not ErrBadBackup: %v", err)
			}
			return
		}
		// What parses writes back to a backup that parses the same.
		var buf bytes.Buffer
		w := NewWriter(&buf)
		if len(b.Policies) > 0 {
			_ = w.Policies(b.Policies)
		}
		for _, s := range b.States {
			_ = w.States(s)
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		again, err := Parse(buf.Bytes())
		if err != nil || len(again.States) != len(b.States) || len(again.Policies) != len(b.Policies) {
			t.Fatalf("rewritten backup: %v", err)
		}
	})
}
