package fsm

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strings"
	"testing"

	"github.com/hashicorp/raft"

	"github.com/floodgate/floodgate/policy"
	"github.com/floodgate/floodgate/test/fuzzseed"
	"github.com/floodgate/floodgate/window"
)

// fuzzT0 is the log time the fuzzed shards start from.
const fuzzT0 = int64(1_700_000_000) * sec

// entrySeeds are shard log entries: valid ones of every type, with every
// sample policy and hit outcome, truncated ones, version bumps, unknown
// types, and counts and lengths far beyond the entry.
func entrySeeds() []fuzzseed.Seed {
	pols := fuzzseed.Policies()
	var all []Check
	var hits []Hit
	for i, p := range pols {
		all = append(all, Check{Key: fmt.Sprintf("user:%d", i), Policy: p, Cost: 1})
		for o := policy.Denied; o <= policy.DeniedCountedReduced; o++ {
			hits = append(hits, Hit{Key: "user:1", Policy: p, Cost: 2, Time: fuzzT0 + int64(o)*sec, Outcome: o, Elastic: p.Mode == policy.Elastic})
		}
	}
	all = append(all, Check{Key: "user:0", Policy: pols[0], Cost: 0}, Check{Key: "user:4", Policy: pols[4], Cost: 3, Elastic: true})
	allow := EncodeAllow(nil, fuzzT0+sec, all)
	hitsEntry := EncodeHits(nil, fuzzT0+2*sec, hits)
	reset := EncodeReset(fuzzT0+3*sec, "user:1", pols[1])
	huge := binary.AppendUvarint(nil, 1<<62)
	set := EncodeAllow(nil, fuzzT0+sec, []Check{{Key: "user:1", Policy: pols[1], Cost: 1},
		{Key: "user:2", Policy: pols[1], Cost: 2, Joined: true}, {Key: "user:1", Policy: pols[1], Cost: 1, Joined: true}})
	mixed := EncodeAllow(nil, fuzzT0+sec, []Check{{Key: "user:1", Policy: pols[1], Cost: 1}, {Key: "user:2", Policy: pols[2], Cost: 1, Joined: true}})
	head := func(typ byte) []byte { return binary.AppendVarint([]byte{typ, allowVersion}, fuzzT0) }

	seeds := []fuzzseed.Seed{
		{Name: "allow-all-policies", Data: allow},
		{Name: "allow-empty", Data: EncodeAllow(nil, fuzzT0, nil)},
		{Name: "hits-every-outcome", Data: hitsEntry},
		{Name: "reset", Data: reset},
		{Name: "reset-inline", Data: EncodeReset(fuzzT0, "k", pols[0])},
		{Name: "tick", Data: EncodeTick(fuzzT0 + 10*sec)},
		{Name: "allow-set", Data: set},
		{Name: "allow-set-of-two-policies", Data: mixed},
		{Name: "allow-set-in-version-1", Data: withVersion(set, 1)},
		{Name: "restore", Data: EncodeRestore(exportOf(allow))},
		{Name: "tick-far-future", Data: EncodeTick(1<<63 - 1)},
		{Name: "tick-negative", Data: EncodeTick(-1)},
		{Name: "allow-version-next", Data: withVersion(allow, allowVersion+1)},
		{Name: "hits-version-next", Data: withVersion(hitsEntry, hitsVersion+1)},
		{Name: "hits-version-1", Data: withVersion(EncodeHits(nil, fuzzT0, hits[:5]), 1)},
		{Name: "reset-version-next", Data: withVersion(reset, resetVersion+1)},
		{Name: "allow-trailing-byte", Data: append(bytes.Clone(allow), 0)},
		{Name: "type-0", Data: []byte{0}},
		{Name: "type-5", Data: append([]byte{5}, allow[1:]...)},
		{Name: "type-255", Data: []byte{255, 1, 2, 3}},
		{Name: "allow-policy-count-huge", Data: append(head(cmdAllow), huge...)},
		{Name: "hits-policy-count-huge", Data: append(head(cmdHits), huge...)},
		{Name: "allow-check-count-huge", Data: append(append(head(cmdAllow), 0), huge...)},
		{Name: "hits-hit-count-huge", Data: append(append(head(cmdHits), 0), huge...)},
		{Name: "allow-check-count-input-length", Data: append(append(head(cmdAllow), 0), 40)},
		{Name: "reset-key-length-huge", Data: append(bytes.Clone(reset[:len(reset)-len("user:1")-1]), huge...)},
	}
	for i, p := range pols {
		seeds = append(seeds,
			fuzzseed.Seed{Name: fmt.Sprintf("allow-policy-%d", i), Data: EncodeAllow(nil, fuzzT0+sec, []Check{{Key: "user:1", Policy: p, Cost: 1}})},
			fuzzseed.Seed{Name: fmt.Sprintf("hits-policy-%d", i), Data: EncodeHits(nil, fuzzT0+sec, []Hit{{Key: "user:1", Policy: p, Cost: 1, Time: fuzzT0, Outcome: policy.Admitted}})},
		)
	}
	seeds = append(seeds, fuzzseed.Truncations("allow", EncodeAllow(nil, fuzzT0, all[1:3]), 2)...)
	seeds = append(seeds, fuzzseed.Truncations("hits", EncodeHits(nil, fuzzT0, hits[5:7]), 2)...)
	return seeds
}

// withVersion returns entry with its body's version byte set to v.
func withVersion(entry []byte, v byte) []byte {
	b := bytes.Clone(entry)
	b[1] = v
	return b
}

// exportOf returns the states one entry leaves in an empty shard, as
// ExportAll writes them: a restore's body.
func exportOf(entry []byte) []byte {
	s := NewShard()
	s.Apply(&raft.Log{Index: 1, Type: raft.LogCommand, Data: entry})
	b, _ := s.ExportAll()
	return b
}

// seededShard returns a shard holding states of every sample policy, as
// the same fixed entries leave it on every replica.
func seededShard(t testing.TB) *Shard {
	s := NewShard()
	for i, e := range entrySeeds()[:4] {
		if err, _ := s.Apply(&raft.Log{Index: uint64(i + 1), Type: raft.LogCommand, Data: e.Data}).(error); err != nil {
			t.Fatalf("seed entry %s: %v", e.Name, err)
		}
	}
	return s
}

// applyFuzzed applies one entry. The only panic allowed is the documented
// one: a node stops on an entry type, or a body version, it does not know
// (a newer node wrote it), saying so; any other panic is a bug and fails
// the test.
func applyFuzzed(t *testing.T, s *Shard, data []byte) (resp any, stopped bool) {
	defer func() {
		if r := recover(); r != nil {
			err, _ := r.(error)
			if !(stopsNode(data) || newerFormat(err)) || !errors.Is(err, ErrUnknownEntry) || !strings.Contains(err.Error(), "newer floodgate") {
				panic(r)
			}
			stopped = true
		}
	}()
	return s.Apply(&raft.Log{Index: 100, Type: raft.LogCommand, Data: data}), false
}

// stopsNode reports whether a shard entry is one a node stops on: an
// unknown type, or a versioned type with a newer body version.
func stopsNode(data []byte) bool {
	newest := map[byte]byte{cmdAllow: allowVersion, cmdHits: hitsVersion, cmdReset: resetVersion, cmdTick: 0xff, cmdRestore: restoreVersion}
	v, known := newest[data[0]]
	return !known || len(data) > 1 && data[1] > v
}

// logsTooLong reports whether a well-formed entry holds a sliding log
// longer than any node's default --max-log-length. Applying it is correct
// but allocates 8 bytes per unit of cost (up to a billion timestamps): a
// limit of the design, not of decoding, so the fuzzer leaves those alone.
func logsTooLong(data []byte) bool {
	var pols []policy.Policy
	switch data[0] {
	case cmdAllow:
		e, _ := decodeAllow(data[1:])
		pols = e.policies
	case cmdHits:
		e, _ := decodeHits(data[1:])
		pols = e.policies
	}
	for i := range pols {
		for j := range pols[i].States() {
			if l, _ := limitOf(&pols[i], j); l.Algorithm == window.SlidingLog && l.Limit > window.DefaultMaxLogLength {
				return true
			}
		}
	}
	return false
}

// decodeEntry decodes an entry as Apply does and returns how many answers
// a cmdAllow entry has (-1 for other types).
func decodeEntry(data []byte) (answers int, err error) {
	body := data[1:]
	switch data[0] {
	case cmdAllow:
		e, err := decodeAllow(body)
		return len(e.checks), err
	case cmdHits:
		_, err = decodeHits(body)
	case cmdReset:
		_, _, _, err = decodeReset(body)
	case cmdTick:
		_, err = decodeTick(body)
	case cmdRestore:
		err = ErrCorrupt
		if len(body) > 0 && body[0] == restoreVersion {
			_, _, _, err = decodeShardSnapshot(body[1:])
		}
	default:
		err = ErrCorrupt
	}
	return -1, err
}

// FuzzShardApply applies any entry to two replicas holding the same
// states. It must not panic (but for the documented stop on an unknown
// entry type), must decode in memory bounded by its length, must answer
// every check of a well-formed cmdAllow and refuse anything else with
// ErrCorrupt, identically on both replicas, and must leave a state that
// snapshots, restores and keeps answering.
func FuzzShardApply(f *testing.F) {
	fuzzseed.Add(f, entrySeeds())
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) == 0 || logsTooLong(data) {
			return
		}
		var (
			answers int
			decErr  error
		)
		fuzzseed.CheckAllocs(t, data, 256<<10, 512, func() { answers, decErr = decodeEntry(data) })
		a, b := seededShard(t), seededShard(t)
		before := a.Stats().Now
		ra, stopped := applyFuzzed(t, a, data)
		if stopped {
			return
		}
		rb, _ := applyFuzzed(t, b, data)
		if !reflect.DeepEqual(ra, rb) {
			t.Fatalf("replicas answered differently: %v and %v", ra, rb)
		}
		switch err, _ := ra.(error); {
		case decErr != nil:
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("entry that does not decode (%v) applied as %v", decErr, ra)
			}
		case answers >= 0:
			res, ok := ra.([]policy.Result)
			if !ok || len(res) != answers {
				t.Fatalf("cmdAllow with %d checks answered %v", answers, ra)
			}
			checkResults(t, res)
		case data[0] == cmdReset:
			if _, ok := ra.(int); !ok {
				t.Fatalf("cmdReset answered %v", ra)
			}
		case ra != nil:
			t.Fatalf("entry type %d answered %v", data[0], ra)
		}
		if now := a.Stats().Now; now < before {
			t.Fatalf("log time went back from %d to %d", before, now)
		}
		snap := snapshotBytes(t, a)
		if other := snapshotBytes(t, b); !bytes.Equal(snap, other) {
			t.Fatalf("replicas that applied the same entries wrote different snapshots")
		}
		checkRestoresExactly(t, snap)
		checkStillAnswers(t, a)
	})
}

// checkResults checks what every answer must satisfy.
func checkResults(t *testing.T, res []policy.Result) {
	t.Helper()
	for i, r := range res {
		switch {
		case r.Remaining < 0, r.RetryAfter < 0, r.Limit < 0:
			t.Fatalf("answer %d: negative field: %+v", i, r)
		case !r.Allowed && r.RetryAfter == 0:
			t.Fatalf("answer %d: denied without a retry time: %+v", i, r)
		case r.WouldDeny && !r.Allowed:
			t.Fatalf("answer %d: would-deny but denied: %+v", i, r)
		case r.Outcome > policy.DeniedCountedReduced:
			t.Fatalf("answer %d: outcome %d", i, r.Outcome)
		}
	}
}

// checkStillAnswers applies a check of every sample policy and a tick
// after whatever was applied: the shard keeps answering sanely.
func checkStillAnswers(t *testing.T, s *Shard) {
	t.Helper()
	var checks []Check
	for _, p := range fuzzseed.Policies() {
		checks = append(checks, Check{Key: "user:1", Policy: p, Cost: 1})
	}
	now := s.Stats().Now
	res, ok := s.Apply(allowLog(101, now+sec, checks...)).([]policy.Result)
	if !ok || len(res) != len(checks) {
		t.Fatalf("a valid entry afterwards answered %v", res)
	}
	checkResults(t, res)
	if r := s.Apply(&raft.Log{Index: 102, Type: raft.LogCommand, Data: EncodeTick(now + 2*sec)}); r != nil {
		t.Fatalf("tick afterwards: %v", r)
	}
}

// checkRestoresExactly restores snap on a fresh shard, which must write it
// back byte for byte.
func checkRestoresExactly(t *testing.T, snap []byte) {
	t.Helper()
	c := NewShard()
	if err := c.Restore(io.NopCloser(bytes.NewReader(snap))); err != nil {
		t.Fatalf("restoring a snapshot the shard wrote: %v", err)
	}
	if again := snapshotBytes(t, c); !bytes.Equal(again, snap) {
		t.Fatalf("restored snapshot re-encodes differently:\n%x\n%x", snap, again)
	}
}
