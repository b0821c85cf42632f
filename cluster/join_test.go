package cluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "github.com/floodgate/floodgate/proto/floodgate/meta/v1"
)

// lockedBuffer collects a node's log across goroutines.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// deadSeeds answers every AddNode with err, counting the calls.
type deadSeeds struct {
	err   error
	mu    sync.Mutex
	calls int
	at    []time.Time // when each AddNode came
}

// times returns when each AddNode came so far.
func (d *deadSeeds) times() []time.Time {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]time.Time(nil), d.at...)
}

func (d *deadSeeds) ApplyMeta(context.Context, string, []byte) error { return ErrNoLeader }
func (d *deadSeeds) ExportSlots(context.Context, string, int, uint64, []uint32) ([]byte, error) {
	return nil, ErrNoLeader
}
func (d *deadSeeds) Progress(context.Context, string, int) (GroupInfo, error) {
	return GroupInfo{}, ErrNoLeader
}
func (d *deadSeeds) MoveApplied(context.Context, string, int, uint64, []uint32) (bool, bool, error) {
	return false, false, ErrNoLeader
}
func (d *deadSeeds) Hello(context.Context, string) (string, string, error) {
	return "", "", ErrNoLeader
}
func (d *deadSeeds) Clock(context.Context, string) (time.Time, error) {
	return time.Time{}, ErrNoLeader
}
func (d *deadSeeds) AddNode(context.Context, string, *metav1.Node, GossipProof) (string, []string, error) {
	d.mu.Lock()
	d.calls++
	d.at = append(d.at, time.Now())
	d.mu.Unlock()
	return "", nil, d.err
}

func joiningNode(t *testing.T, peers Peers, log *lockedBuffer, join ...string) *Node {
	t.Helper()
	n, err := Open(Config{
		NodeID: "n2", DataDir: t.TempDir(), GRPCAddr: loopback(t), RaftAddr: loopback(t), GossipAddr: loopback(t),
		Shards: 1, Replicas: 1, Join: join, Logger: slog.New(slog.NewTextHandler(log, nil)),
	}, peers)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close() })
	return n
}

// An unreachable seed is reported at once and retried with backoff; when
// the start deadline passes, the error names --join and every address.
func TestJoinUnreachableSeedSaysSoAtOnce(t *testing.T) {
	var log lockedBuffer
	peers := &deadSeeds{err: fmt.Errorf("%w: connection refused", ErrNoLeader)}
	n := joiningNode(t, peers, &log, "127.0.0.1:1", "nowhere.invalid:7700")
	// Rounds at 0, 0.5, 1.5 and 3.5s; long enough for two, however slowly
	// the start's own fsyncs go.
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- n.Start(ctx) }()
	said := func() bool {
		first := log.String()
		return strings.Contains(first, "cannot join the cluster yet") && strings.Contains(first, "127.0.0.1:1,nowhere.invalid:7700") &&
			strings.Contains(first, "connection refused")
	}
	// At once: after the first round of tries (both seeds), before the
	// second. Judged by the calls, not the clock, so that a slow start
	// (its data dir's fsyncs on a busy disk) is not taken for silence.
	for {
		calls := len(peers.times()) // read before said: a message logged after it is late
		if said() {
			break
		}
		if calls > 2 {
			t.Fatalf("a second round of tries before anything was said:\n%s", log.String())
		}
		select {
		case err := <-done:
			t.Fatalf("start ended (%v) with nothing said:\n%s", err, log.String())
		default:
		}
		runtime.Gosched()
	}
	err := <-done
	for _, want := range []string{"--join", "127.0.0.1:1", "nowhere.invalid:7700", "connection refused"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Fatalf("start: %v; want it to mention %s", err, want)
		}
	}
	// Rounds of both seeds each, the next after a backoff (500ms, then
	// 1s): retried, not in a hot loop.
	var rounds [][]time.Time // calls within 100ms of a round's first are of it
	for _, a := range peers.times() {
		if len(rounds) == 0 || a.Sub(rounds[len(rounds)-1][0]) > 100*time.Millisecond {
			rounds = append(rounds, nil)
		}
		rounds[len(rounds)-1] = append(rounds[len(rounds)-1], a)
	}
	if len(rounds) < 2 {
		t.Fatalf("%d rounds of tries, want retries", len(rounds))
	}
	for i, r := range rounds {
		if len(r) > 2 || len(r) < 2 && i < len(rounds)-1 { // the last may end with the deadline
			t.Fatalf("round %d tried %d times, want each of the two seeds once", i+1, len(r))
		}
		if i > 0 && r[0].Sub(rounds[i-1][0]) < 450*time.Millisecond {
			t.Fatalf("round %d came %s after the one before, want a backoff of 500ms or more", i+1, r[0].Sub(rounds[i-1][0]))
		}
	}
}

// A seed that refuses this node (its id or addresses are bad, or its
// credentials) is final: no point retrying for minutes.
func TestJoinRefusedIsFinal(t *testing.T) {
	for _, refusal := range []error{
		fmt.Errorf("%w: node.raft_addr: bad", ErrConfig),
		fmt.Errorf("%w (%w): Unauthenticated: a peer token is required", ErrDenied, ErrNoLeader),
	} {
		var log lockedBuffer
		peers := &deadSeeds{err: refusal}
		n := joiningNode(t, peers, &log, "127.0.0.1:1")
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		start := time.Now()
		err := n.Start(ctx)
		cancel()
		if !errors.Is(err, refusal) || !strings.Contains(err.Error(), "--join 127.0.0.1:1 refused") || time.Since(start) > 2*time.Second {
			t.Fatalf("start: %v after %s", err, time.Since(start))
		}
		if peers.calls != 1 {
			t.Fatalf("%v: %d calls", refusal, peers.calls)
		}
	}
}
