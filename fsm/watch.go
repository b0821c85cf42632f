package fsm

import (
	"fmt"
	"runtime"
	"slices"
)

const (
	// maxWatches is how many slot watches a table keeps. A group's moves
	// out are bounded in slots, not in number (slots.DefaultLimits), so
	// a group may have more moves under way than this, each of a few
	// slots; the oldest watch is then dropped, and its move's export looks
	// at every record, as without one.
	maxWatches = 4
	// watchSlack is what a watch's list may grow by, beyond twice its
	// size when its walk ended, before the watch is dropped (grown).
	watchSlack = 4096
)

// slotWatch lists the record numbers of the states of some slots about to
// move, so that the move's export reads those records instead of looking
// at every record of the group for them. That look (a key hashed per
// record) is what an export cost: 11-20 ms at 500,000 states in process
// and 25-185 ms in a loaded cluster, inside the window in which the
// moving slots answer no check (from the freeze until the target's
// import). A node starts a watch on its replica of a move's source when
// the move is planned, before the freeze, and fills it then
// (Shard.WatchSlots).
//
// A watch is one replica's memory, never replicated or written to a
// snapshot: it changes which records an export reads, never what the
// export holds, so replicas with and without one export the same bytes.
//
// Once its walk is over, recs holds the number of every live record of a
// watched slot (and maybe numbers that no longer do, or twice): the walk
// adds those it finds, the table adds every record inserted into a
// watched slot (added) and every one compaction moves (compact.go),
// whichever side of the walk they fall. Numbers are never taken off: a
// watch lives from a move's plan to its drop, a few hundred milliseconds
// during which its slots take few new keys, and none once frozen. One
// that outgrows twice its size at the walk's end (a move held up while
// its slots take new keys) is dropped rather than pruned, which would
// hash every listed record's key while applies wait.
type slotWatch struct {
	move uint64
	in   []bool // by slot: watched
	recs []uint32
	// next is the walk's position and end where it stops: the numbers
	// in use when it began (numbers above are inserts, which add
	// themselves).
	next, end uint32
	// limit is how long recs may grow once the walk is over; 0 before.
	limit int
}

// ready reports whether the walk is over: recs holds every record of the
// watched slots.
func (w *slotWatch) ready() bool { return w.next >= w.end }

// added notes that record n now holds a state of slot x.
func (w *slotWatch) added(x int, n uint32) {
	if w.in[x] {
		w.recs = append(w.recs, n)
	}
}

// grown reports whether w's list outgrew its limit: the table drops it.
func (w *slotWatch) grown() bool { return w.limit > 0 && len(w.recs) > w.limit }

// walk looks at up to budget records from the walk's position.
func (w *slotWatch) walk(t *table, budget int) {
	stop := min(w.end, w.next+uint32(budget))
	for ; w.next < stop && w.next < t.used; w.next++ {
		if id := t.rec(w.next).id; id != "" {
			w.added(slotOfID(id, len(w.in)), w.next)
		}
	}
	if w.next >= t.used {
		w.next = w.end // compaction cut the rest: nothing there
	}
	if w.limit == 0 && w.ready() {
		w.limit = 2*len(w.recs) + watchSlack
	}
}

// noteAdded tells every watch that record n holds a state of slot x, and
// drops those grown past their limit.
func (t *table) noteAdded(x int, n uint32) {
	grown := false
	for _, w := range t.watches {
		w.added(x, n)
		grown = grown || w.grown()
	}
	if grown {
		t.watches = slices.DeleteFunc(t.watches, (*slotWatch).grown)
	}
}

// watchOf returns the table's watch of move, or nil.
func (t *table) watchOf(move uint64) *slotWatch {
	for _, w := range t.watches {
		if w.move == move {
			return w
		}
	}
	return nil
}

// covers reports whether w watches every slot of slots.
func (w *slotWatch) covers(slots []uint32) bool {
	for _, x := range slots {
		if int(x) >= len(w.in) || !w.in[x] {
			return false
		}
	}
	return true
}

// unwatch drops the watch of move, if any.
func (t *table) unwatch(move uint64) {
	t.watches = slices.DeleteFunc(t.watches, func(w *slotWatch) bool { return w.move == move })
}

// WatchSlots starts a watch of slots, which move is to take away from the
// group, and fills it, captureStep records per hold of the lock: an
// export of the move then reads only their records (slotWatch). If the
// move has a watch already, it helps fill that one. It returns once the
// watch is filled, or gone (a restore replaced the table, or the watch
// was dropped); an export finishes a walk still under way itself. It
// refuses slots the group neither owns nor froze by move: a watch
// started after the move's drop would only collect what a later move
// brings back.
func (s *Shard) WatchSlots(move uint64, slots []uint32) error {
	s.mu.Lock()
	t, w, err := s.startWatch(move, slots)
	s.mu.Unlock()
	if err != nil {
		return err
	}
	s.fillWatch(t, w)
	return nil
}

// Watched reports whether the replica holds a filled watch of move: an
// export of the move from it reads only the listed records.
func (s *Shard) Watched(move uint64) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	w := s.tab.watchOf(move)
	return w != nil && w.ready()
}

// startWatch attaches an empty watch of slots for move, unless the table
// has one for move, and returns the move's watch with its table. s.mu
// must be held.
func (s *Shard) startWatch(move uint64, slots []uint32) (*table, *slotWatch, error) {
	o, t := s.own, s.tab
	if o == nil || t.counts == nil {
		return nil, nil, fmt.Errorf("%w: the group has no ownership record", ErrNotFrozen)
	}
	for _, x := range slots {
		if int(x) >= len(o.state) || (o.state[x] != slotOwned && o.state[x] != move+1) {
			return nil, nil, fmt.Errorf("%w: slot %d is neither owned nor frozen by move %d", ErrNotFrozen, x, move)
		}
	}
	if w := t.watchOf(move); w != nil {
		return t, w, nil
	}
	w := &slotWatch{move: move, in: make([]bool, len(o.state)), end: t.used}
	for _, x := range slots {
		w.in[x] = true
	}
	w.walk(t, 0) // an empty table: over at once
	if len(t.watches) >= maxWatches {
		t.watches = t.watches[1:]
	}
	t.watches = append(t.watches, w)
	return t, w, nil
}

// fillWatch walks w to its end, a step per hold of the lock. It stops
// early if the table was replaced (a restore) or dropped the watch.
func (s *Shard) fillWatch(t *table, w *slotWatch) {
	for {
		s.mu.Lock()
		if s.tab != t || !slices.Contains(t.watches, w) || w.ready() {
			s.mu.Unlock()
			return
		}
		w.walk(t, captureStep)
		s.mu.Unlock()
		runtime.Gosched() // let a waiting apply have the lock
	}
}
