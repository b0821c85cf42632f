package e2e

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	pb "github.com/floodgate/floodgate/proto/floodgate/v1"
	"github.com/floodgate/floodgate/rpc/client"
)

// sdkLoad is strict checks sent through one SDK client by a few callers
// in closed loops, on keys of every group, recording each answer's time.
type sdkLoad struct {
	start time.Time
	stop  atomic.Bool
	wg    sync.WaitGroup
	mu    sync.Mutex
	oks   []time.Duration // when each answered check came back
	errs  []string        // "at: error" of each failed one
}

func startSDKLoad(ctx context.Context, cl *client.Client, callers int) *sdkLoad {
	l := &sdkLoad{start: time.Now()}
	lim := &pb.Limit{Algorithm: pb.Algorithm_FIXED_WINDOW, Limit: 1_000_000, WindowMs: 3_600_000}
	for w := range callers {
		l.wg.Go(func() {
			for i := 0; !l.stop.Load(); i++ {
				_, err := cl.Allow(ctx, &pb.AllowRequest{Key: fmt.Sprintf("k%d-%d", w, i%50), Limit: lim})
				at := time.Since(l.start)
				l.mu.Lock()
				if err != nil {
					l.errs = append(l.errs, fmt.Sprintf("%.1fs: %v", at.Seconds(), err))
				} else {
					l.oks = append(l.oks, at)
				}
				l.mu.Unlock()
			}
		})
	}
	return l
}

// end stops the load and waits for its callers.
func (l *sdkLoad) end() {
	l.stop.Store(true)
	l.wg.Wait()
}

// answered is how many checks came back answered in [from, to).
func (l *sdkLoad) answered(from, to time.Duration) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, at := range l.oks {
		if at >= from && at < to {
			n++
		}
	}
	return n
}

// sdkClient is a client of c given only its first node, as its seed.
func sdkClient(t *testing.T, ctx context.Context, c *Cluster) *client.Client {
	t.Helper()
	cl, err := client.New(ctx, client.Options{Addrs: []string{c.Nodes[0].GRPC}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cl.Close() })
	return cl
}

// kill -9 of the node the SDK was given (a group leader) under load: the
// checks routed to it after it died never left the client, and go to the
// other nodes instead of failing. Only those in flight when it died may
// fail (their outcome is unknown).
func TestSDKKillOfItsNode(t *testing.T) {
	c := startCluster(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	load := startSDKLoad(ctx, sdkClient(t, ctx, c), 8)
	time.Sleep(time.Second)
	c.Nodes[0].Kill()
	killed := time.Since(load.start)
	time.Sleep(3 * time.Second)
	load.end()
	for _, e := range load.errs {
		// The client's own dial failure, not a node's answer (a node
		// forwarding to the dead one says so in its own words).
		if strings.Contains(e, "Unavailable desc = connection error:") && !strings.Contains(e, "forward to") {
			t.Errorf("a check that never reached a node failed: %s", e)
		}
	}
	if n := load.answered(killed+2*time.Second, killed+3*time.Second); n == 0 {
		t.Errorf("no check answered 2 s after the kill; errors: %v", load.errs)
	}
}

// A paused (SIGSTOP) group leader, the first node the SDK asks for its
// routes, holds the checks in flight to it until CallTimeout (3 s). The
// checks queued behind them must not wait as long: once the node has
// answered nothing for a while the SDK sends them, and the checks of its
// groups after them, through the other nodes, which forward them to the
// leaders their groups elect (0.5-1 s), and it learns the new leaders from
// those nodes. Before, every caller was soon stuck behind the paused
// node's calls, and no check at all was answered until CallTimeout; and
// earlier, the paused node took each refresh's whole time, and the checks
// of its groups timed out for as long as it was paused.
func TestSDKPausedLeader(t *testing.T) {
	c := startCluster(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	st, err := c.Nodes[0].Admin().Status(ctx, &pb.StatusRequest{})
	if err != nil {
		t.Fatal(err)
	}
	var first *Node // the node a refresh asks first
	for _, n := range c.Nodes {
		if n.ID == st.Nodes[0].Id {
			first = n
		}
	}
	load := startSDKLoad(ctx, sdkClient(t, ctx, c), 8)
	time.Sleep(time.Second)
	before := load.answered(0, time.Second)
	if err := first.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	paused := time.Since(load.start)
	time.Sleep(10 * time.Second)
	early := load.answered(paused+1500*time.Millisecond, paused+2500*time.Millisecond)
	late := load.answered(paused+8*time.Second, paused+10*time.Second) / 2 // a second's
	first.Signal(syscall.SIGCONT)
	load.end()
	if early < before/4 {
		t.Errorf("%d checks answered 1.5-2.5 s into the pause, %d in the second before it; errors: %v", early, before, load.errs)
	}
	if late < before/4 {
		t.Errorf("%d checks answered a second 8-10 s into the pause, %d before it; errors: %v", late, before, load.errs)
	}
}
