package rpc

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

	"github.com/floodgate/floodgate/cluster"
	"github.com/floodgate/floodgate/fsm"
	"github.com/floodgate/floodgate/test/fuzzseed"
)

// fakeRoutes is a routeWatch whose group 0 is led by addr ("": no leader
// known), moved by the test.
type fakeRoutes struct {
	mu      sync.Mutex
	addr    string
	leaders chan struct{}
	meta    chan struct{}
	reads   int // Route calls
}

func newFakeRoutes(addr string) *fakeRoutes {
	return &fakeRoutes{addr: addr, leaders: make(chan struct{}), meta: make(chan struct{})}
}

func (r *fakeRoutes) Route(int) (cluster.Route, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.reads++
	if r.addr == "" {
		return cluster.Route{}, cluster.ErrNoLeader
	}
	return cluster.Route{NodeID: r.addr, Addr: r.addr}, nil
}

func (r *fakeRoutes) LeadersChanged() <-chan struct{} {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.leaders
}

func (r *fakeRoutes) MetaChanged() <-chan struct{} {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.meta
}

// lead makes addr the leader and fires the watch of a leader change (or,
// with meta, of the meta state).
func (r *fakeRoutes) lead(addr string, meta bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.addr = addr
	if meta {
		close(r.meta)
		r.meta = make(chan struct{})
		return
	}
	close(r.leaders)
	r.leaders = make(chan struct{})
}

// withRoutes runs body in a synctest bubble on a forwardRig whose
// forwarder watches routes naming leader as group 0's.
func withRoutes(t *testing.T, leader string, body func(t *testing.T, rig *forwardRig, routes *fakeRoutes)) {
	var target atomic.Pointer[gatedPeer]
	cc := readyPeerConn(t, &target)
	synctest.Test(t, func(t *testing.T) {
		rig := newForwardRig(cc, &target)
		defer rig.close()
		routes := newFakeRoutes(leader)
		rig.fwd.routes = routes
		body(t, rig, routes)
	})
}

// forwardCtx is forwardRig.forward with the caller's context.
func (rig *forwardRig) forwardCtx(ctx context.Context, key int) chan forwarded {
	return rig.forwardTo(ctx, cluster.Route{Addr: "peer-1"}, key)
}

// forwardTo is forwardCtx to the peer rt names.
func (rig *forwardRig) forwardTo(ctx context.Context, rt cluster.Route, key int) chan forwarded {
	out := make(chan forwarded, 1)
	go func() {
		res, err := rig.fwd.forwardTo(ctx, rt, 0, []fsm.Check{{Key: fmt.Sprint("key-", key), Policy: fuzzseed.Policies()[0], Cost: 1}})
		out <- forwarded{n: len(res), err: err, ok: len(res) == 1 && res[0].Remaining == int64(key)}
	}()
	synctest.Wait()
	return out
}

// wantOnlyInFlightSent lets the peer answer and checks that the forward
// in flight is answered and that it was the only one the peer was sent:
// the others were withdrawn.
func (rig *forwardRig) wantOnlyInFlightSent(t *testing.T, inFlight chan forwarded) {
	t.Helper()
	close(rig.peer.gate)
	if f := <-inFlight; f.err != nil || !f.ok {
		t.Fatalf("the forward in flight: %v", f.err)
	}
	synctest.Wait()
	if got := rig.peer.callSizes(); !slices.Equal(got, []int{1}) {
		t.Fatalf("calls %v: a withdrawn forward was sent", got)
	}
}

func pending(ch chan forwarded) bool {
	select {
	case f := <-ch:
		ch <- f
		return false
	default:
		return true
	}
}

// A stalled leader (paused, cut off) holds the call in flight to it; the
// forwards queued behind that call are withdrawn as soon as this node sees
// the group's leader change or go unknown, answered "not sent" (retryable:
// onLeader routes them again), and never sent to the old leader, even once
// its call comes back. The call in flight keeps waiting: it may have been
// counted.
func TestForwardQueuedForAMovedLeaderIsWithdrawn(t *testing.T) {
	for _, to := range []string{"peer-2", ""} {
		t.Run(fmt.Sprintf("to %q", to), func(t *testing.T) {
			withRoutes(t, "peer-1", func(t *testing.T, rig *forwardRig, routes *fakeRoutes) {
				inFlight := rig.forwardCtx(context.Background(), 1)
				queued := []chan forwarded{rig.forwardCtx(context.Background(), 2), rig.forwardCtx(context.Background(), 3)}
				if got := rig.peer.callSizes(); !slices.Equal(got, []int{1}) {
					t.Fatalf("calls %v, want the first forward's alone", got)
				}
				routes.lead(to, false)
				synctest.Wait()
				for i, ch := range queued {
					if pending(ch) {
						t.Fatalf("queued forward %d still waits after its leader moved", i)
					}
					f := <-ch
					if !errors.Is(f.err, errNotSent) || !cluster.Retryable(f.err) {
						t.Fatalf("queued forward %d: %v, want not sent and retryable", i, f.err)
					}
				}
				if !pending(inFlight) {
					t.Fatalf("the forward in flight was answered before its call came back: %v", (<-inFlight).err)
				}
				rig.wantOnlyInFlightSent(t, inFlight)
			})
		})
	}
}

// A wake that leaves the group's leader where it was (another group's
// change, a meta change) keeps the forward queued, and it is answered as
// usual once its turn comes.
func TestForwardQueuedForAnUnmovedLeaderStays(t *testing.T) {
	withRoutes(t, "peer-1", func(t *testing.T, rig *forwardRig, routes *fakeRoutes) {
		inFlight := rig.forwardCtx(context.Background(), 1)
		queued := rig.forwardCtx(context.Background(), 2)
		routes.lead("peer-1", false)
		routes.lead("peer-1", true)
		synctest.Wait()
		if !pending(queued) {
			t.Fatalf("a forward whose leader did not move was answered: %v", (<-queued).err)
		}
		close(rig.peer.gate)
		for i, ch := range []chan forwarded{inFlight, queued} {
			if f := <-ch; f.err != nil || !f.ok {
				t.Fatalf("forward %d: %v", i, f.err)
			}
		}
		if got := rig.peer.callSizes(); !slices.Equal(got, []int{1, 1}) {
			t.Fatalf("calls %v, want one each", got)
		}
	})
}

// A forward that follows a peer's not-leader hint goes to a node this
// node's route does not name yet: it is not withdrawn for that, nor when
// the route catches up with the hint, only when the route moves on to
// yet another node.
func TestForwardFollowingAHintIsWithdrawnOnlyWhenTheRouteMovesOn(t *testing.T) {
	// This node is behind: the route names peer-0, which said peer-1 leads.
	withRoutes(t, "peer-0", func(t *testing.T, rig *forwardRig, routes *fakeRoutes) {
		hint := cluster.Route{Addr: "peer-1", Hint: true}
		inFlight := rig.forwardTo(context.Background(), hint, 1)
		queued := rig.forwardTo(context.Background(), hint, 2)
		routes.lead("peer-0", true)
		routes.lead("peer-1", false) // caught up with the hint
		synctest.Wait()
		if !pending(queued) {
			t.Fatalf("a hinted forward was answered before its route moved on: %v", (<-queued).err)
		}
		routes.lead("peer-2", false)
		synctest.Wait()
		if f := <-queued; !errors.Is(f.err, errNotSent) {
			t.Fatalf("a hinted forward whose route moved on: %v, want not sent", f.err)
		}
		rig.wantOnlyInFlightSent(t, inFlight)
	})
}

// A caller that gives up while its forward is still queued is told it was
// not sent (nothing counted), not that its outcome is unknown; one whose
// forward was in flight is told the outcome is unknown.
func TestForwardGivenUpWhileQueuedIsNotSent(t *testing.T) {
	var target atomic.Pointer[gatedPeer]
	cc := readyPeerConn(t, &target)
	synctest.Test(t, func(t *testing.T) {
		rig := newForwardRig(cc, &target)
		defer rig.close()
		// The queued caller gives up first, while the call in flight
		// still holds the peer's slot: its request is surely still queued.
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		qctx, qcancel := context.WithTimeout(context.Background(), time.Second)
		defer qcancel()
		inFlight := rig.forwardCtx(ctx, 1)
		queued := rig.forwardCtx(qctx, 2)
		time.Sleep(2 * time.Second) // fake time: both callers' deadlines pass
		synctest.Wait()
		if f := <-queued; !errors.Is(f.err, errNotSent) || !errors.Is(f.err, context.DeadlineExceeded) {
			t.Fatalf("forward given up while queued: %v, want not sent", f.err)
		}
		if f := <-inFlight; errors.Is(f.err, errNotSent) || !errors.Is(f.err, cluster.ErrUnavailable) {
			t.Fatalf("forward given up in flight: %v, want an unknown outcome", f.err)
		}
		if got := rig.peer.callSizes(); !slices.Equal(got, []int{1}) {
			t.Fatalf("calls %v: the forward given up was sent", got)
		}
	})
}
