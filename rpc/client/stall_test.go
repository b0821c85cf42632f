package client

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"google.golang.org/grpc"

	pb "github.com/floodgate/floodgate/proto/floodgate/v1"
)

// stallNodes answers at once, except the node at stuck, which holds every
// call until gate closes (a paused or cut-off node: its connection stays
// up) and every call takes delay.
type stallNodes struct {
	stuck string
	gate  chan struct{}
	delay time.Duration

	mu   sync.Mutex
	sent map[string][]string // keys each node was sent
}

func (s *stallNodes) hold(ctx context.Context, addr string, keys ...string) error {
	s.mu.Lock()
	s.sent[addr] = append(s.sent[addr], keys...)
	s.mu.Unlock()
	if addr == s.stuck {
		select {
		case <-s.gate:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	time.Sleep(s.delay)
	return nil
}

func (s *stallNodes) one(ctx context.Context, addr string, req *pb.AllowRequest) (*pb.AllowResponse, error) {
	if err := s.hold(ctx, addr, req.Key); err != nil {
		return nil, err
	}
	return &pb.AllowResponse{Allowed: true, Key: req.Key}, nil
}

func (s *stallNodes) many(ctx context.Context, addr string, reqs []*pb.AllowRequest) (*pb.AllowBatchResponse, error) {
	var keys []string
	for _, r := range reqs {
		keys = append(keys, r.Key)
	}
	if err := s.hold(ctx, addr, keys...); err != nil {
		return nil, err
	}
	out := &pb.AllowBatchResponse{}
	for _, r := range reqs {
		out.Results = append(out.Results, &pb.AllowBatchItem{Response: &pb.AllowResponse{Allowed: true, Key: r.Key}})
	}
	return out, nil
}

func (s *stallNodes) keysSent(addr string) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.sent[addr]...)
}

// A node that answers none of a lane's calls for stallAfter stalls the
// lane: the checks queued in it, never sent, are answered errStalled, and
// so is every check sent to it afterwards, at once, until one of its
// calls comes back; onStall hears of it at each look. The calls in
// flight keep waiting (their outcome is unknown).
func TestStalledLaneAnswersItsQueueNotSent(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := &stallNodes{stuck: "a", gate: make(chan struct{}), sent: map[string][]string{}}
		co := newCoalescer(s.one, s.many)
		var stalls atomic.Int32
		co.onStall = func() { stalls.Add(1) }
		fill(co, "a") // laneLight calls in flight, held
		queued := make(chan error, 10)
		for i := range 10 {
			go func() {
				_, err := check(co, "a", fmt.Sprint("q", i))
				queued <- err
			}()
		}
		time.Sleep(stallAfter - time.Millisecond)
		synctest.Wait()
		if len(queued) != 0 || stalls.Load() != 0 {
			t.Fatalf("before stallAfter: %d queued checks answered, %d stalls heard", len(queued), stalls.Load())
		}
		time.Sleep(time.Millisecond)
		synctest.Wait()
		for range 10 {
			if err := <-queued; !errors.Is(err, errStalled) {
				t.Fatalf("a check queued in a stalled lane: %v, want errStalled", err)
			}
		}
		if stalls.Load() != 1 {
			t.Fatalf("%d stalls heard, want 1", stalls.Load())
		}
		if _, err := check(co, "a", "late"); !errors.Is(err, errStalled) {
			t.Fatalf("a check sent to a stalled lane: %v, want errStalled at once", err)
		}
		if got := s.keysSent("a"); len(got) != laneLight {
			t.Fatalf("node a was sent %v: a check answered errStalled went out", got)
		}
		time.Sleep(stallAfter)
		synctest.Wait()
		if stalls.Load() != 2 {
			t.Fatalf("%d stalls heard after another stallAfter, want 2 (one each look)", stalls.Load())
		}
		close(s.gate) // the node comes back: its calls answer
		synctest.Wait()
		if _, err := check(co, "a", "back"); err != nil {
			t.Fatalf("a check once the node answered again: %v", err)
		}
		time.Sleep(2 * stallAfter)
		synctest.Wait()
		if stalls.Load() != 2 {
			t.Fatalf("%d stalls heard after the node came back, want still 2", stalls.Load())
		}
		settle(t, co)
	})
}

// A node that is slow but answers (each call 400ms, under stallAfter)
// never stalls its lane, however long the load lasts; nor does a lane
// that was idle for a while before its next call.
func TestSlowLaneIsNotStalled(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := &stallNodes{delay: 400 * time.Millisecond, sent: map[string][]string{}}
		co := newCoalescer(s.one, s.many)
		var stalls atomic.Int32
		co.onStall = func() { stalls.Add(1) }
		var wg sync.WaitGroup
		for w := range 16 {
			wg.Go(func() {
				for i := range 10 {
					if _, err := check(co, "a", fmt.Sprint(w, "-", i)); err != nil {
						t.Errorf("check: %v", err)
						return
					}
				}
			})
		}
		wg.Wait()
		time.Sleep(stallAfter - 100*time.Millisecond) // idle, then one more call
		if _, err := check(co, "a", "after"); err != nil {
			t.Fatalf("check after a pause in the load: %v", err)
		}
		if stalls.Load() != 0 {
			t.Fatalf("%d stalls heard of a slow node", stalls.Load())
		}
		settle(t, co)
	})
}

// Calls that end by their callers' own deadline are no word from the
// node: a lane whose node is paused stays stalled after its calls time
// out, instead of letting the next check go to the node and wait its
// whole deadline there in turn.
func TestStalledLaneStaysStalledWhenItsCallsTimeOut(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := &stallNodes{stuck: "a", gate: make(chan struct{}), sent: map[string][]string{}}
		co := newCoalescer(s.one, s.many)
		fill(co, "a")
		time.Sleep(3 * time.Second) // the fills' deadline (check's 3 s) passes
		synctest.Wait()
		if _, err := check(co, "a", "next"); !errors.Is(err, errStalled) {
			t.Fatalf("a check once the stalled calls timed out: %v, want errStalled", err)
		}
		if got := s.keysSent("a"); len(got) != laneLight {
			t.Fatalf("node a was sent %v, want the fills only", got)
		}
		close(s.gate)
		co.mu.Lock()
		co.lanes["a"].watch.Stop() // no probe: the lane would look forever
		co.mu.Unlock()
	})
}

// While a lane is stalled its node is probed at each look; once the probe
// is answered the lane takes checks again, even with no call of its own
// answered (they all timed out).
func TestStalledLaneTakesChecksOnceItsNodeAnswersTheProbe(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := &stallNodes{stuck: "a", gate: make(chan struct{}), sent: map[string][]string{}}
		co := newCoalescer(s.one, s.many)
		var up atomic.Bool
		var probes atomic.Int32
		co.probe = func(ctx context.Context, addr string) error {
			probes.Add(1)
			if addr != "a" || !up.Load() {
				<-ctx.Done() // paused: no answer within stallAfter
				return ctx.Err()
			}
			return nil
		}
		fill(co, "a")
		time.Sleep(3 * time.Second)
		synctest.Wait()
		if probes.Load() == 0 {
			t.Fatal("a stalled lane's node was never probed")
		}
		if _, err := check(co, "a", "during"); !errors.Is(err, errStalled) {
			t.Fatalf("a check while the probes go unanswered: %v, want errStalled", err)
		}
		up.Store(true)
		close(s.gate) // resumed: its calls answer at once again
		// The probe out when it resumed times out; the next look's is answered.
		time.Sleep(2*stallAfter + time.Millisecond)
		synctest.Wait()
		if _, err := check(co, "a", "after"); err != nil {
			t.Fatalf("a check once the node answered its probe: %v", err)
		}
		settle(t, co)
		time.Sleep(2 * stallAfter)
		synctest.Wait()
		co.mu.Lock()
		watching := co.lanes["a"].watching
		co.mu.Unlock()
		if watching {
			t.Fatal("the watch of an idle, well lane still runs")
		}
	})
}

// A check whose lane is stalled goes, once, through another node, and
// routing passes the stalled node over (batches and coalesced checks
// alike) until it answers again.
func TestClientSendsAStalledLanesCheckThroughAnotherNode(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := &stallNodes{stuck: "a:1", gate: make(chan struct{}), sent: map[string][]string{}}
		c := &Client{conns: map[string]*grpc.ClientConn{}, nodes: []string{"a:1", "b:1"},
			shards: 1, leaders: map[int]string{0: "a:1"}}
		c.co = newCoalescer(s.one, s.many)
		if got := c.route("k"); got != "a:1" {
			t.Fatalf("routed to %s before the stall, want its leader a:1", got)
		}
		fill(c.co, "a:1")
		time.Sleep(stallAfter)
		synctest.Wait()
		if got := c.route("k"); got != "b:1" {
			t.Fatalf("routed to %s while its leader's lane is stalled, want b:1", got)
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		resp, err := c.coalesced(ctx, "a:1", &pb.AllowRequest{Key: "k"})
		if err != nil || resp.Key != "k" {
			t.Fatalf("a check routed to a stalled node: %v, %v", resp, err)
		}
		if got, want := s.keysSent("b:1"), []string{"k"}; !slices.Equal(got, want) {
			t.Fatalf("node b was sent %v, want %v", got, want)
		}
		if got := s.keysSent("a:1"); slices.Contains(got, "k") {
			t.Fatalf("node a was sent %v: the check went to the stalled node too", got)
		}
		close(s.gate) // a's calls are answered: it is heard from again
		synctest.Wait()
		if got := c.route("k"); got != "a:1" {
			t.Fatalf("routed to %s once its leader answered again, want a:1", got)
		}
		settle(t, c.co)
		c.closeConns()
	})
}

// Closing stops the watch of a stalled lane, which would otherwise look,
// and probe its node, every stallAfter for good.
func TestCloseStopsAStalledLanesWatch(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := &stallNodes{stuck: "a", gate: make(chan struct{}), sent: map[string][]string{}}
		co := newCoalescer(s.one, s.many)
		var probes atomic.Int32
		co.probe = func(ctx context.Context, addr string) error {
			probes.Add(1)
			return errors.New("closed")
		}
		fill(co, "a")
		time.Sleep(3 * time.Second) // stalled, its calls timed out
		synctest.Wait()
		co.close()
		before := probes.Load()
		time.Sleep(10 * stallAfter)
		synctest.Wait()
		if n := probes.Load(); n != before {
			t.Fatalf("%d probes after close", n-before)
		}
		close(s.gate)
	})
}
