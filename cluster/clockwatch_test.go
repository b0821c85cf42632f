package cluster

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	metav1 "github.com/floodgate/floodgate/proto/floodgate/meta/v1"
)

// skewedPeers answers each address's clock reading with the (fake) time
// plus its skew; a silent one does not answer (paused, cut off, or of an
// older release).
type skewedPeers map[string]time.Duration

const silent = time.Duration(math.MinInt64)

func (p skewedPeers) read(_ context.Context, addr string) (time.Time, error) {
	skew := p[addr]
	if skew == silent {
		return time.Time{}, ErrNoLeader
	}
	return time.Now().Add(skew), nil
}

func (p skewedPeers) addrs() []string { return slices.Sorted(maps.Keys(p)) }

// watch runs a clock watch over peers until ctx ends; the state tells.
func watch(ctx context.Context, peers skewedPeers) *clockState {
	return watchWith(ctx, peers.addrs, peers.read)
}

// watchWith runs a clock watch (500ms bound) over members, reading their
// clocks with read, until ctx ends; the state tells.
func watchWith(ctx context.Context, members func() []string, read func(context.Context, string) (time.Time, error)) *clockState {
	st := &clockState{failed: make(chan struct{})}
	w := clockWatch{max: 500 * time.Millisecond, members: members, read: read, log: slog.New(slog.DiscardHandler), state: st}
	go w.run(ctx)
	return st
}

// paceLog records when a clock watch read, in (fake) time since it was
// made, for a test to compare with the pace it expects.
type paceLog struct {
	start time.Time
	mu    sync.Mutex
	at    []time.Duration
}

func newPaceLog() *paceLog { return &paceLog{start: time.Now()} }

func (p *paceLog) mark() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.at = append(p.at, time.Since(p.start))
}

func (p *paceLog) want(t *testing.T, want []time.Duration) {
	t.Helper()
	p.mu.Lock()
	defer p.mu.Unlock()
	if !slices.Equal(p.at, want) {
		t.Fatalf("read at %v, want %v", p.at, want)
	}
}

func failedBy(st *clockState, d time.Duration) bool {
	select {
	case <-st.failed:
		return true
	case <-time.After(d):
		return false
	}
}

// A node whose clock most of the others find off stops after
// clockStrikes readings in a row, naming the offset and the flag; a node
// that is in step, or alone against a single peer (a tie), or facing one
// off peer among good ones, never does.
func TestClockWatch(t *testing.T) {
	cases := []struct {
		name  string
		peers skewedPeers // "d" is never answered: an unreachable member
		stops bool
	}{
		{"in step", skewedPeers{"a": 3 * time.Millisecond, "b": -2 * time.Millisecond, "c": silent}, false},
		{"this node behind", skewedPeers{"a": 2 * time.Second, "b": 2 * time.Second}, true},
		{"this node ahead", skewedPeers{"a": -time.Hour, "b": -time.Hour, "c": -time.Hour, "d": silent}, true},
		{"one peer off", skewedPeers{"a": 2 * time.Second, "b": 0}, false},
		{"a tie", skewedPeers{"a": 2 * time.Second}, false},
		// Reaching only the two skewed nodes of five (a rolling upgrade, a
		// partition): the silent ones count for this node.
		{"two skewed, two silent", skewedPeers{"a": 2 * time.Second, "b": 2 * time.Second, "c": silent, "d": silent}, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				ctx, cancel := context.WithCancel(context.Background())
				defer cancel()
				st := watch(ctx, c.peers)
				// Read at start, then again clockRecheck after each bad reading.
				if failedBy(st, (clockStrikes-1)*clockRecheck-clockRecheck/2) {
					t.Fatal("stopped before its strikes were up")
				}
				stopped := failedBy(st, clockEvery)
				if stopped != c.stops {
					t.Fatalf("stopped: %v, want %v", stopped, c.stops)
				}
				if !stopped {
					return
				}
				err := st.err
				if !errors.Is(err, ErrClock) || !strings.Contains(err.Error(), "--max-clock-offset 500ms") {
					t.Fatalf("error %v", err)
				}
				if want := map[bool]string{true: "2s behind the clock of 2 of the 2 other nodes", false: "1h0m0s ahead of the clock of 3 of the 4 other nodes"}[c.name == "this node behind"]; !strings.Contains(err.Error(), want) {
					t.Fatalf("error %q does not say %q", err, want)
				}
			})
		})
	}
}

// One good reading between bad ones starts the count again: only
// clockStrikes readings in a row stop the node.
func TestClockWatchStrikesInARow(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		peers := skewedPeers{"a": 2 * time.Second, "b": 2 * time.Second}
		readings := 0
		read := func(ctx context.Context, addr string) (time.Time, error) {
			if addr == "a" {
				readings++
			}
			if readings%clockStrikes == 0 { // every third round in step
				return time.Now(), nil
			}
			return peers.read(ctx, addr)
		}
		st := watchWith(ctx, peers.addrs, read)
		if failedBy(st, 10*clockStrikes*clockEvery) {
			t.Fatal("stopped without clockStrikes bad readings in a row")
		}
	})
}

// The first reading is at start and the next ones every clockEvery while
// the clock is in step; after a bad reading they come every clockRecheck,
// so a clock that jumps stops the node within clockEvery plus
// clockStrikes-1 rechecks, and one bad reading alone returns the watch to
// its slow pace.
func TestClockWatchPace(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		reads := newPaceLog() // when peer "a" was read
		var skew atomic.Int64
		read := func(_ context.Context, addr string) (time.Time, error) {
			if addr == "a" {
				reads.mark()
			}
			return time.Now().Add(time.Duration(skew.Load())), nil
		}
		setSkew := func(d time.Duration) { skew.Store(int64(d)) }
		st := watchWith(ctx, func() []string { return []string{"a", "b"} }, read)

		synctest.Wait()
		time.Sleep(2*clockEvery + time.Millisecond) // in step: readings at 0, 5 s, 10 s
		setSkew(2 * time.Second)                    // one bad reading at 15 s ...
		time.Sleep(clockEvery)
		setSkew(0) // ... then in step at its recheck, 16 s, and slow again: 21 s
		time.Sleep(clockEvery + 2*clockRecheck)
		setSkew(-2 * time.Second) // off from 22 s: read at 26, 27 and 28 s
		if failedBy(st, 28*time.Second-clockRecheck/2-time.Since(reads.start)) {
			t.Fatal("stopped before its third bad reading")
		}
		if !failedBy(st, clockRecheck) {
			t.Fatal("not stopped by three bad readings a recheck apart")
		}
		reads.want(t, []time.Duration{0, 5 * time.Second, 10 * time.Second, 15 * time.Second, 16 * time.Second, 21 * time.Second,
			26 * time.Second, 27 * time.Second, 28 * time.Second})
	})
}

// A starting node reads every clockRecheck until a peer answers (its
// members are still to be learnt, or still starting), then every
// clockEvery: a node that starts with its clock off stops within seconds
// of its peers answering.
func TestClockWatchStartPace(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		reads := newPaceLog()
		members := func() []string {
			reads.mark()
			if time.Since(reads.start) < 2*time.Second {
				return nil // the member list is still to come
			}
			return []string{"a", "b"}
		}
		read := func(_ context.Context, addr string) (time.Time, error) {
			if time.Since(reads.start) < 3*time.Second {
				return time.Time{}, ErrNoLeader // still starting
			}
			return time.Now(), nil
		}
		watchWith(ctx, members, read)
		time.Sleep(14 * time.Second)
		synctest.Wait()
		reads.want(t, []time.Duration{0, time.Second, 2 * time.Second, 3 * time.Second, 8 * time.Second, 13 * time.Second})
	})
}

// clockPeers answers Clock from skewedPeers; nothing else is called.
type clockPeers struct {
	deadSeeds
	skew skewedPeers
}

func (p *clockPeers) Clock(ctx context.Context, addr string) (time.Time, error) {
	if p.skew[addr] == noTime {
		return time.Time{}, fmt.Errorf("%s %w", addr, ErrNoClock)
	}
	return p.skew.read(ctx, addr)
}

// noTime marks a member of an older release, which tells no time.
const noTime = time.Duration(math.MaxInt64)

// A leader hands its group only to a member whose clock it reads within
// --max-clock-offset of its own (or that tells no time: an older
// release); one beyond it, or silent, is passed over, and with the check
// off every member passes.
func TestClockInStep(t *testing.T) {
	peers := &clockPeers{skew: skewedPeers{"near": 300 * time.Millisecond, "ahead": 3 * time.Second, "behind": -time.Second,
		"silent": silent, "old": noTime}}
	var log lockedBuffer
	for _, c := range []struct {
		addr   string
		max    time.Duration
		inStep bool
		logs   string
	}{
		{"near", 500 * time.Millisecond, true, ""},
		{"ahead", 500 * time.Millisecond, false, "offset=3s"},
		{"behind", 500 * time.Millisecond, false, "offset=-1s"},
		{"silent", 500 * time.Millisecond, false, ""},
		{"old", 500 * time.Millisecond, true, ""},
		{"", 500 * time.Millisecond, false, ""}, // no address known
		{"ahead", 0, true, ""},                  // the check is off
	} {
		synctest.Test(t, func(t *testing.T) {
			n := &Node{cfg: Config{MaxClockOffset: c.max}, peers: peers, log: slog.New(slog.NewTextHandler(&log, nil))}
			m := &metav1.Node{Id: "n-" + c.addr, GrpcAddr: c.addr}
			if got := n.clockInStep(context.Background(), m); got != c.inStep {
				t.Errorf("%q (max %s): in step %v, want %v", c.addr, c.max, got, c.inStep)
			}
			if c.logs != "" && !strings.Contains(log.String(), "to=n-"+c.addr+" "+c.logs) {
				t.Errorf("%q: the log does not say why:\n%s", c.addr, log.String())
			}
		})
	}
	if n := (&Node{}); n.clockInStep(context.Background(), nil) != true {
		t.Error("a node with the check off refused a member")
	}
}

// Peers that never tell a time (an older release) put the watch at its
// slow pace once clockStartPace has passed: a second's pace is for a start.
func TestClockWatchStartPaceEnds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		reads := newPaceLog()
		read := func(context.Context, string) (time.Time, error) {
			reads.mark()
			return time.Time{}, fmt.Errorf("n2 %w", ErrNoClock)
		}
		watchWith(ctx, func() []string { return []string{"old"} }, read)
		time.Sleep(clockStartPace + 2*clockEvery + time.Millisecond)
		synctest.Wait()
		var want []time.Duration
		for d := time.Duration(0); d <= clockStartPace; d += clockRecheck {
			want = append(want, d)
		}
		reads.want(t, append(want, clockStartPace+clockEvery, clockStartPace+2*clockEvery))
	})
}
