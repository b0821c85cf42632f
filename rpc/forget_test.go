package rpc

import (
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"google.golang.org/grpc/connectivity"
)

// queueOf is the forwarder's queue of addr (nil: none).
func (f *forwarder) queueOf(addr string) *peerQueue {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.queues[addr]
}

// A forward queue unused for forgetAfter is forgotten within forgetEvery
// more: its loop ends, and a later forward to the address makes a new
// one that works. A forward before then keeps it.
func TestIdleForwardQueueIsForgotten(t *testing.T) {
	var target atomic.Pointer[gatedPeer]
	cc := readyPeerConn(t, &target)
	synctest.Test(t, func(t *testing.T) {
		rig := newForwardRig(cc, &target)
		defer rig.close()
		close(rig.peer.gate) // every call answers at once
		send := func() {
			t.Helper()
			if f := <-rig.forward(1, 1); f.err != nil || !f.ok {
				t.Fatalf("forward: %d answers, matching=%v, %v", f.n, f.ok, f.err)
			}
		}
		send()
		first := rig.fwd.queueOf("peer-1")
		time.Sleep(forgetAfter - time.Minute)
		send() // used again: the clock starts over
		time.Sleep(forgetAfter - time.Second)
		synctest.Wait()
		if rig.fwd.queueOf("peer-1") != first {
			t.Fatal("a queue used within forgetAfter was forgotten")
		}
		time.Sleep(forgetEvery + time.Second)
		synctest.Wait()
		if rig.fwd.queueOf("peer-1") != nil {
			t.Fatalf("a queue unused for %s is still kept", forgetAfter+forgetEvery)
		}
		select {
		case <-first.done:
		default:
			t.Fatal("the forgotten queue's loop still runs")
		}
		send()
		if q := rig.fwd.queueOf("peer-1"); q == nil || q == first {
			t.Fatal("a forward after the queue was forgotten made no new queue")
		}
	})
}

// A queue with a forward waiting or a call in flight is kept, however
// long unused.
func TestBusyForwardQueueIsKept(t *testing.T) {
	var target atomic.Pointer[gatedPeer]
	cc := readyPeerConn(t, &target)
	synctest.Test(t, func(t *testing.T) {
		rig := newForwardRig(cc, &target)
		defer rig.close()
		q := rig.fwd.queue("peer-1")
		later := time.Now().Add(2 * forgetAfter)
		q.take() // a call in flight
		rig.fwd.forgetIdle(later)
		if rig.fwd.queueOf("peer-1") != q {
			t.Fatal("a queue with a call in flight was forgotten")
		}
		q.giveBack()
		q.waiting.Add(1) // a forward handed to the loop
		rig.fwd.forgetIdle(later)
		if rig.fwd.queueOf("peer-1") != q {
			t.Fatal("a queue with a forward waiting was forgotten")
		}
		q.waiting.Add(-1)
		rig.fwd.forgetIdle(later)
		if rig.fwd.queueOf("peer-1") != nil {
			t.Fatal("an idle queue unused for 2 × forgetAfter was kept")
		}
		synctest.Wait()
		select {
		case <-q.done:
		default:
			t.Fatal("the forgotten queue's loop still runs")
		}
	})
}

// A connection to a departed peer (never ready) unused for forgetAfter
// is closed and dropped; a ready one, or one used since, is kept.
func TestForgetIdleClosesDepartedPeersConnections(t *testing.T) {
	var target atomic.Pointer[gatedPeer]
	ready := readyPeerConn(t, &target)
	p := NewPeers()
	defer p.Close()
	p.mu.Lock()
	p.conns["peer-1"] = ready
	p.mu.Unlock()
	p.conn("peer-1")
	gone := p.conn("127.0.0.1:1") // nothing listens there
	later := time.Now().Add(forgetAfter + time.Second)
	p.conn("127.0.0.2:1") // used "later" below, so kept
	p.mu.Lock()
	p.used["127.0.0.2:1"] = later
	p.mu.Unlock()
	p.forgetIdle(later)
	p.mu.Lock()
	_, goneKept := p.conns["127.0.0.1:1"]
	_, readyKept := p.conns["peer-1"]
	_, recentKept := p.conns["127.0.0.2:1"]
	p.mu.Unlock()
	if goneKept || gone.GetState() != connectivity.Shutdown {
		t.Errorf("the departed peer's connection: kept %v, state %v; want dropped and shut down", goneKept, gone.GetState())
	}
	if !readyKept || ready.GetState() != connectivity.Ready {
		t.Errorf("a ready connection unused for forgetAfter: kept %v, state %v; want kept", readyKept, ready.GetState())
	}
	if !recentKept {
		t.Error("a connection used within forgetAfter was dropped")
	}
	if c := p.conn("127.0.0.1:1"); c == gone {
		t.Error("a call to a forgotten address got the closed connection back")
	}
}

// sweepEvery sweeps once per interval, with the time, until stopped.
func TestSweepEvery(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		stop := make(chan struct{})
		var at []time.Time
		done := make(chan struct{})
		start := time.Now()
		go func() {
			sweepEvery(stop, time.Minute, func(now time.Time) { at = append(at, now) })
			close(done)
		}()
		time.Sleep(3*time.Minute + time.Second)
		close(stop)
		<-done
		if len(at) != 3 || at[0] != start.Add(time.Minute) || at[2] != start.Add(3*time.Minute) {
			t.Fatalf("swept at %v, want each minute from %v", at, start)
		}
	})
}
