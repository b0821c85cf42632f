package raftnet

import (
	"errors"
	"io"
	"testing"
	"testing/synctest"
	"time"
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
