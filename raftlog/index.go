package raftlog

import (
	"bytes"
	"errors"
	"fmt"
)

// loc is where one entry's bytes lie: 12 bytes an entry, so a node's whole
// index stays a few megabytes.
type loc struct{ seg, off, n uint32 }

// groupState is one group's log and stable keys, as the records say. The
// flusher (and replay, before it) is its only writer, under Store.mu.
type groupState struct {
	first uint64 // index of locs[0], when there is one
	locs  []loc  // dense: entry first+i is locs[i]
	bytes int64  // the entries' bytes: the sum of locs' n
	kv    map[string][]byte
}

var (
	errNonSequential = errors.New("entries do not follow the log's last index")
	errMiddleDelete  = errors.New("DeleteRange must remove the head or the tail of the log")
)

func newGroupState() *groupState { return &groupState{kv: map[string][]byte{}} }

func (g *groupState) firstIndex() uint64 {
	if len(g.locs) == 0 {
		return 0
	}
	return g.first
}

func (g *groupState) lastIndex() uint64 {
	if len(g.locs) == 0 {
		return 0
	}
	return g.first + uint64(len(g.locs)) - 1
}

// checkAppend says whether n entries from first may follow the log: an
// empty log takes any start (after a snapshot), else they must extend it.
func (g *groupState) checkAppend(first uint64, n int) error {
	if first == 0 || n == 0 || first+uint64(n-1) < first {
		return fmt.Errorf("%w: first index %d of %d entries", errNonSequential, first, n)
	}
	if last := g.lastIndex(); last != 0 && first != last+1 {
		return fmt.Errorf("%w: got %d after %d", errNonSequential, first, last)
	}
	return nil
}

// appendLocs adds the locations of entries first, first+1, ...
func (g *groupState) appendLocs(first uint64, ls []loc) error {
	if err := g.checkAppend(first, len(ls)); err != nil {
		return err
	}
	g.bytes += spanBytes(ls)
	if len(g.locs) == 0 {
		g.first = first
		g.locs = append(make([]loc, 0, max(len(ls), 64)), ls...)
		return nil
	}
	g.locs = append(g.locs, ls...)
	return nil
}

// spanBytes is the sum of ls' entry sizes.
func spanBytes(ls []loc) int64 {
	var n int64
	for _, l := range ls {
		n += int64(l.n)
	}
	return n
}

// checkDelete says whether [min, max] removes a head or a tail (all raft
// ever asks for) or nothing.
func (g *groupState) checkDelete(min, max uint64) error {
	first, last := g.firstIndex(), g.lastIndex()
	if min > max || last == 0 || max < first || min > last || min <= first || max >= last {
		return nil
	}
	return fmt.Errorf("%w: [%d, %d] inside [%d, %d]", errMiddleDelete, min, max, first, last)
}

// deleteRange removes the entries in [min, max].
func (g *groupState) deleteRange(min, max uint64) error {
	if err := g.checkDelete(min, max); err != nil {
		return err
	}
	first, last := g.firstIndex(), g.lastIndex()
	switch {
	case min > max || last == 0 || max < first || min > last:
	case min <= first && max >= last:
		g.locs, g.bytes = nil, 0
	case min <= first:
		g.bytes -= spanBytes(g.locs[:max-first+1])
		g.locs = g.locs[max-first+1:]
		g.first = max + 1
		// The head's slots stay allocated until append reallocates;
		// after a large truncation, give them back now.
		if cap(g.locs) > 1024 && len(g.locs) < cap(g.locs)/4 {
			g.locs = append(make([]loc, 0, 2*len(g.locs)), g.locs...)
		}
	default:
		g.bytes -= spanBytes(g.locs[min-first:])
		g.locs = g.locs[:min-first]
	}
	return nil
}

// reset replaces the whole log (a GC rewrite: same entries, new places).
func (g *groupState) reset(first uint64, ls []loc) {
	g.first = first
	g.locs, g.bytes = ls, spanBytes(ls)
}

// firstSeg is the oldest segment the group still needs, or 0 for none.
func (g *groupState) firstSeg() uint32 {
	if len(g.locs) == 0 {
		return 0
	}
	return g.locs[0].seg
}

// applyRecord applies a decoded record found at offset off of segment
// seq. Replay and the flusher share it, so a replayed log is the log that
// was acknowledged.
func applyRecord(groups map[string]*groupState, r record, seq, off uint32) error {
	state := func() *groupState {
		g := groups[r.group]
		if g == nil {
			g = newGroupState()
			groups[r.group] = g
		}
		return g
	}
	locs := func() []loc {
		ls := make([]loc, len(r.spans))
		for i, sp := range r.spans {
			ls[i] = loc{seg: seq, off: off + sp.off, n: sp.n}
		}
		return ls
	}
	switch r.typ {
	case recAppend:
		return state().appendLocs(r.first, locs())
	case recReset:
		if err := (&groupState{}).checkAppend(r.first, len(r.spans)); err != nil {
			return err
		}
		state().reset(r.first, locs())
	case recDelete:
		if g := groups[r.group]; g != nil {
			return g.deleteRange(r.min, r.max)
		}
	case recSet:
		state().kv[string(r.key)] = bytes.Clone(r.val) // r may alias a whole segment
	case recCheckpoint:
		for _, kv := range r.kvs {
			g := groups[kv.group]
			if g == nil {
				g = newGroupState()
				groups[kv.group] = g
			}
			g.kv[string(kv.key)] = bytes.Clone(kv.val)
		}
	case recDrop:
		delete(groups, r.group)
	}
	return nil
}
