package cluster

import (
	"context"
	"errors"
	"log/slog"
	"maps"
	"math"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"
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
	st := &clockState{failed: make(chan struct{})}
	w := clockWatch{max: 500 * time.Millisecond, members: peers.addrs, read: peers.read,
		log: slog.New(slog.DiscardHandler), state: st}
	go w.run(ctx)
	return st
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
				if failedBy(st, (clockStrikes-1)*clockEvery+clockEvery/2) {
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
		st := &clockState{failed: make(chan struct{})}
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
		w := clockWatch{max: 500 * time.Millisecond, members: peers.addrs, read: read, log: slog.New(slog.DiscardHandler), state: st}
		go w.run(ctx)
		if failedBy(st, 10*clockStrikes*clockEvery) {
			t.Fatal("stopped without clockStrikes bad readings in a row")
		}
	})
}
