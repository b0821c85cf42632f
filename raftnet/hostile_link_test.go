package raftnet

import (
	"bufio"
	"testing"
	"testing/synctest"
	"time"

	"github.com/hashicorp/raft"
)

// fakePeer listens at addr on pn and runs serve on each connection whose
// hello it answered: a peer that speaks raftnet's handshake and then
// whatever the test makes it say.
func fakePeer(t *testing.T, pn *pipeNet, addr string, serve func(r *bufio.Reader, w func([]byte))) {
	t.Helper()
	l := pn.listen(addr)
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				if _, err := readHello(c); err != nil {
					return
				}
				serve(bufio.NewReader(c), func(b []byte) { _, _ = c.Write(b) })
			}()
		}
	}()
}

// A peer that sends a request frame back on the link this node dialed
// (garbage, or a peer of another build) fails the link, and the call whose
// id the frame carried fails with it. The reader took that call out of
// the pending ones before it looked at the frame's kind, so nobody ever
// answered it: the caller (raft's heartbeat or replication goroutine)
// waited until its transport closed, and raft.Shutdown, which waits for
// those goroutines before it closes the transport, never returned.
func TestRequestOnAnOutboundLinkFailsTheCallItNames(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		pn := newPipeNet()
		a, _ := bareNet(t, pn, "a", 5*time.Second)
		aT := mustTransport(t, a, "g")
		fakePeer(t, pn, "evil", func(r *bufio.Reader, w func([]byte)) {
			f, _, err := readFrame(r, nil)
			if err != nil {
				return
			}
			// A request frame with the id of the call just received.
			b, _, err := appendRequest(nil, f.id, "g", &raft.TimeoutNowRequest{})
			if err != nil {
				panic(err)
			}
			w(b)
			_, _, _ = readFrame(r, nil) // hold the connection until a closes it
		})
		res := make(chan error, 1)
		go func() {
			req := &raft.RequestVoteRequest{RPCHeader: raft.RPCHeader{Addr: []byte("a")}, Term: 1, Candidate: []byte("a")}
			res <- aT.RequestVote("evil", "evil", req, &raft.RequestVoteResponse{})
		}()
		select {
		case err := <-res:
			if err == nil {
				t.Error("a call answered with a request frame succeeded")
			}
		case <-time.After(time.Hour):
			t.Error("the call is still waiting an hour after its link failed")
			aT.Close() // let the caller go
			<-res
		}
	})
}
