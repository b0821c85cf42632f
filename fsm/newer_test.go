package fsm

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"io"
	"testing"

	"github.com/hashicorp/raft"
	"google.golang.org/protobuf/proto"

	metav1 "github.com/floodgate/floodgate/proto/floodgate/meta/v1"
	"github.com/floodgate/floodgate/window"
)

// applyStops applies data to m and reports whether it stopped the node
// (a panic wrapping ErrUnknownEntry), failing on any other panic.
func applyStops(t *testing.T, m raft.FSM, data []byte) (stopped bool, res any) {
	t.Helper()
	defer func() {
		if r := recover(); r != nil {
			if err, ok := r.(error); !ok || !errors.Is(err, ErrUnknownEntry) {
				panic(r)
			}
			stopped = true
		}
	}()
	return false, m.Apply(&raft.Log{Index: 7, Type: raft.LogCommand, Data: data})
}

// bumped returns a copy of b with the byte where sub starts in it set to v.
func bumped(t *testing.T, b, sub []byte, at int, v byte) []byte {
	t.Helper()
	i := bytes.Index(b, sub)
	if i < 0 {
		t.Fatal("part not found in the encoding")
	}
	out := bytes.Clone(b)
	out[i+at] = v
	return out
}

// A part of an entry in a newer format than this binary reads (a policy's
// version or flag, a check's flag, a nested shard snapshot's version, a key
// state's version) stops the node, as an unknown entry type does: the
// replicas of the newer release apply it, and refusing it would leave this
// one silently behind them. The same parts of an older, unknown format
// are still refused as corrupt, alike on every replica.
func TestNewerPartsOfAnEntryStopTheNode(t *testing.T) {
	p := inline(window.Limit{Algorithm: window.FixedWindow, Limit: 3, Window: 100 * sec})
	pol := p.AppendBinary(nil)
	allow := EncodeAllow(nil, sec, []Check{{Key: "k", Policy: p, Cost: 1}})
	src := NewShard()
	src.Apply(allowLog(1, 2*sec, Check{Key: "k", Policy: p, Cost: 1}))
	export, err := src.ExportAll()
	if err != nil {
		t.Fatal(err)
	}
	named := *p
	named.Name = "api"
	stored := named.AppendBinary(nil)
	setPolicies := func(b []byte) []byte {
		cmd, err := EncodeMeta(MetaSetPolicies, &metav1.SetPolicies{Policies: [][]byte{b}})
		if err != nil {
			t.Fatal(err)
		}
		return cmd
	}
	for _, tc := range []struct {
		name  string
		fsm   func() raft.FSM
		entry []byte
		stops bool
	}{
		{"a policy of codec version 2", func() raft.FSM { return NewShard() }, bumped(t, allow, pol, 0, 2), true},
		{"a policy of codec version 0", func() raft.FSM { return NewShard() }, bumped(t, allow, pol, 0, 0), false},
		{"a policy flag this binary does not know", func() raft.FSM { return NewShard() }, bumped(t, allow, pol, 2, 1<<7), true},
		// An inline policy's bytes: version, name (empty), flags, mode,
		// consistency, 3 percentages, key_by count, limit count, then its
		// limit: name (empty), algorithm, calendar...
		{"a mode this binary does not know", func() raft.FSM { return NewShard() }, bumped(t, allow, pol, 3, 200), true},
		{"a consistency this binary does not know", func() raft.FSM { return NewShard() }, bumped(t, allow, pol, 4, 200), true},
		{"an algorithm this binary does not know", func() raft.FSM { return NewShard() }, bumped(t, allow, pol, 11, 200), true},
		{"a calendar unit this binary does not know", func() raft.FSM { return NewShard() }, bumped(t, allow, pol, 12, 200), true},
		{"algorithm 0, never valid", func() raft.FSM { return NewShard() }, bumped(t, allow, pol, 11, 0), false},
		{"a check flag this binary does not know", func() raft.FSM { return NewShard() }, func() []byte {
			b := bytes.Clone(allow)
			b[len(b)-1] |= 1 << 6 // the last check's flags end the body
			return b
		}(), true},
		{"a restore of shard snapshot version 3", func() raft.FSM { return NewShard() }, EncodeRestore(summed(bumped(t, export, []byte(shardMagic), len(shardMagic), 3))), true},
		// Its checksum not summed again: damage, not a newer release's.
		{"a restore whose version byte is damaged", func() raft.FSM { return NewShard() }, EncodeRestore(bumped(t, export, []byte(shardMagic), len(shardMagic), 3)), false},
		{"a restore of a key state of version 2", func() raft.FSM { return NewShard() }, EncodeRestore(newerState(t, export)), true},
		{"meta: a stored policy of codec version 2", func() raft.FSM { return NewMeta() }, setPolicies(bumped(t, stored, stored, 0, 2)), true},
		{"meta: a stored policy of codec version 0", func() raft.FSM { return NewMeta() }, setPolicies(bumped(t, stored, stored, 0, 0)), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			stopped, res := applyStops(t, tc.fsm(), tc.entry)
			if stopped != tc.stops {
				t.Fatalf("stopped %v (result %v), want %v", stopped, res, tc.stops)
			}
			if err, _ := res.(error); !tc.stops && err == nil {
				t.Fatalf("applied an entry of an unknown older format: %v", res)
			}
		})
	}
}

// A snapshot holding a part of a newer format is of a version this binary
// does not read (ErrSnapshotVersion), not a corrupt one.
func TestNewerPartsOfASnapshotAreANewerVersion(t *testing.T) {
	p := inline(window.Limit{Algorithm: window.FixedWindow, Limit: 3, Window: 100 * sec})
	named := *p
	named.Name = "api"
	stored := named.AppendBinary(nil)
	raw, err := proto.MarshalOptions{Deterministic: true}.Marshal(&metav1.State{ClusterId: "c", Shards: 1, Replicas: 1, Policies: [][]byte{bumped(t, stored, stored, 0, 2)}})
	if err != nil {
		t.Fatal(err)
	}
	if err := NewMeta().Restore(io.NopCloser(bytes.NewReader(append([]byte{metaVersionLegacy}, raw...)))); !errors.Is(err, ErrSnapshotVersion) {
		t.Errorf("a meta snapshot holding a policy of codec version 2: %v, want ErrSnapshotVersion", err)
	}
	src := NewShard()
	src.Apply(allowLog(1, 2*sec, Check{Key: "k", Policy: p, Cost: 1}))
	if err := NewShard().Restore(io.NopCloser(bytes.NewReader(newerState(t, snapshotBytes(t, src))))); !errors.Is(err, ErrSnapshotVersion) {
		t.Errorf("a shard snapshot holding a key state of version 2: %v, want ErrSnapshotVersion", err)
	}
}

// newerState returns a copy of a shard snapshot (or export) whose first
// key state says version 2, summed again as its writer would.
func newerState(t *testing.T, data []byte) []byte {
	t.Helper()
	out := bytes.Clone(data)
	off := len(shardMagic) + 1
	_, n := binary.Varint(out[off:]) // now
	off += n
	_, n = binary.Uvarint(out[off:]) // entries
	off += n
	idLen, n := binary.Uvarint(out[off:])
	off += n + int(idLen)
	_, n = binary.Uvarint(out[off:]) // the state's length
	off += n
	if out[off] != 1 {
		t.Fatalf("the first state's version byte is %d, want 1", out[off])
	}
	out[off] = 2
	return summed(out)
}

// summed sums a shard snapshot (or export) again in place, as its writer
// would have, and returns it.
func summed(data []byte) []byte {
	body := data[:len(data)-4]
	binary.BigEndian.PutUint32(data[len(body):], crc32.Checksum(body, castagnoli))
	return data
}
