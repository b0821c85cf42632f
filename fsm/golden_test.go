package fsm

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"flag"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/hashicorp/raft"
	"google.golang.org/protobuf/proto"

	"github.com/floodgate/floodgate/policy"
	metav1 "github.com/floodgate/floodgate/proto/floodgate/meta/v1"
)

var updateGolden = flag.Bool("update", false, "rewrite testdata/golden from what this binary decodes")

// corpus reads the seeds of a fuzz target's checked-in corpus, but the
// truncations (-cutN), by name.
func corpus(t *testing.T, target string) ([]string, map[string][]byte) {
	t.Helper()
	dir := filepath.Join("testdata", "fuzz", target)
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	data := map[string][]byte{}
	for _, e := range entries {
		if strings.Contains(e.Name(), "-cut") {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(strings.TrimSpace(string(b)), "\n")
		if len(lines) != 2 || lines[0] != "go test fuzz v1" {
			t.Fatalf("%s: not a fuzz corpus file", e.Name())
		}
		s, err := strconv.Unquote(strings.TrimSuffix(strings.TrimPrefix(lines[1], "[]byte("), ")"))
		if err != nil {
			t.Fatalf("%s: %v", e.Name(), err)
		}
		names = append(names, e.Name())
		data[e.Name()] = []byte(s)
	}
	slices.Sort(names)
	return names, data
}

// applyRecorded applies data to m, saying what it answered, or that it
// stopped the node.
func applyRecorded(m raft.FSM, index uint64, data []byte) (out string) {
	defer func() {
		if r := recover(); r != nil {
			out = fmt.Sprintf("stopped: %v", r)
		}
	}()
	return fmt.Sprintf("%+v", m.Apply(&raft.Log{Index: index, Type: raft.LogCommand, Data: data}))
}

func snapshotSum(t *testing.T, m raft.FSM) string {
	t.Helper()
	return fmt.Sprintf("%x", sha256.Sum256(snapshotBytes(t, m)))
}

// checkGolden compares got with testdata/golden/name, or writes it there
// with -update.
func checkGolden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", "golden", name)
	if *updateGolden {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (go test ./fsm -run %s -update writes it)", err, t.Name())
	}
	if got != string(want) {
		gl, wl := strings.Split(got, "\n"), strings.Split(string(want), "\n")
		for i := range max(len(gl), len(wl)) {
			var g, w string
			if i < len(gl) {
				g = gl[i]
			}
			if i < len(wl) {
				w = wl[i]
			}
			if g != w {
				t.Fatalf("%s line %d:\n got  %s\n want %s\nthe bytes of an earlier release decode otherwise now: a format change must bump the version it changes (docs/compatibility.md); if the change is meant, go test ./fsm -run %s -update", path, i+1, g, w, t.Name())
			}
		}
	}
}

// The checked-in corpora hold bytes an earlier release wrote (entries and
// snapshots of every type). Replayed in order through this binary, every
// answer and the state they leave must be what they were: a format change
// made on both sides at once (a field read and written in another order, a
// flag's bit moved) passes every round-trip test, and would have a mixed
// cluster's replicas read each other's entries otherwise.
func TestGoldenShardFormats(t *testing.T) {
	names, data := corpus(t, "FuzzShardApply")
	s := NewShard()
	var b strings.Builder
	for i, name := range names {
		fmt.Fprintf(&b, "%s: %s\n", name, applyRecorded(s, uint64(i+1), data[name]))
	}
	fmt.Fprintf(&b, "state: %s\n", snapshotSum(t, s))
	names, data = corpus(t, "FuzzShardRestore")
	for _, name := range names {
		// Stored without their checksum, which FuzzShardRestore appends.
		body := data[name]
		withSum := binary.BigEndian.AppendUint32(bytes.Clone(body), crc32.Checksum(body, castagnoli))
		r := NewShard()
		if err := r.Restore(io.NopCloser(bytes.NewReader(withSum))); err != nil {
			fmt.Fprintf(&b, "restore %s: %v\n", name, err)
			continue
		}
		fmt.Fprintf(&b, "restore %s: %+v %s\n", name, r.Stats(), snapshotSum(t, r))
	}
	checkGolden(t, "shard.txt", b.String())
}

// The same for the meta group's entries and snapshots, and the policies
// they carry: each decodes to the same fields, and encodes again to the
// very bytes it was read from.
func TestGoldenMetaFormats(t *testing.T) {
	names, data := corpus(t, "FuzzMetaApply")
	m := NewMeta()
	var b strings.Builder
	for i, name := range names {
		fmt.Fprintf(&b, "%s: %s\n", name, applyRecorded(m, uint64(i+1), data[name]))
		if d := data[name]; len(d) > 0 && d[0] == MetaSetPolicies {
			var sp metav1.SetPolicies
			if proto.Unmarshal(d[1:], &sp) != nil {
				continue
			}
			for _, enc := range sp.Policies {
				p, n, err := policy.Decode(enc)
				if err != nil || n != len(enc) {
					fmt.Fprintf(&b, "  policy: %v (%d of %d bytes)\n", err, n, len(enc))
					continue
				}
				reduced := p.Reduced
				p.Reduced = nil
				fmt.Fprintf(&b, "  policy: %+v", p)
				if reduced != nil {
					fmt.Fprintf(&b, " reduced %+v", *reduced)
					p.Reduced = reduced
				}
				b.WriteString("\n")
				if again := p.AppendBinary(nil); string(again) != string(enc) {
					t.Errorf("%s: policy %q encodes to %x, read from %x", name, p.Name, again, enc)
				}
			}
		}
	}
	v := m.View()
	fmt.Fprintf(&b, "view: cluster %q, %d nodes, %d policies, state %s\n", v.ClusterID, len(v.Nodes), len(v.Policies), snapshotSum(t, m))
	names, data = corpus(t, "FuzzMetaRestore")
	for _, name := range names {
		r := NewMeta()
		if err := r.Restore(io.NopCloser(strings.NewReader(string(data[name])))); err != nil {
			fmt.Fprintf(&b, "restore %s: %v\n", name, err)
			continue
		}
		fmt.Fprintf(&b, "restore %s: %s\n", name, snapshotSum(t, r))
	}
	checkGolden(t, "meta.txt", b.String())
}
