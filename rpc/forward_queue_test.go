package rpc

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/floodgate/floodgate/fsm"
	peerv1 "github.com/floodgate/floodgate/proto/floodgate/peer/v1"
	"github.com/floodgate/floodgate/test/fuzzseed"
)

// gatedPeer answers Forward calls in place of a peer: each call waits for
// a token from gate; it records how many checks each call carried and
// answers each check with Remaining set to the number its key ends with.
type gatedPeer struct {
	gate  chan struct{}
	delay time.Duration // when set, each call takes this long instead of waiting at the gate

	mu    sync.Mutex
	calls []int
}

func (p *gatedPeer) forward(ctx context.Context, req *peerv1.ForwardRequest, resp *peerv1.ForwardResponse) error {
	p.mu.Lock()
	p.calls = append(p.calls, len(req.Checks))
	p.mu.Unlock()
	if p.delay > 0 {
		time.Sleep(p.delay)
	} else {
		select {
		case <-p.gate:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	for _, c := range req.Checks {
		n, _ := strconv.Atoi(c.Key[len("key-"):])
		resp.Results = append(resp.Results, &peerv1.ForwardResult{Decision: &peerv1.Decision{Allowed: true, Remaining: int64(n)}})
	}
	return nil
}

func (p *gatedPeer) callSizes() []int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]int(nil), p.calls...)
}

// memListener is an in-memory net.Listener fed by its dialer.
type memListener struct {
	conns chan net.Conn
	done  chan struct{}
	once  sync.Once
}

func (l *memListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

func (l *memListener) Close() error   { l.once.Do(func() { close(l.done) }); return nil }
func (l *memListener) Addr() net.Addr { return &net.UnixAddr{Name: "mem", Net: "unix"} }

func (l *memListener) dial(ctx context.Context, _ string) (net.Conn, error) {
	client, server := net.Pipe()
	select {
	case l.conns <- server:
		return client, nil
	case <-l.done:
		return nil, net.ErrClosed
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// readyPeerConn returns a gRPC connection, ready, whose Forward calls are
// answered by the gatedPeer in target without leaving the caller's
// goroutine (a client interceptor). gRPC's own goroutines cannot run in a
// synctest bubble, so the connection is made outside it, before the test
// enters one, and the forwarder under test, made inside, is handed it.
func readyPeerConn(t testing.TB, target *atomic.Pointer[gatedPeer]) *grpc.ClientConn {
	t.Helper()
	ln := &memListener{conns: make(chan net.Conn), done: make(chan struct{})}
	srv := grpc.NewServer()
	go srv.Serve(ln)
	intercept := func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		if method != peerv1.Peer_Forward_FullMethodName {
			return invoker(ctx, method, req, reply, cc, opts...)
		}
		return target.Load().forward(ctx, req.(*peerv1.ForwardRequest), reply.(*peerv1.ForwardResponse))
	}
	cc, err := grpc.NewClient("passthrough:///peer-1", grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithContextDialer(ln.dial), grpc.WithUnaryInterceptor(intercept))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cc.Close()
		srv.Stop()
		ln.Close()
	})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for cc.Connect(); cc.GetState() != connectivity.Ready; {
		if !cc.WaitForStateChange(ctx, cc.GetState()) {
			t.Fatal("in-memory peer connection never became ready")
		}
	}
	return cc
}

// forwardRig is a forwarder whose one peer, peer-1, is a gatedPeer.
type forwardRig struct {
	peer  *gatedPeer
	peers *Peers
	fwd   *forwarder
}

// newForwardRig runs inside the bubble, on a connection readyPeerConn
// made outside it.
func newForwardRig(cc *grpc.ClientConn, target *atomic.Pointer[gatedPeer]) *forwardRig {
	rig := &forwardRig{peer: &gatedPeer{gate: make(chan struct{})}, peers: NewPeers()}
	target.Store(rig.peer)
	rig.peers.conns["peer-1"] = cc
	rig.fwd = newForwarder(rig.peers, nil)
	return rig
}

// close lets every call through and stops the forwarder's queue.
func (rig *forwardRig) close() {
	select {
	case <-rig.peer.gate:
	default:
		close(rig.peer.gate)
	}
	synctest.Wait()
	rig.peers.Close()
	synctest.Wait()
}

type forwarded struct {
	n   int
	err error
	ok  bool // every answer is the one for its own check
}

// forward sends n checks of keys key-<first>... and waits until every
// goroutine is idle, so forwards queue in the order they are sent.
func (rig *forwardRig) forward(first, n int) chan forwarded {
	checks := make([]fsm.Check, n)
	p := fuzzseed.Policies()[0]
	for i := range checks {
		checks[i] = fsm.Check{Key: fmt.Sprint("key-", first+i), Policy: p, Cost: 1}
	}
	out := make(chan forwarded, 1)
	go func() {
		res, err := rig.fwd.forward(context.Background(), "peer-1", 0, checks)
		f := forwarded{n: len(res), err: err, ok: len(res) == n}
		for i := range res {
			f.ok = f.ok && res[i].Remaining == int64(first+i)
		}
		out <- f
	}()
	synctest.Wait()
	return out
}

// At most forwardInFlight calls go to a peer at once; forwards arriving
// meanwhile wait and then go out together in one call, and every caller
// gets the answers to its own checks.
func TestForwardQueueBatchesBehindInFlightCap(t *testing.T) {
	var target atomic.Pointer[gatedPeer]
	cc := readyPeerConn(t, &target)
	synctest.Test(t, func(t *testing.T) {
		rig := newForwardRig(cc, &target)
		defer rig.close()
		var chs []chan forwarded
		for i := range forwardInFlight + 20 {
			chs = append(chs, rig.forward(i, 1))
		}
		if got := rig.peer.callSizes(); len(got) != forwardInFlight {
			t.Fatalf("%d calls in flight, want %d: %v", len(got), forwardInFlight, got)
		}
		rig.peer.gate <- struct{}{} // one call answers: its slot frees
		synctest.Wait()
		got := rig.peer.callSizes()
		if len(got) != forwardInFlight+1 || got[forwardInFlight] != 20 {
			t.Fatalf("calls %v: the 20 queued forwards did not go out together", got)
		}
		close(rig.peer.gate)
		for i, ch := range chs {
			if f := <-ch; f.err != nil || !f.ok {
				t.Fatalf("forward %d: %d answers, matching=%v, %v", i, f.n, f.ok, f.err)
			}
		}
	})
}

// A forward that finds its peer's queue idle is sent by its caller: it is
// answered with the queue's loop not running at all. One that comes while
// that call is in flight waits for the loop, which sends it once the slot
// is given back: the caller's own call counts against forwardInFlight.
func TestForwardToAnIdleQueueIsSentByItsCaller(t *testing.T) {
	var target atomic.Pointer[gatedPeer]
	cc := readyPeerConn(t, &target)
	synctest.Test(t, func(t *testing.T) {
		rig := newForwardRig(cc, &target)
		defer rig.close()
		q := newPeerQueue("peer-1", rig.peers) // its loop starts below
		rig.fwd.queues["peer-1"] = q
		first := rig.forward(1, 1)
		second := rig.forward(2, 1)
		if got := rig.peer.callSizes(); !slices.Equal(got, []int{1}) {
			t.Fatalf("calls %v, want the idle forward's alone", got)
		}
		rig.peer.gate <- struct{}{}
		if f := <-first; f.err != nil || !f.ok {
			t.Fatalf("idle forward: %d answers, matching=%v, %v", f.n, f.ok, f.err)
		}
		synctest.Wait()
		if got := rig.peer.callSizes(); len(got) != 1 {
			t.Fatalf("calls %v: the forward that waited was sent by its caller", got)
		}
		go q.loop()
		close(rig.peer.gate)
		if f := <-second; f.err != nil || !f.ok {
			t.Fatalf("waiting forward: %d answers, matching=%v, %v", f.n, f.ok, f.err)
		}
		if got := rig.peer.callSizes(); !slices.Equal(got, []int{1, 1}) {
			t.Fatalf("calls %v, want two of one check", got)
		}
	})
}

// A call carries at most forwardMaxChecks checks, whole forwards only.
func TestForwardQueueCapsChecksPerCall(t *testing.T) {
	var target atomic.Pointer[gatedPeer]
	cc := readyPeerConn(t, &target)
	synctest.Test(t, func(t *testing.T) {
		rig := newForwardRig(cc, &target)
		defer rig.close()
		var chs []chan forwarded
		for i := range forwardInFlight {
			chs = append(chs, rig.forward(i, 1))
		}
		half := forwardMaxChecks / 2
		chs = append(chs, rig.forward(100, half), rig.forward(100+half, half), rig.forward(100+2*half, 1))
		close(rig.peer.gate)
		for i, ch := range chs {
			if f := <-ch; f.err != nil || !f.ok {
				t.Fatalf("forward %d: %d answers, matching=%v, %v", i, f.n, f.ok, f.err)
			}
		}
		got := rig.peer.callSizes()[forwardInFlight:]
		slices.Sort(got) // the two calls go out concurrently
		if len(got) != 2 || got[0] != 1 || got[1] != forwardMaxChecks {
			t.Fatalf("queued calls carried %v checks, want 1 and %d", got, forwardMaxChecks)
		}
	})
}

// Once the peers are closed, forwards still queued and forwards made
// afterwards are answered errNotSent: nothing of them left this node.
func TestForwardQueueClosedPeersAnswerNotSent(t *testing.T) {
	var target atomic.Pointer[gatedPeer]
	cc := readyPeerConn(t, &target)
	synctest.Test(t, func(t *testing.T) {
		rig := newForwardRig(cc, &target)
		var inFlight []chan forwarded
		for i := range forwardInFlight {
			inFlight = append(inFlight, rig.forward(i, 1))
		}
		queued := rig.forward(50, 3)
		rig.peers.Close()
		synctest.Wait()
		if f := <-queued; !errors.Is(f.err, errNotSent) {
			t.Fatalf("forward queued at close: %v", f.err)
		}
		close(rig.peer.gate)
		for _, ch := range inFlight {
			<-ch // answered one way or another: never stuck
		}
		synctest.Wait()
		if got := rig.peer.callSizes(); len(got) != forwardInFlight {
			t.Fatalf("calls %v: a forward was sent after close", got)
		}
	})
}

// A forward made after the peers closed is answered errNotSent, at once.
// Once the queue's loop has exited, forward's first select has two ready
// cases, the buffered q.in and peers.closed, and picks one at random; a
// request put in q.in then must still be answered (not sent), not left
// until its caller's deadline and called an unknown outcome.
func TestForwardAfterCloseIsNotSent(t *testing.T) {
	var target atomic.Pointer[gatedPeer]
	cc := readyPeerConn(t, &target)
	synctest.Test(t, func(t *testing.T) {
		rig := newForwardRig(cc, &target)
		close(rig.peer.gate)
		if f := <-rig.forward(0, 1); f.err != nil {
			t.Fatalf("forward before close: %v", f.err)
		}
		rig.peers.Close()
		synctest.Wait() // the queue's loop has exited
		for i := range 20 {
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			_, err := rig.fwd.forward(ctx, "peer-1", 0, []fsm.Check{{Key: "key-1", Policy: fuzzseed.Policies()[0], Cost: 1}})
			cancel()
			if !errors.Is(err, errNotSent) {
				t.Fatalf("forward %d after close: %v", i, err)
			}
		}
	})
}

// waitReady sends on a ready connection, connects an idle one and waits
// for it, and gives up at once on a connection whose last attempt failed
// (a dead peer: the check is routed again, not held connectWait per try).
func TestWaitReady(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		for _, c := range []struct {
			name   string
			states []connectivity.State // what each state() call returns, the last repeated
			want   bool
			took   time.Duration
		}{
			{"ready", []connectivity.State{connectivity.Ready}, true, 0},
			{"idle, then connects", []connectivity.State{connectivity.Idle, connectivity.Connecting, connectivity.Ready}, true, 0},
			{"peer down", []connectivity.State{connectivity.TransientFailure}, false, 0},
			{"connect fails", []connectivity.State{connectivity.Idle, connectivity.Connecting, connectivity.TransientFailure}, false, 0},
			{"shut down", []connectivity.State{connectivity.Shutdown}, false, 0},
			{"connecting forever", []connectivity.State{connectivity.Connecting}, false, connectWait},
		} {
			i := 0
			state := func() connectivity.State {
				s := c.states[min(i, len(c.states)-1)]
				i++
				return s
			}
			connects := 0
			wait := func(ctx context.Context, s connectivity.State) bool {
				if i < len(c.states) {
					return true // the state changes at once
				}
				<-ctx.Done() // it never changes again
				return false
			}
			start := time.Now()
			if got := waitReady(state, func() { connects++ }, wait); got != c.want {
				t.Errorf("%s: waitReady = %v, want %v", c.name, got, c.want)
			}
			if took := time.Since(start); took != c.took {
				t.Errorf("%s: took %s, want %s", c.name, took, c.took)
			}
			if idle := c.states[0] == connectivity.Idle; idle != (connects > 0) {
				t.Errorf("%s: %d connects", c.name, connects)
			}
		}
	})
}

// Callers that come back after each answer end up in one call: without
// the linger they split into cohorts taking turns, each call carrying a
// part of them (every call costs a gRPC round trip on both nodes).
func TestForwardQueueGathersTheCallersOfTheLastCall(t *testing.T) {
	var target atomic.Pointer[gatedPeer]
	cc := readyPeerConn(t, &target)
	synctest.Test(t, func(t *testing.T) {
		rig := newForwardRig(cc, &target)
		rig.peer.delay = 2 * time.Millisecond
		defer rig.close()
		const callers = 20
		var stop atomic.Bool
		var wg sync.WaitGroup
		p := fuzzseed.Policies()[0]
		for c := range callers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for !stop.Load() {
					if _, err := rig.fwd.forward(context.Background(), "peer-1", 0, []fsm.Check{{Key: fmt.Sprint("key-", c), Policy: p, Cost: 1}}); err != nil {
						t.Error(err)
						return
					}
					time.Sleep(time.Millisecond)
				}
			}()
		}
		time.Sleep(2 * time.Second)
		stop.Store(true)
		wg.Wait()
		sizes := rig.peer.callSizes()
		sizes = slices.Clone(sizes[len(sizes)/2:])
		slices.Sort(sizes)
		if m := sizes[len(sizes)/2]; m < callers*7/10 {
			t.Fatalf("calls carry a median of %d checks of %d callers, want most of them", m, callers)
		}
	})
}

// BenchmarkForwardOneCaller is one caller forwarding one check at a time
// to a peer that answers at once: what the queue costs a forward at a
// light load, where nothing else is in flight.
func BenchmarkForwardOneCaller(b *testing.B) {
	var target atomic.Pointer[gatedPeer]
	cc := readyPeerConn(b, &target)
	rig := newForwardRig(cc, &target)
	close(rig.peer.gate)
	defer rig.peers.Close()
	checks := []fsm.Check{{Key: "key-1", Policy: fuzzseed.Policies()[0], Cost: 1}}
	for b.Loop() {
		if _, err := rig.fwd.forward(context.Background(), "peer-1", 0, checks); err != nil {
			b.Fatal(err)
		}
	}
}
