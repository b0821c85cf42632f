package fsm

import (
	"bytes"
	"io"
	"testing"

	"github.com/hashicorp/raft"

	"github.com/floodgate/floodgate/policy"
	"github.com/floodgate/floodgate/window"
)

// TestBytesFollowEveryChange: the bytes a group counts (what
// --max-state-mib bounds) are what its records hold after each way a
// state's buffer changes: a log grown by a check, shrunk by a check whose
// timestamps aged out (a denial too), shrunk by a snapshot's trim, freed
// by a reset and by the sweeper, grown by a replayed fast hit, and counted
// anew by a restore.
func TestBytesFollowEveryChange(t *testing.T) {
	log := inline(window.Limit{Algorithm: window.SlidingLog, Limit: 1000, Window: 10 * sec})
	ctr := inline(window.Limit{Algorithm: window.SlidingCounterWeighted, Limit: 1000, Window: 60 * sec, Buckets: 60})
	s := NewShard()
	var index uint64
	apply := func(data []byte) {
		index++
		s.Apply(&raft.Log{Index: index, Type: raft.LogCommand, Data: data})
	}
	last := int64(0)
	check := func(what string, grew bool) {
		t.Helper()
		got := s.Stats().Bytes
		if want := recountBytes(s); got != want {
			t.Fatalf("%s: the table counts %d bytes, its records hold %d", what, got, want)
		}
		if grew != (got > last) {
			t.Fatalf("%s: %d bytes after %d, want it to have grown: %v", what, got, last, grew)
		}
		last = got
	}
	ts := int64(1000) * sec
	apply(EncodeAllow(nil, ts, []Check{{Key: "k", Policy: log, Cost: 800}, {Key: "c", Policy: ctr, Cost: 1}}))
	check("a log of 800 and a counter", true)
	if last < 800*8 {
		t.Fatalf("%d bytes for 800 timestamps", last)
	}
	apply(EncodeAllow(nil, ts+9*sec, []Check{{Key: "k", Policy: log, Cost: 150}}))
	check("150 more", true)
	// At ts+11s the 800 have aged out: a check of the 150 left shrinks it.
	apply(EncodeAllow(nil, ts+11*sec, []Check{{Key: "k", Policy: log, Cost: 1000}})) // denied: 150 + 1000 > 1000
	check("a denial after the 800 aged out", false)

	apply(EncodeAllow(nil, ts+12*sec, []Check{{Key: "k", Policy: log, Cost: 700}}))
	check("700 more", true)
	apply(EncodeAllow(nil, ts+19*sec+sec/2, []Check{{Key: "k", Policy: log, Cost: 10}})) // the 150 aged out
	check("10 more", false)
	// A snapshot at a log time where the 700 have aged out trims the log.
	apply(EncodeTick(ts + 22*sec + sec/2))
	snap, err := s.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	data := persist(t, snap)
	check("the snapshot's trim", false)

	s.FastEval(log, "f", 500, ts+23*sec, false)
	apply(EncodeHits(nil, ts+23*sec, []Hit{{Key: "f", Policy: log, Cost: 500, Time: ts + 23*sec, Outcome: policy.Admitted}}))
	check("a replayed fast hit", true)
	apply(EncodeReset(ts+23*sec, "f", log))
	check("a reset", false)

	if err := s.Restore(io.NopCloser(bytes.NewReader(data))); err != nil {
		t.Fatal(err)
	}
	check("a restore", false)
	// Everything expires; ticks sweep it all.
	for i := range 200 {
		apply(EncodeTick(ts + int64(100+i)*sec))
	}
	if check("the sweeper", false); last != 0 {
		t.Fatalf("%d bytes once every state is gone", last)
	}
}
