package client

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

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
