package raftlog

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

func TestEntryRoundTrip(t *testing.T) {
	for _, l := range []*raft.Log{
		entry("g", 1, 1),
		{Index: 2, Term: 1 << 62, Type: raft.LogConfiguration, Data: make([]byte, 70000)},
		{Index: 3, Type: raft.LogNoop, AppendedAt: time.Unix(-5, 3)},
	} {
		b := appendEntry(nil, l)
		var got raft.Log
		if err := decodeEntry(b, l.Index, &got); err != nil || !sameLog(&got, l) {
			t.Fatalf("round trip of %+v = %+v, %v", l.Index, got.Index, err)
		}
		b[len(b)-1] ^= 1
		if err := decodeEntry(b, l.Index, &got); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("a damaged entry decoded: %v", err)
		}
	}
}

func TestRecordRoundTrip(t *testing.T) {
	rec, spans := encodeEntries(recAppend, "shard-7", entries("shard-7", 41, 43, 2))
	p, n, err := parseRecord(append(rec, 1, 2, 3), 0)
	if err != nil || n != len(rec) {
		t.Fatalf("parse = %d, %v", n, err)
	}
	r, err := decodeRecord(p)
	if err != nil || r.typ != recAppend || r.group != "shard-7" || r.first != 41 || len(r.spans) != 3 {
		t.Fatalf("decode = %+v, %v", r, err)
	}
	for i, sp := range r.spans {
		if sp != spans[i] {
			t.Fatalf("span %d: decoded %+v, encoded %+v", i, sp, spans[i])
		}
		var l raft.Log
		if err := decodeEntry(rec[sp.off:sp.off+sp.n], 41+uint64(i), &l); err != nil || !sameLog(&l, entry("shard-7", 41+uint64(i), 2)) {
			t.Fatalf("entry %d: %+v, %v", i, l, err)
		}
	}
	for _, c := range []struct {
		rec  []byte
		want record
	}{
		{encodeDelete("g", 3, 9), record{typ: recDelete, group: "g", min: 3, max: 9}},
		{encodeDrop("g"), record{typ: recDrop, group: "g"}},
		{encodeSet("g", []byte("k"), []byte("v")), record{typ: recSet, group: "g", key: []byte("k"), val: []byte("v")}},
	} {
		p, _, err := parseRecord(c.rec, 0)
		if err != nil {
			t.Fatal(err)
		}
		r, err := decodeRecord(p)
		if err != nil || r.typ != c.want.typ || r.group != c.want.group || r.min != c.want.min ||
			r.max != c.want.max || string(r.key) != string(c.want.key) || string(r.val) != string(c.want.val) {
			t.Fatalf("decode = %+v, %v; want %+v", r, err, c.want)
		}
	}
	p, _, _ = parseRecord(encodeCheckpoint([]groupKV{{"a", []byte("k"), []byte("1")}, {"b", []byte("k"), nil}}), 0)
	if r, err := decodeRecord(p); err != nil || len(r.kvs) != 2 || r.kvs[1].group != "b" {
		t.Fatalf("checkpoint = %+v, %v", r, err)
	}
}

func TestParseRecordErrors(t *testing.T) {
	rec := encodeDelete("g", 1, 2)
	for name, c := range map[string]struct {
		b    []byte
		want error
	}{
		"short":        {rec[:5], errShortHeader},
		"past end":     {rec[:len(rec)-1], errPastEnd},
		"header crc":   {flip(rec, 1), errHeaderCRC},
		"payload crc":  {flip(rec, len(rec)-1), errPayloadCRC},
		"zero length":  {(&encoder{b: make([]byte, recHeaderSize)}).finish(), errTooLarge},
		"zeros":        {make([]byte, 64), errHeaderCRC},
		"no such type": {nil, nil},
	} {
		if c.b == nil {
			continue
		}
		if _, _, err := parseRecord(c.b, 0); err != c.want {
			t.Errorf("%s: %v; want %v", name, err, c.want)
		}
	}
}

func flip(b []byte, i int) []byte {
	c := append([]byte(nil), b...)
	c[i] ^= 0x40
	return c
}

// FuzzReplay: whatever follows a segment's checkpoint, Open either
// replays it or refuses it with ErrCorrupt; it never panics, and a log it
// opens takes writes and opens again.
func FuzzReplay(f *testing.F) {
	rec, _ := encodeEntries(recAppend, "g", entries("g", 1, 3, 1))
	f.Add(rec)
	f.Add(append(rec, encodeDelete("g", 1, 2)...))
	f.Add(append(rec, encodeDelete("g", 2, 2)...))
	f.Add(append(encodeSet("g", []byte("k"), nil), encodeDrop("g")...))
	f.Add(rec[:20])
	f.Add(make([]byte, 40))
	f.Fuzz(func(t *testing.T, tail []byte) {
		dir := t.TempDir()
		seg := append(segHeader(1, 0), encodeCheckpoint(nil)...)
		if err := os.WriteFile(filepath.Join(dir, segName(1)), append(seg, tail...), 0o644); err != nil {
			t.Fatal(err)
		}
		s, err := Open(dir, Options{NoSync: true})
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("open = %v; want ErrCorrupt", err)
			}
			return
		}
		g := s.Group("g")
		last, _ := g.LastIndex()
		for i := uint64(0); i < last; i++ {
			var l raft.Log
			g.GetLog(i, &l)
		}
		if err := g.StoreLog(entry("g", last+1, 1)); err != nil {
			t.Fatal(err)
		}
		s.Close()
		s, err = Open(dir, Options{NoSync: true})
		if err != nil {
			t.Fatalf("reopen after a write: %v", err)
		}
		s.Close()
	})
}
