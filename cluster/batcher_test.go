package cluster

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"

	"github.com/floodgate/floodgate/cluster/hashing"
	"github.com/floodgate/floodgate/fsm"
	"github.com/floodgate/floodgate/policy"
	"github.com/floodgate/floodgate/window"
)

// gatedShard is a shard state machine whose command entries wait at a
// gate until the test opens it (closes the channel), and which records
// how many checks each applied entry carried.
type gatedShard struct {
	shard *fsm.Shard
	gate  chan struct{}
	delay time.Duration // how long each command entry takes to apply (fake time)

	mu    sync.Mutex
	sizes []int
}

func (g *gatedShard) Apply(l *raft.Log) any {
	if l.Type == raft.LogCommand {
		<-g.gate
		time.Sleep(g.delay)
	}
	resp := g.shard.Apply(l)
	n := -1
	switch res := resp.(type) {
	case []policy.Result:
		n = len(res)
	case *fsm.AllowResults:
		n = len(res.Results)
	}
	if n >= 0 {
		g.mu.Lock()
		g.sizes = append(g.sizes, n)
		g.mu.Unlock()
	}
	return resp
}

func (g *gatedShard) Snapshot() (raft.FSMSnapshot, error) { return g.shard.Snapshot() }
func (g *gatedShard) Restore(rc io.ReadCloser) error      { return g.shard.Restore(rc) }

func (g *gatedShard) entrySizes() []int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return slices.Clone(g.sizes)
}

// batcherRig is a one-replica shard group in memory (stores, snapshots,
// transport) with a batcher on it: inside a synctest bubble, elections
// and commits run on fake time.
type batcherRig struct {
	r  *raft.Raft
	g  *gatedShard
	b  *batcher
	nl error // what notLeader returns
}

// newBatcherRig starts the group, as its leader when lead is set (else a
// replica that never hears of a leader).
func newBatcherRig(t *testing.T, maxBatch int, lead bool) *batcherRig {
	t.Helper()
	conf := raft.DefaultConfig()
	conf.LocalID = "b0"
	conf.Logger = hclog.NewNullLogger()
	conf.HeartbeatTimeout, conf.ElectionTimeout = 50*time.Millisecond, 50*time.Millisecond
	conf.LeaderLeaseTimeout, conf.CommitTimeout = 50*time.Millisecond, 5*time.Millisecond
	store := raft.NewInmemStore()
	addr, trans := raft.NewInmemTransport("b0")
	rig := &batcherRig{g: &gatedShard{shard: fsm.NewShard(), gate: make(chan struct{})}}
	rig.nl = &NotLeaderError{Group: "shard-0"}
	r, err := raft.NewRaft(conf, rig.g, store, store, raft.NewInmemSnapshotStore(), trans)
	if err != nil {
		t.Fatal(err)
	}
	rig.r = r
	if lead {
		if err := r.BootstrapCluster(raft.Configuration{Servers: []raft.Server{{ID: conf.LocalID, Address: addr}}}).Error(); err != nil {
			t.Fatal(err)
		}
		for r.State() != raft.Leader {
			time.Sleep(10 * time.Millisecond)
		}
	}
	cfg := Config{MaxBatch: maxBatch, MaxInFlight: 1, CommitTimeout: time.Second}
	rig.b = newBatcher("shard-0", r, cfg, nil, func() error { return rig.nl }, func(*policy.Policy) bool { return false })
	return rig
}

// stop opens the gate, closes the batcher and shuts the group down.
func (rig *batcherRig) stop(t *testing.T) {
	select {
	case <-rig.g.gate:
	default:
		close(rig.g.gate)
	}
	rig.b.close()
	if err := rig.r.Shutdown().Error(); err != nil {
		t.Error(err)
	}
}

type submitted struct {
	res []policy.Result
	err error
}

// submit sends n checks of cost 1 on key and waits until every goroutine
// is idle, so requests reach the batcher in the order they are sent.
func (rig *batcherRig) submit(ctx context.Context, p *policy.Policy, key string, n int) chan submitted {
	checks := make([]fsm.Check, n)
	for i := range checks {
		checks[i] = fsm.Check{Key: key, Policy: p, Cost: 1}
	}
	out := make(chan submitted, 1)
	go func() {
		res, err := rig.b.submit(ctx, checks)
		out <- submitted{res, err}
	}()
	synctest.Wait()
	return out
}

func threePerMinute() *policy.Policy {
	return &policy.Policy{Limits: []policy.Limit{{Limit: window.Limit{Algorithm: window.SlidingLog, Limit: 3, Window: int64(time.Minute)}}}}
}

// A lone request goes out at once; requests arriving while it is in
// flight go out together in the next entry, and each gets the answers to
// its own checks, in log order.
func TestBatcherGroupCommit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rig := newBatcherRig(t, 3, true)
		defer rig.stop(t)
		p := threePerMinute()
		first := rig.submit(t.Context(), p, "k", 1)
		var later []chan submitted
		for range 4 {
			later = append(later, rig.submit(t.Context(), p, "k", 1))
		}
		if got := rig.g.entrySizes(); len(got) != 0 {
			t.Fatalf("entries applied before the gate opened: %v", got)
		}
		close(rig.g.gate)
		// The first check, then three (the most an entry carries), then
		// the last: a limit of 3 admits the first three.
		want := []bool{true, true, true, false, false}
		for i, ch := range append([]chan submitted{first}, later...) {
			s := <-ch
			if s.err != nil || len(s.res) != 1 {
				t.Fatalf("request %d: %v, %v", i, s.res, s.err)
			}
			if s.res[0].Allowed != want[i] {
				t.Errorf("request %d allowed=%v, want %v (answers out of order)", i, s.res[0].Allowed, want[i])
			}
		}
		if got := rig.g.entrySizes(); !slices.Equal(got, []int{1, 3, 1}) {
			t.Fatalf("entries carried %v checks, want [1 3 1]", got)
		}
	})
}

// An entry carries at most maxBatch checks, whole requests only; a
// request larger than maxBatch goes out alone rather than never.
func TestBatcherRespectsMaxBatch(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rig := newBatcherRig(t, 3, true)
		defer rig.stop(t)
		p := &policy.Policy{Limits: []policy.Limit{{Limit: window.Limit{Algorithm: window.FixedWindow, Limit: 100, Window: int64(time.Minute)}}}}
		var chs []chan submitted
		sizes := []int{1, 1, 1, 2, 4, 1}
		for i, n := range sizes {
			chs = append(chs, rig.submit(t.Context(), p, fmt.Sprint("k", i), n))
		}
		close(rig.g.gate)
		for i, ch := range chs {
			if s := <-ch; s.err != nil || len(s.res) != sizes[i] {
				t.Fatalf("request %d of %d checks: %d answers, %v", i, sizes[i], len(s.res), s.err)
			}
		}
		// In flight alone: 1. Then 1+1 (adding 2 would make 4), 2, the
		// oversized 4 alone, 1.
		if got := rig.g.entrySizes(); !slices.Equal(got, []int{1, 2, 2, 4, 1}) {
			t.Fatalf("entries carried %v checks, want [1 2 2 4 1]", got)
		}
	})
}

// Refusals before the log are NotLeader (safe to retry elsewhere): a
// replica that does not lead writes nothing, and requests still queued
// when the batcher closes are refused, while the entry in flight is
// answered.
func TestBatcherNotLeaderBeforeTheLog(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		follower := newBatcherRig(t, 3, false)
		close(follower.g.gate)
		if _, err := follower.b.submit(t.Context(), []fsm.Check{{Key: "k", Policy: threePerMinute(), Cost: 1}}); !errors.Is(err, ErrNotLeader) {
			t.Fatalf("submit on a follower: %v", err)
		}
		follower.stop(t)
		if got := follower.g.entrySizes(); len(got) != 0 {
			t.Fatalf("a follower's batcher wrote %v", got)
		}

		rig := newBatcherRig(t, 3, true)
		p := threePerMinute()
		inFlight := rig.submit(t.Context(), p, "k", 1)
		queued := rig.submit(t.Context(), p, "k", 2)
		closed := make(chan struct{})
		go func() {
			rig.b.close()
			close(closed)
		}()
		synctest.Wait()
		if s := <-queued; !errors.Is(s.err, ErrNotLeader) {
			t.Fatalf("request queued at close: %v, %v", s.res, s.err)
		}
		select {
		case <-closed:
			t.Fatal("close returned with an entry in flight")
		default:
		}
		close(rig.g.gate)
		<-closed
		if s := <-inFlight; s.err != nil || len(s.res) != 1 || !s.res[0].Allowed {
			t.Fatalf("request in flight at close: %v, %v", s.res, s.err)
		}
		if _, err := rig.b.submit(t.Context(), []fsm.Check{{Key: "k", Policy: p, Cost: 1}}); !errors.Is(err, ErrNotLeader) {
			t.Fatalf("submit after close: %v", err)
		}
		if err := rig.r.Shutdown().Error(); err != nil {
			t.Fatal(err)
		}
		if got := rig.g.entrySizes(); !slices.Equal(got, []int{1}) {
			t.Fatalf("entries %v: the refused request was written", got)
		}
	})
}

// A caller that stops waiting after its entry reached the log is told
// the outcome is unknown, never NotLeader: the entry still applies.
func TestBatcherUnknownOutcomeAfterTheLog(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rig := newBatcherRig(t, 3, true)
		defer rig.stop(t)
		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		defer cancel()
		ch := rig.submit(ctx, threePerMinute(), "k", 1)
		time.Sleep(time.Second)
		synctest.Wait()
		s := <-ch
		if !errors.Is(s.err, ErrUnavailable) || errors.Is(s.err, ErrNotLeader) {
			t.Fatalf("caller that gave up after the log: %v", s.err)
		}
		close(rig.g.gate)
		synctest.Wait()
		if got := rig.g.entrySizes(); !slices.Equal(got, []int{1}) {
			t.Fatalf("entries %v: the check whose outcome was unknown did not apply", got)
		}
	})
}

// Requests that share an entry with checks the group does not own: each
// request gets its own answers, the checks for slots the group does not
// own fail alone with ErrMoved (counted nowhere), and a request all of
// whose checks it owns gets plain results.
func TestBatcherNotOwnedChecksFailAlone(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rig := newBatcherRig(t, 10, true)
		defer rig.stop(t)
		close(rig.g.gate)
		if err := rig.r.Apply(fsm.EncodeInit(0, 2, []uint32{0}), time.Second).Error(); err != nil {
			t.Fatal(err)
		}
		rig.g.gate = make(chan struct{})
		key := func(slot int) string {
			for i := 0; ; i++ {
				if k := fmt.Sprintf("k%d", i); hashing.ShardOf(k, 2) == slot {
					return k
				}
			}
		}
		p := threePerMinute()
		first := rig.submit(t.Context(), p, key(0), 1) // in flight alone
		mixed := make(chan submitted, 1)
		go func() {
			res, err := rig.b.submit(t.Context(), []fsm.Check{{Key: key(1), Policy: p, Cost: 1}, {Key: key(0), Policy: p, Cost: 1}})
			mixed <- submitted{res, err}
		}()
		synctest.Wait()
		owned := rig.submit(t.Context(), p, key(0), 1)
		close(rig.g.gate)
		if s := <-first; s.err != nil || !s.res[0].Allowed {
			t.Fatalf("first: %v %v", s.res, s.err)
		}
		s := <-mixed
		var pe *PartialError
		if !errors.As(s.err, &pe) || !errors.Is(pe.Errs[0], ErrMoved) || pe.Errs[1] != nil || !pe.Results[1].Allowed {
			t.Fatalf("mixed request: %v, %v", s.res, s.err)
		}
		if s := <-owned; s.err != nil || len(s.res) != 1 || !s.res[0].Allowed || s.res[0].Remaining != 0 {
			t.Fatalf("owned request after it: %v %v (its count must follow the mixed request's one owned check)", s.res, s.err)
		}
		if got := rig.g.entrySizes(); !slices.Equal(got, []int{1, 3}) {
			t.Errorf("entries carried %v checks, want [1 3]", got)
		}
	})
}
