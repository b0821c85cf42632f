package raftnet

import (
	"errors"
	"io"
	"testing"
	"testing/synctest"
	"time"

	"github.com/hashicorp/raft"
)

// A peer that closed the handshake once is tried again with raftnet
// within seconds: a node of this release does that too while its Raft
// port is held (a fresh node the cluster has not taken yet) and while it
// stops or dies as the dial comes in. Taken for an older release for a
// minute, it was reached through NetworkTransport, where nothing waits
// for a peer that is down: a node replaced and then restarted within that
// minute was replicated to only after raft's backoff, and ready 10.7 s
// after its start instead of about 1 s.
func TestAPeerThatClosedTheHandshakeOnceIsTriedAgainSoon(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		pn := newPipeNet()
		a, _ := awaitingNet(t, pn, time.Minute)
		tr := mustTransport(t, a, "g")
		held := pn.listen("b")
		go func() {
			if c, err := held.Accept(); err == nil {
				var hello [6]byte
				_, _ = io.ReadFull(c, hello[:])
				c.Close()
			}
		}()
		if _, err := appendEntries(tr, "b", 7, 1); !errors.Is(err, errNotSpoken) {
			t.Fatalf("a closed handshake: %v, want errNotSpoken", err)
		}
		held.Close()
		b, _ := bareNet(t, pn, "b", 5*time.Second)
		answer(mustTransport(t, b, "g"))
		time.Sleep(10 * time.Second)
		resp, err := appendEntries(tr, "b", 7, 1)
		if err != nil || !resp.Success {
			t.Fatalf("10s after the closed handshake, the peer speaking raftnet: %+v, %v", resp, err)
		}
	})
}

// A replicating call to a peer that closed the handshake and then could
// not be reached through NetworkTransport either waits for it, as for any
// peer that is down: a node of this release closes the handshake as it
// stops (its raftnet gone, its port still open), and then taken for an
// older release for legacyRetry, its calls failed at once through
// NetworkTransport, raft's backoff grew (5 s of it by the end of the
// retry), and a node back within seconds was replicated to only after it.
func TestAPeerGoneAfterClosingTheHandshakeIsAwaited(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		pn := newPipeNet()
		a, _ := awaitingNet(t, pn, time.Minute)
		fallback := raft.NewNetworkTransportWithConfig(&raft.NetworkTransportConfig{
			Stream: pn.listen("a-legacy"), MaxPool: 2, Timeout: 5 * time.Second, Logger: quietLogger()})
		tr, err := a.Transport("g", fallback, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { tr.Close() }) // closes the fallback too
		tr.Await(func() bool { return true })
		stopping := pn.listen("b")
		go func() { // b stops: its raftnet is gone, then its port
			if c, err := stopping.Accept(); err == nil {
				var hello [6]byte
				_, _ = io.ReadFull(c, hello[:])
				stopping.Close()
				c.Close()
			}
		}()
		call := appendLater(tr, "b")
		time.Sleep(3 * time.Second)
		b, _ := bareNet(t, pn, "b", 5*time.Second)
		answer(mustTransport(t, b, "g"))
		r := <-call
		if r.err != nil || !r.resp.Success {
			t.Fatalf("after %s: %+v, %v; want the call sent once b is back (3s)", r.at, r.resp, r.err)
		}
		if late := r.at - 3*time.Second; late < 0 || late > 2*redialEvery {
			t.Errorf("the call was sent %s after b was back", late)
		}
	})
}
