package cluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
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
}

func (d *deadSeeds) ApplyMeta(context.Context, string, []byte) error { return ErrNoLeader }
func (d *deadSeeds) Progress(context.Context, string, int) (GroupInfo, error) {
	return GroupInfo{}, ErrNoLeader
}
func (d *deadSeeds) AddNode(context.Context, string, *metav1.Node) (string, []string, error) {
	d.mu.Lock()
	d.calls++
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
	ctx, cancel := context.WithTimeout(context.Background(), 1800*time.Millisecond)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- n.Start(ctx) }()
	time.Sleep(300 * time.Millisecond)
	if first := log.String(); !strings.Contains(first, "cannot join the cluster yet") || !strings.Contains(first, "127.0.0.1:1,nowhere.invalid:7700") ||
		!strings.Contains(first, "connection refused") {
		t.Fatalf("nothing said at once:\n%s", first)
	}
	err := <-done
	for _, want := range []string{"--join", "127.0.0.1:1", "nowhere.invalid:7700", "connection refused"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Fatalf("start: %v; want it to mention %s", err, want)
		}
	}
	// 500ms, 1s: a few rounds in 1.8s, each trying both seeds.
	if peers.calls < 4 || peers.calls > 8 {
		t.Fatalf("%d join calls in 1.8s", peers.calls)
	}
}

// A seed that refuses this node (its id or addresses are bad) is final:
// no point retrying for minutes.
func TestJoinRefusedIsFinal(t *testing.T) {
	var log lockedBuffer
	peers := &deadSeeds{err: fmt.Errorf("%w: node.raft_addr: bad", ErrConfig)}
	n := joiningNode(t, peers, &log, "127.0.0.1:1")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	start := time.Now()
	err := n.Start(ctx)
	if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), "--join 127.0.0.1:1 refused") || time.Since(start) > 2*time.Second {
		t.Fatalf("start: %v after %s", err, time.Since(start))
	}
	if peers.calls != 1 {
		t.Fatalf("%d calls", peers.calls)
	}
}
