package fsm

import (
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"

	"github.com/floodgate/floodgate/policy"
	"github.com/floodgate/floodgate/window"
)

// Sweep budgets: how many records the expiry sweeper looks at per applied
// entry, per record an entry adds, and at least per tick. Its work follows
// the table's growth, not its traffic: a check on a held key (most checks)
// adds nothing to reclaim, and an expired state checked again is reused in
// place. Two per record added pass the table faster than new keys fill it;
// a few per entry reclaim states that expire under traffic on other keys,
// ticks those of an idle shard. Each record looked at costs a few cache
// misses (its identity, its state), which per check made the sweeper a
// fifth of a replica's CPU under batches of held keys.
const (
	sweepPerEntry = 16
	sweepPerAdd   = 2
	sweepPerTick  = 1024
	// maxTickSweep caps a tick's sweep. A tick looks at a 32nd of the
	// records, so that an idle group frees its expired states within 32
	// ticks, but draining 2 million expired states that held the group's
	// lock 18-22 ms a tick, up to 50-59 ms, for a check arriving
	// meanwhile, against 6.0-6.5 ms and up to 21-33 ms capped
	// (BenchmarkIdleTick); a larger group ticks more often instead
	// (TickInterval).
	maxTickSweep = 16384
	// sweepPerRefusal is what a Full verdict looks at first (Vet),
	// once per entry applied: a flood of refused checks cannot make the
	// sweeper (which holds the lock applies need) work more than that.
	sweepPerRefusal = 64
)

// Shard is the state machine of one shard's Raft group: the state of every
// limit of every key of the shard. It never reads the clock: time is the
// leader's timestamp in each entry, clamped so it never goes backwards.
//
// On the leader it also keeps the fast-mode overlay (fast.go): states that
// include decisions answered but not yet committed. The overlay is never
// part of the replicated state.
type Shard struct {
	mu  sync.Mutex
	tab *table
	now int64  // log time: the latest timestamp applied
	ids []byte // scratch: the identities of the current item's states
	// tt is scratch too: the states of the check in hand (gather). On the
	// stack it escaped (it points into itself), an allocation per check.
	tt touched
	// vetLogs is Vet's scratch: the sliding logs a set grows (Call).
	vetLogs []vetLog
	// reservedStates and reservedBytes are what Vet took and the caller
	// has not yet released: a leader's checks on their way to the log
	// (Vet). Atomic, so that Release takes no lock on the Allow path;
	// Vet reads them with mu held.
	reservedStates, reservedBytes atomic.Int64
	// applied counts entries applied; refusalSweep is its value at Vet's
	// last sweep, which sweeps once per entry at most.
	applied, refusalSweep uint64
	ov                    overlay
	// ovLen is len(ov.entries), written with mu held (noteOverlay) and
	// read without it: strict calls ask for pending fast decisions on
	// every call, and the overlay is empty but while fast checks run.
	ovLen atomic.Int64
	own   *ownership // slot ownership (own.go); nil in a legacy shard
	// snapSize is the size of the last whole capture's buffer, plus room.
	snapSize int
	// sparseExports counts exports that read a watch's list (watch.go),
	// for tests.
	sparseExports int
}

// NewShard returns an empty shard state machine.
func NewShard() *Shard {
	return &Shard{tab: newTable(), ov: overlay{entries: map[string]*overlayState{}}}
}

// Apply implements raft.FSM. For a cmdAllow entry it returns
// []policy.Result, one per check in order; for a corrupt entry an error
// (every replica reaches the same error, so they stay identical). It
// panics, stopping the node, on an entry of an unknown type or a body
// version newer than it knows (ErrUnknownEntry; doc.go says why).
func (s *Shard) Apply(l *raft.Log) interface{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.apply(l)
}

// ApplyBatch implements raft.BatchingFSM, taking the lock once per batch.
func (s *Shard) ApplyBatch(logs []*raft.Log) []interface{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]interface{}, len(logs))
	for i, l := range logs {
		out[i] = s.apply(l)
	}
	return out
}

func (s *Shard) apply(l *raft.Log) interface{} {
	res := s.applyEntry(l)
	if err, ok := res.(error); ok && newerFormat(err) {
		stopNewer("shard", l.Index, l.Data[0], err)
	}
	return res
}

func (s *Shard) applyEntry(l *raft.Log) interface{} {
	if l.Type != raft.LogCommand || len(l.Data) == 0 {
		return nil
	}
	s.applied++
	typ, body := l.Data[0], l.Data[1:]
	switch typ {
	case cmdAllow:
		knownVersion(l.Index, typ, body, allowVersion)
		e, err := decodeAllow(body)
		if err != nil {
			return fmt.Errorf("entry %d: %w", l.Index, err)
		}
		s.advance(e.ts)
		added := s.tab.added
		out := make([]policy.Result, len(e.checks))
		var notOwned []bool
		for i := 0; i < len(e.checks); {
			j := i + 1
			for j < len(e.checks) && e.checks[j].joined {
				j++
			}
			if !s.ownsAll(e.checks[i:j]) {
				// Counted nowhere: a key's slot moved (or is moving).
				if notOwned == nil {
					notOwned = make([]bool, len(e.checks))
				}
				for k := i; k < j; k++ {
					notOwned[k] = true
				}
			} else if j == i+1 {
				c := &e.checks[i]
				out[i] = s.eval(&e.policies[c.policy], c.key, c.cost, c.elastic)
			} else {
				s.evalSet(&e.policies[e.checks[i].policy], e.checks[i:j], out[i:j])
			}
			i = j
		}
		s.tab.sweep(s.now, sweepPerEntry+sweepPerAdd*int(s.tab.added-added))
		if notOwned != nil {
			return &AllowResults{Results: out, NotOwned: notOwned}
		}
		return out
	case cmdHits:
		knownVersion(l.Index, typ, body, hitsVersion)
		e, err := decodeHits(body)
		if err != nil {
			return fmt.Errorf("entry %d: %w", l.Index, err)
		}
		added := s.tab.added
		for i := range e.hits {
			if s.owns(e.hits[i].key) {
				s.replay(&e.policies[e.hits[i].policy], &e.hits[i])
			}
		}
		s.advance(e.ts)
		s.tab.sweep(s.now, sweepPerEntry+sweepPerAdd*int(s.tab.added-added))
		return nil
	case cmdReset:
		knownVersion(l.Index, typ, body, resetVersion)
		ts, p, key, err := decodeReset(body)
		if err != nil {
			return fmt.Errorf("entry %d: %w", l.Index, err)
		}
		s.advance(ts)
		if !s.owns(key) {
			return fmt.Errorf("entry %d: %w", l.Index, ErrNotOwned)
		}
		return s.reset(&p, key)
	case cmdInit, cmdFreeze, cmdImport, cmdDrop:
		knownVersion(l.Index, typ, body, ownVersion)
		if err := s.applyOwn(typ, body); err != nil {
			return fmt.Errorf("entry %d: %w", l.Index, err)
		}
		return nil
	case cmdRestore:
		knownVersion(l.Index, typ, body, restoreVersion)
		if err := s.applyRestore(body); err != nil {
			return fmt.Errorf("entry %d: %w", l.Index, err)
		}
		return nil
	case cmdTick:
		ts, err := decodeTick(body)
		if err != nil {
			return fmt.Errorf("entry %d: %w", l.Index, err)
		}
		s.advance(ts)
		s.tab.sweep(s.now, tickSweep(int(s.tab.used)))
		return nil
	}
	stop("shard", l.Index, typ, 0, 0)
	return nil
}

// knownVersion stops the node on a body version newer than newest. Older
// and malformed bodies are left to the decoders, which refuse them with
// ErrCorrupt.
func knownVersion(index uint64, typ byte, body []byte, newest byte) {
	if len(body) > 0 && body[0] > newest {
		stop("shard", index, typ, body[0], newest)
	}
}

// advance moves log time forward to ts; a new leader with a clock behind
// the old one's cannot move it back.
func (s *Shard) advance(ts int64) {
	if ts > s.now {
		s.now = ts
	}
}

// touched is the set of states one check works on: one per limit of its
// policy and one for the reduced limit.
type touched struct {
	n      int
	states [policy.MaxLimits + 1]*window.State
	fresh  [policy.MaxLimits + 1]window.State
	recs   [policy.MaxLimits + 1]uint32
	found  [policy.MaxLimits + 1]bool
	// heap is what a found state's buffer held when gathered with forget
	// (after a stale one was zeroed): settle counts the change.
	heap [policy.MaxLimits + 1]int
	// stale: found, but past its expiry (and, with forget, zeroed): a
	// state the sweeper may or may not have freed yet, so no answer may
	// depend on it having been there.
	stale [policy.MaxLimits + 1]bool
	ends  [policy.MaxLimits + 2]int // identity i is s.ids[ends[i]:ends[i+1]]
}

// limitOf returns the i-th state's limit of p and the scope its counters
// live in: the policy's name, and a scope of their own for the reduced
// limit (a limit may share its window with one of the main limits).
func limitOf(p *policy.Policy, i int) (*window.Limit, string) {
	if i < len(p.Limits) {
		return &p.Limits[i].Limit, p.Name
	}
	return &p.Reduced.Limit, p.Name + "/reduced"
}

// gather finds the states a check of p on key works on: stored ones, or
// zero states not stored yet. With forget, a stored state past its expiry
// is zeroed first (it means nothing any more; zeroing frees its buffer);
// the fast path reads without writing, so it never changes the replicated
// state outside Apply.
func (s *Shard) gather(t *touched, p *policy.Policy, key []byte, forget bool) {
	s.ids = s.ids[:0]
	t.n = p.States()
	for i := 0; i < t.n; i++ {
		l, scope := limitOf(p, i)
		s.ids = appendID(s.ids, key, scope, l)
		t.ends[i+1] = len(s.ids)
		t.fresh[i], t.stale[i] = window.State{}, false
		rn, ok := s.tab.lookup(s.ids[t.ends[i]:t.ends[i+1]])
		if !ok {
			t.states[i], t.found[i] = &t.fresh[i], false
			continue
		}
		r := s.tab.rec(rn)
		if forget {
			r = s.tab.write(rn) // what the check changes
		}
		// The record's own expiry, not l's: a stretched limit reads a
		// bucket's fraction of a nanosecond over another limit, and a
		// state forgotten must be full however it is read (table.go).
		if r.expiry() <= s.now {
			if !forget {
				t.states[i], t.found[i] = &t.fresh[i], false
				continue
			}
			s.tab.resize(r, -l.HeapBytes(&r.st))
			r.st, t.stale[i] = window.State{}, true
		}
		if forget {
			t.heap[i] = l.HeapBytes(&r.st)
		}
		t.states[i], t.recs[i], t.found[i] = &r.st, rn, true
	}
}

func (s *Shard) id(t *touched, i int) []byte { return s.ids[t.ends[i]:t.ends[i+1]] }

// settle counts what a check gathered with forget changed in the stored
// states' buffers (a log's ring grown, shrunk or freed) in the table's
// bytes.
func (s *Shard) settle(t *touched, p *policy.Policy) {
	for i := 0; i < t.n; i++ {
		if t.found[i] {
			l, _ := limitOf(p, i)
			s.tab.resize(s.tab.rec(t.recs[i]), l.HeapBytes(t.states[i])-t.heap[i])
		}
	}
}

// store keeps what a decision counted: states not stored yet get records.
func (s *Shard) store(t *touched) {
	for i := 0; i < t.n; i++ {
		if !t.found[i] && t.fresh[i] != (window.State{}) {
			t.recs[i] = s.tab.insert(s.id(t, i), t.fresh[i])
		}
	}
}

// eval answers one check of the entry being applied.
func (s *Shard) eval(p *policy.Policy, key []byte, cost int64, elastic bool) policy.Result {
	t := &s.tt
	s.gather(t, p, key, true)
	res := p.Evaluate(t.states[:t.n], s.now, cost, elastic)
	s.settle(t, p) // a denial may have dropped aged timestamps too
	if res.Outcome != policy.Denied {
		s.store(t)
		s.mirror(t, p, cost, res.Outcome, elastic)
	}
	return res
}

// replay counts a fast-mode decision exactly as the leader answered it.
func (s *Shard) replay(p *policy.Policy, h *entryHit) {
	s.advance(h.time)
	if h.outcome == policy.Denied {
		return
	}
	t := &s.tt
	s.gather(t, p, h.key, true)
	// At the time the leader decided, not the log's: an entry that
	// committed between the decision and its hits (a strict check, a
	// tick) moved the log time on, and counting the hits then charged a
	// window the leader had not (a fixed window's next minute, a month's
	// next) and made the retry-after it answered too short. A state that
	// expired between the decision and its hits is counted from fresh, as
	// gather finds it: some replicas may have freed it (the sweeper, a
	// snapshot) and others not, so no replica may count on it. For a log
	// or a fixed window that changes no answer; a bucket or a sliding
	// counter may read fuller than under strict by what refilled between
	// the decision and that expiry (property_test.go injects entries only
	// before it).
	p.Record(t.states[:t.n], min(s.now, h.time), h.cost, h.outcome, h.elastic)
	s.settle(t, p)
	s.store(t)
}

// reset forgets every state of key under p; it returns how many went of
// those still live (an expired one is gone whether or not the sweeper
// reached it, which differs between replicas).
func (s *Shard) reset(p *policy.Policy, key []byte) int {
	t := &s.tt
	s.gather(t, p, key, true)
	n := 0
	for i := 0; i < t.n; i++ {
		if t.found[i] {
			s.tab.remove(t.recs[i])
			if !t.stale[i] {
				n++
			}
		}
		// The leader's overlay forgets the counts too, but keeps its entry
		// (and its pending count) so releases of hits still in flight stay
		// in step.
		if o := s.ov.entries[string(s.id(t, i))]; o != nil {
			o.st = window.State{}
		}
	}
	return n
}

// Stats describes the shard's state.
type Stats struct {
	// States is the number of limit states held (one per key and limit).
	States int
	// Bytes is what the states hold (records, identities, buffers; orphans
	// included): what --max-state-mib bounds.
	Bytes int64
	// Orphans is the number of states of slots the group no longer holds
	// that the sweeper has yet to free (orphans.go): memory, not states.
	Orphans int
	// Now is the log time of the latest applied entry, Unix ns.
	Now int64
	// Records is how many record numbers the table uses (live, free and
	// orphans): what a tick's sweep is a share of (TickInterval).
	Records int
}

// tickSweep is how many records a tick looks at, of records in all: a
// 32nd, at least sweepPerTick and at most maxTickSweep.
func tickSweep(records int) int {
	return min(max(sweepPerTick, records/32), maxTickSweep)
}

// TickInterval is how often an idle group of records records should
// tick, base apart for a group whose ticks each look at a 32nd of them:
// one whose 32nd is over maxTickSweep ticks as much more often, so that
// its sweeper still passes every record within 32 ticks of base.
func TickInterval(base time.Duration, records int) time.Duration {
	if per := records / 32; per > maxTickSweep {
		return base * maxTickSweep / time.Duration(per)
	}
	return base
}

// Stats reports the shard's size and log time.
func (s *Shard) Stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	return Stats{States: s.tab.held(), Bytes: s.tab.bytes, Orphans: s.tab.orphans(), Now: s.now, Records: int(s.tab.used)}
}
