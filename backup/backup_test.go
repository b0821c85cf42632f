package backup

import (
	"bytes"
	"errors"
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
