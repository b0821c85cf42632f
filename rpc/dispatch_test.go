package rpc

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/floodgate/floodgate/cluster"
	"github.com/floodgate/floodgate/fsm"
	"github.com/floodgate/floodgate/policy"
)

// scripted is a groupNode and a forward whose answers a test writes: which
// group each key is in, who leads each group, and what each call answers.
// It records every call, so a test can tell what was sent where, and
// when. Its dispatcher waits at most scriptedWait.
type scripted struct {
	mu      sync.Mutex
	groupOf map[string]int
	leaders map[int]cluster.Route // a group without one has no leader
	changed chan struct{}         // closed when the table changes
	answer  func(ctx context.Context, at string, shard int, checks []fsm.Check) ([]policy.Result, error)
	calls   []sentCall
	routes  int // Route calls
	hinted  int // forwards to a not-leader answer's hint
}

// sentCall is one call of a dispatch to a group's leader.
type sentCall struct {
	at    string // "local", or the peer's address
	shard int
	keys  []string
	when  time.Time
}

const scriptedWait = 2 * time.Second

// newScripted returns a node that leads group 0 and whose peers n2 and n3
// (at addresses "n2:1", "n3:1") lead groups 1 and 2; key "gN/..." is in
// group N. By default every call answers each check allowed, with the
// group that answered as Remaining.
func newScripted() *scripted {
	return &scripted{
		groupOf: map[string]int{},
		leaders: map[int]cluster.Route{0: {Local: true}, 1: {NodeID: "n2", Addr: "n2:1"}, 2: {NodeID: "n3", Addr: "n3:1"}},
		changed: make(chan struct{}),
		answer: func(_ context.Context, _ string, shard int, checks []fsm.Check) ([]policy.Result, error) {
			return answered(shard, len(checks)), nil
		},
	}
}

// answered is a group's answer to n checks: all allowed, Remaining naming
// the group.
func answered(shard, n int) []policy.Result {
	res := make([]policy.Result, n)
	for i := range res {
		res[i] = policy.Result{Allowed: true, Remaining: int64(shard)}
	}
	return res
}

func (s *scripted) dispatcher() *dispatcher {
	return &dispatcher{node: s, forward: s.forward, wait: scriptedWait}
}

func (s *scripted) ID() string { return "n1" }

func (s *scripted) Route(shard int) (cluster.Route, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.routes++
	rt, ok := s.leaders[shard]
	if !ok {
		return cluster.Route{}, fmt.Errorf("group %d: %w", shard, cluster.ErrNoLeader)
	}
	return rt, nil
}

func (s *scripted) ShardOf(key string) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if g, ok := s.groupOf[key]; ok {
		return g, nil
	}
	var g int
	if _, err := fmt.Sscanf(key, "g%d/", &g); err != nil {
		return 0, fmt.Errorf("key %q: %w", key, cluster.ErrNotReady)
	}
	return g, nil
}

func (s *scripted) MetaChanged() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.changed
}

func (s *scripted) Submit(ctx context.Context, shard int, checks []fsm.Check) ([]policy.Result, error) {
	return s.call(ctx, "local", shard, checks)
}

func (s *scripted) forward(ctx context.Context, rt cluster.Route, shard int, checks []fsm.Check) ([]policy.Result, error) {
	res, err := s.call(ctx, rt.Addr, shard, checks)
	if rt.Hint {
		s.mu.Lock()
		s.hinted++
		s.mu.Unlock()
	}
	return res, err
}

func (s *scripted) call(ctx context.Context, at string, shard int, checks []fsm.Check) ([]policy.Result, error) {
	keys := make([]string, len(checks))
	for i, c := range checks {
		keys[i] = c.Key
	}
	s.mu.Lock()
	s.calls = append(s.calls, sentCall{at: at, shard: shard, keys: keys, when: time.Now()})
	answer := s.answer
	s.mu.Unlock()
	return answer(ctx, at, shard, checks)
}

// move puts key in group g and tells the dispatcher the table changed.
func (s *scripted) move(key string, g int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.groupOf[key] = g
	close(s.changed)
	s.changed = make(chan struct{})
}

// sentTo lists the calls as "at:key,key", in the order they were made.
func (s *scripted) sentTo() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for _, c := range s.calls {
		out = append(out, c.at+":"+strings.Join(c.keys, ","))
	}
	return out
}

func checksOf(keys ...string) []fsm.Check {
	p := &policy.Policy{}
	cs := make([]fsm.Check, len(keys))
	for i, k := range keys {
		cs[i] = fsm.Check{Key: k, Policy: p, Cost: 1}
	}
	return cs
}

// The checks of a dispatch go to their groups' leaders in one call per
// group, all groups at once, and each answer lands at its check's place.
func TestDispatchSendsEachGroupOnceAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newScripted()
		s.answer = func(_ context.Context, _ string, shard int, checks []fsm.Check) ([]policy.Result, error) {
			time.Sleep(10 * time.Millisecond) // a commit
			return answered(shard, len(checks)), nil
		}
		keys := []string{"g0/a", "g1/b", "g2/c", "g0/d", "g1/e"}
		start := time.Now()
		res, errs := s.dispatcher().dispatch(context.Background(), checksOf(keys...))
		if took := time.Since(start); took != 10*time.Millisecond {
			t.Errorf("took %v: the groups were not asked at once", took)
		}
		got := s.sentTo()
		slices.Sort(got)
		if want := []string{"local:g0/a,g0/d", "n2:1:g1/b,g1/e", "n3:1:g2/c"}; !slices.Equal(got, want) {
			t.Errorf("sent %q, want %q", got, want)
		}
		for i, k := range keys {
			if errs[i] != nil || !res[i].Allowed || res[i].Remaining != int64(k[1]-'0') {
				t.Errorf("%s: answered %+v, %v: not its group's answer", k, res[i], errs[i])
			}
		}
	})
}

// A node that does not lead the group says who does; the check goes there
// at once, without asking this node's table again.
func TestDispatchFollowsTheLeaderHint(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newScripted()
		s.answer = func(_ context.Context, at string, shard int, checks []fsm.Check) ([]policy.Result, error) {
			if at == "n2:1" {
				return nil, &cluster.NotLeaderError{Group: "group 1", LeaderID: "n3", LeaderAddr: "n3:1"}
			}
			return answered(shard, len(checks)), nil
		}
		start := time.Now()
		res, errs := s.dispatcher().dispatch(context.Background(), checksOf("g1/a"))
		if errs[0] != nil || !res[0].Allowed {
			t.Fatalf("answered %+v, %v", res[0], errs[0])
		}
		if got, want := s.sentTo(), []string{"n2:1:g1/a", "n3:1:g1/a"}; !slices.Equal(got, want) {
			t.Errorf("sent %q, want %q", got, want)
		}
		if s.routes != 1 || time.Since(start) != 0 {
			t.Errorf("%d routes in %v: the hint should be followed at once", s.routes, time.Since(start))
		}
		if s.hinted != 1 {
			t.Errorf("%d forwards marked as following a hint, want the second only", s.hinted)
		}
	})
}

// Only what was written nowhere is sent again; a check whose outcome is
// unknown is answered with that error after one call, whatever wraps it.
func TestDispatchRetriesOnlyWhatWasWrittenNowhere(t *testing.T) {
	for _, tc := range []struct {
		name  string
		err   error
		again bool
	}{
		{"not the leader, no hint", &cluster.NotLeaderError{Group: "group 1"}, true},
		{"no leader", cluster.ErrNoLeader, true},
		{"peer not ready", cluster.ErrNotReady, true},
		{"outcome unknown", fmt.Errorf("commit: %w", cluster.ErrUnavailable), false},
		{"unknown, wrapping not-leader", fmt.Errorf("%w: %w", cluster.ErrUnavailable, cluster.ErrNotLeader), false},
		{"connection reset mid-call", errors.New("read tcp: connection reset by peer"), false},
		{"refused as invalid", fmt.Errorf("checks[0].key: %w", ErrInvalid), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				s := newScripted()
				first := true
				s.answer = func(_ context.Context, _ string, shard int, checks []fsm.Check) ([]policy.Result, error) {
					if first {
						first = false
						return nil, tc.err
					}
					return answered(shard, len(checks)), nil
				}
				res, errs := s.dispatcher().dispatch(context.Background(), checksOf("g1/a"))
				calls := len(s.sentTo())
				switch {
				case tc.again && (calls != 2 || errs[0] != nil || !res[0].Allowed):
					t.Errorf("%d calls, answered %+v, %v: want it sent again and answered", calls, res[0], errs[0])
				case !tc.again && (calls != 1 || !errors.Is(errs[0], tc.err)):
					t.Errorf("%d calls, error %v: want one call and its error", calls, errs[0])
				}
			})
		})
	}
}

// While a group elects a leader the check waits, retrying at a bounded
// pace, and is answered once the leader is known.
func TestDispatchWaitsForAnElection(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newScripted()
		delete(s.leaders, 1)
		go func() {
			time.Sleep(300 * time.Millisecond)
			s.mu.Lock()
			s.leaders[1] = cluster.Route{NodeID: "n2", Addr: "n2:1"}
			s.mu.Unlock()
		}()
		start := time.Now()
		res, errs := s.dispatcher().dispatch(context.Background(), checksOf("g1/a"))
		took := time.Since(start)
		if errs[0] != nil || !res[0].Allowed {
			t.Fatalf("answered %+v, %v", res[0], errs[0])
		}
		if took < 300*time.Millisecond || took > 350*time.Millisecond {
			t.Errorf("answered after %v: want within a retry (50ms) of the election (300ms)", took)
		}
		if s.routes > 12 {
			t.Errorf("%d routes in %v: retries not paced", s.routes, took)
		}
		if got := s.sentTo(); len(got) != 1 {
			t.Errorf("sent %q: only the elected leader should have been asked", got)
		}
	})
}

// A check refused because its slot moved is routed again as soon as the
// table changes; the checks already answered are not sent again.
func TestDispatchRoutesMovedChecksAgain(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newScripted()
		moved := false
		s.answer = func(_ context.Context, _ string, shard int, checks []fsm.Check) ([]policy.Result, error) {
			if shard != 1 {
				return answered(shard, len(checks)), nil
			}
			// Group 1 answers b and refuses c: its slot left.
			if len(checks) != 2 {
				return nil, fmt.Errorf("group 1 got %d checks", len(checks))
			}
			if !moved {
				moved = true
				go func() {
					time.Sleep(5 * time.Millisecond)
					s.move("g1/c", 2)
				}()
			}
			return nil, cluster.NewPartialError(answered(1, 2), []error{nil, fmt.Errorf("group 1: %w", cluster.ErrMoved)})
		}
		start := time.Now()
		res, errs := s.dispatcher().dispatch(context.Background(), checksOf("g0/a", "g1/b", "g1/c"))
		for i, want := range []int64{0, 1, 2} {
			if errs[i] != nil || res[i].Remaining != want {
				t.Errorf("check %d answered %+v, %v: want group %d's answer", i, res[i], errs[i], want)
			}
		}
		got := s.sentTo()
		slices.Sort(got)
		if want := []string{"local:g0/a", "n2:1:g1/b,g1/c", "n3:1:g1/c"}; !slices.Equal(got, want) {
			t.Errorf("sent %q, want %q", got, want)
		}
		if took := time.Since(start); took != 5*time.Millisecond {
			t.Errorf("answered after %v: want when the table changed (5ms)", took)
		}
	})
}

// A slot that stays unowned (a move stuck between freeze and flip) is
// answered ErrMoved, nothing counted, once the wait is over.
func TestDispatchGivesUpOnAMoveAtTheWait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newScripted()
		s.answer = func(context.Context, string, int, []fsm.Check) ([]policy.Result, error) {
			return nil, fmt.Errorf("group 1: %w", cluster.ErrMoved)
		}
		start := time.Now()
		_, errs := s.dispatcher().dispatch(context.Background(), checksOf("g1/a"))
		if took := time.Since(start); took > scriptedWait {
			t.Errorf("answered after %v, past the wait (%v)", took, scriptedWait)
		}
		if !errors.Is(errs[0], cluster.ErrMoved) {
			t.Errorf("answered %v, want ErrMoved", errs[0])
		}
		if n := len(s.sentTo()); n < 2 || n > 45 {
			t.Errorf("sent %d times in %v: want retries paced by the table or 50ms", n, scriptedWait)
		}
	})
}

// A leader that never answers holds a check no longer than the wait; its
// outcome is unknown and it is not sent again.
func TestDispatchStalledLeaderEndsAtTheWait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newScripted()
		s.answer = func(ctx context.Context, _ string, _ int, _ []fsm.Check) ([]policy.Result, error) {
			<-ctx.Done()
			return nil, fmt.Errorf("%w: %w", cluster.ErrUnavailable, ctx.Err())
		}
		start := time.Now()
		_, errs := s.dispatcher().dispatch(context.Background(), checksOf("g1/a", "g0/b"))
		if took := time.Since(start); took != scriptedWait {
			t.Errorf("answered after %v, want the wait (%v)", took, scriptedWait)
		}
		for i, err := range errs {
			if !errors.Is(err, cluster.ErrUnavailable) {
				t.Errorf("check %d: %v, want an unknown outcome", i, err)
			}
		}
		if n := len(s.sentTo()); n != 2 {
			t.Errorf("%d calls, want one per group", n)
		}
	})
}

// The caller's own deadline ends the dispatch too, and its error says so.
func TestDispatchEndsWithItsCaller(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newScripted()
		delete(s.leaders, 1)
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel()
		start := time.Now()
		_, errs := s.dispatcher().dispatch(ctx, checksOf("g1/a"))
		if took := time.Since(start); took != 100*time.Millisecond {
			t.Errorf("answered after %v, want the caller's deadline (100ms)", took)
		}
		if !errors.Is(errs[0], context.DeadlineExceeded) {
			t.Errorf("answered %v, want the caller's deadline", errs[0])
		}
		if n := len(s.sentTo()); n != 0 {
			t.Errorf("%d calls to a group without a leader", n)
		}
	})
}

// A key whose group cannot be told fails alone; an atomic set goes whole
// to the group of its first check.
func TestDispatchGroupsByKey(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newScripted()
		cs := checksOf("g2/a", "elsewhere", "g0/b", "g1/c")
		cs[3].Joined = true // one set with g0/b, whatever c's own group
		res, errs := s.dispatcher().dispatch(context.Background(), cs)
		if !errors.Is(errs[1], cluster.ErrNotReady) {
			t.Errorf("key without a group answered %v", errs[1])
		}
		for i, want := range map[int]int64{0: 2, 2: 0, 3: 0} {
			if errs[i] != nil || res[i].Remaining != want {
				t.Errorf("check %d answered %+v, %v: want group %d's answer", i, res[i], errs[i], want)
			}
		}
		got := s.sentTo()
		slices.Sort(got)
		if want := []string{"local:g0/b,g1/c", "n3:1:g2/a"}; !slices.Equal(got, want) {
			t.Errorf("sent %q, want %q", got, want)
		}
	})
}

// A leader that hands over between two checks of one call answers the
// first and refuses the second as written nowhere: the second goes to the
// new leader, the first is not sent again.
func TestDispatchRoutesChecksRefusedByAHandOverAgain(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newScripted()
		s.answer = func(_ context.Context, at string, shard int, checks []fsm.Check) ([]policy.Result, error) {
			if at != "n2:1" {
				return answered(shard, len(checks)), nil
			}
			s.mu.Lock()
			s.leaders[1] = cluster.Route{NodeID: "n3", Addr: "n3:1"} // n2 handed group 1 over
			s.mu.Unlock()
			if len(checks) == 1 {
				return nil, &cluster.NotLeaderError{Group: "shard-1", LeaderID: "n3", LeaderAddr: "n3:1"}
			}
			return nil, cluster.NewPartialError(answered(1, 2), []error{nil, &cluster.NotLeaderError{Group: "shard-1", LeaderID: "n3", LeaderAddr: "n3:1"}})
		}
		res, errs := s.dispatcher().dispatch(context.Background(), checksOf("g1/a", "g1/b"))
		for i, want := range []int64{1, 1} {
			if errs[i] != nil || res[i].Remaining != want {
				t.Errorf("check %d answered %+v, %v", i, res[i], errs[i])
			}
		}
		if got, want := s.sentTo(), []string{"n2:1:g1/a,g1/b", "n3:1:g1/b"}; !slices.Equal(got, want) {
			t.Errorf("sent %q, want %q: only the refused check goes again", got, want)
		}
	})
}
