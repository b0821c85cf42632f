package fsm

import (
	"bytes"
	"encoding/binary"
	"hash/crc32"
	"io"
	"testing"

	"github.com/hashicorp/raft"

	"github.com/floodgate/floodgate/policy"
	"github.com/floodgate/floodgate/test/fuzzseed"
	"github.com/floodgate/floodgate/window"
)

// snapshotSeeds are shard snapshots without their trailing checksum (the
// target appends the right one, so mutations reach the entries): real
// ones holding states of every algorithm, truncations, a version bump,
// and counts and lengths beyond the input.
func snapshotSeeds(t testing.TB) []fuzzseed.Seed {
	body := func(s *Shard) []byte {
		snap, err := s.Snapshot()
		var sink memSink
		if err == nil {
			err = snap.Persist(&sink)
		}
		if err != nil {
			t.Fatal(err)
		}
		return sink.Bytes()[:sink.Len()-4]
	}
	full, empty := body(seededShard(t)), body(NewShard())
	head := binary.AppendVarint([]byte(shardMagic+"\x01"), fuzzT0)
	huge := binary.AppendUvarint(nil, 1<<62)
	seeds := []fuzzseed.Seed{
		{Name: "states-of-every-algorithm", Data: full},
		{Name: "empty", Data: empty},
		{Name: "version-2", Data: append([]byte(shardMagic+"\x02"), full[len(shardMagic)+1:]...)},
		{Name: "count-huge", Data: append(bytes.Clone(head), huge...)},
		{Name: "count-beyond-entries", Data: append(bytes.Clone(head), 200)},
		{Name: "identity-length-huge", Data: append(append(bytes.Clone(head), 1), huge...)},
		{Name: "not-a-snapshot", Data: []byte("FGMS\x01")},
	}
	return append(seeds, fuzzseed.Truncations("states", full, 7)...)
}

// FuzzShardRestore restores any snapshot. It must not panic, must decode
// in memory bounded by its length, must leave the shard as it was when it
// refuses, and what it accepts must snapshot to a fixed point and keep
// answering checks on the states it restored.
func FuzzShardRestore(f *testing.F) {
	fuzzseed.Add(f, snapshotSeeds(f))
	f.Fuzz(func(t *testing.T, body []byte) {
		sum := binary.BigEndian.AppendUint32(nil, crc32.Checksum(body, castagnoli))
		// As given (mostly refused: its last 4 bytes are not its
		// checksum), then with the checksum appended.
		for _, data := range [][]byte{body, append(body[:len(body):len(body)], sum...)} {
			fuzzseed.CheckAllocs(t, data, 512<<10, 1024, func() { _, _, _, _ = decodeShardSnapshot(data) })
			s := seededShard(t)
			before := snapshotBytes(t, s)
			if err := s.Restore(io.NopCloser(bytes.NewReader(data))); err != nil {
				if after := snapshotBytes(t, s); !bytes.Equal(after, before) {
					t.Fatalf("a refused snapshot (%v) changed the shard", err)
				}
				continue
			}
			snap := snapshotBytes(t, s)
			checkRestoresExactly(t, snap)
			checkRestoredStatesAnswer(t, s)
			checkStillAnswers(t, s)
		}
	})
}

// checkRestoredStatesAnswer checks each restored state under a policy of
// its identity's shape (the identity says everything but the limit's
// value): whatever a snapshot held, checking and counting on it works.
func checkRestoredStatesAnswer(t *testing.T, s *Shard) {
	t.Helper()
	var checks []Check
	s.mu.Lock()
	s.tab.each(func(r *record) {
		key, scope, ok := splitID(r.id)
		l, _ := shapeOf(r.id)
		if !ok || scope != "" && !policy.ValidName(scope) {
			return // a reduced limit's scope, or a name no policy has
		}
		l.Limit = 100
		if l.Algorithm == window.TokenBucket || l.Algorithm == window.GCRA {
			l.Burst = 1
		}
		p := &policy.Policy{Name: scope, Limits: []policy.Limit{{Limit: l}}}
		if p.Validate(0) == nil && len(checks) < 64 {
			checks = append(checks, Check{Key: key, Policy: p, Cost: 1})
		}
	})
	now := s.now
	s.mu.Unlock()
	if len(checks) == 0 {
		return
	}
	res, ok := s.Apply(&raft.Log{Index: 200, Type: raft.LogCommand, Data: EncodeAllow(nil, now, checks)}).([]policy.Result)
	if !ok || len(res) != len(checks) {
		t.Fatalf("checks of restored states answered %v", res)
	}
	checkResults(t, res)
	checkRestoresExactly(t, snapshotBytes(t, s))
}

// splitID returns the key and scope an identity (appendID) starts with.
func splitID(id string) (key, scope string, ok bool) {
	var parts [2]string
	off := 0
	for i := range parts {
		n, k := uvarintString(id[off:])
		if k <= 0 || n > uint64(len(id)-off-k) {
			return "", "", false
		}
		parts[i] = id[off+k : off+k+int(n)]
		off += k + int(n)
	}
	return parts[0], parts[1], true
}
