package raftnet

import (
	"errors"
	"io"
	"log/slog"
	"maps"
	"net"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/hashicorp/raft"
)

// bareNet is a Network listening at addr on pn, with no raft: tests play
// raft by reading its groups' consumers.
func bareNet(t *testing.T, pn *pipeNet, addr string, timeout time.Duration) (*Network, raft.ServerAddress) {
	t.Helper()
	n := New(Config{Layer: pn.listen(addr), Timeout: timeout, Logger: slog.New(slog.DiscardHandler)})
	t.Cleanup(func() { n.Close() })
	return n, raft.ServerAddress(addr)
}

// linkedPair is networks a and b on one pipe net, each with a transport
// of group "g".
type linkedPair struct {
	a      *Network
	bAddr  raft.ServerAddress
	aT, bT *Transport
}

func newLinkedPair(t *testing.T, timeout time.Duration) linkedPair {
	t.Helper()
	pn := newPipeNet()
	a, _ := bareNet(t, pn, "a", timeout)
	b, bAddr := bareNet(t, pn, "b", timeout)
	return linkedPair{a: a, bAddr: bAddr, aT: mustTransport(t, a, "g"), bT: mustTransport(t, b, "g")}
}

func mustTransport(t *testing.T, n *Network, group string) *Transport {
	t.Helper()
	tr, err := n.Transport(group, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tr.Close() })
	return tr
}

// answer plays raft for tr: it answers every AppendEntries with Success
// and LastLog set to the request's PrevLogEntry, until tr closes.
func answer(tr *Transport) { answerAfter(tr, 0) }

// answerAfter is answer, each answer given delay after its request came
// (a group whose disk is slow).
func answerAfter(tr *Transport, delay time.Duration) {
	go func() {
		for {
			select {
			case rpc := <-tr.Consumer():
				if delay > 0 {
					time.Sleep(delay)
				}
				req, _ := rpc.Command.(*raft.AppendEntriesRequest)
				if req == nil {
					rpc.Respond(nil, errors.New("not an AppendEntries"))
					continue
				}
				rpc.Respond(&raft.AppendEntriesResponse{Term: req.Term, LastLog: req.PrevLogEntry, Success: true}, nil)
			case <-tr.closed:
				return
			}
		}
	}()
}

func appendEntries(tr *Transport, to raft.ServerAddress, prev uint64, entries int) (*raft.AppendEntriesResponse, error) {
	req := &raft.AppendEntriesRequest{RPCHeader: raft.RPCHeader{Addr: []byte("a")}, Term: 1, PrevLogEntry: prev, PrevLogTerm: 1}
	for range entries {
		req.Entries = append(req.Entries, &raft.Log{Index: prev + 1, Term: 1, Data: []byte("x")})
	}
	resp := &raft.AppendEntriesResponse{}
	return resp, tr.AppendEntries("peer", to, req, resp)
}

// A group whose raft is busy holds up none of the other groups sharing
// the link: neither their calls nor their heartbeats.
func TestBusyGroupHoldsUpNoOtherGroup(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		pn := newPipeNet()
		a, _ := bareNet(t, pn, "a", 5*time.Second)
		b, bAddr := bareNet(t, pn, "b", 5*time.Second)
		mustTransport(t, b, "busy") // nobody reads its consumer: raft is stuck on a disk write
		free := mustTransport(t, b, "free")
		answer(free)
		got := make(chan struct{}, 1)
		free.SetHeartbeatHandler(func(rpc raft.RPC) {
			got <- struct{}{}
			rpc.Respond(&raft.AppendEntriesResponse{Term: 1, Success: true}, nil)
		})
		aBusy, aFree := mustTransport(t, a, "busy"), mustTransport(t, a, "free")
		go appendEntries(aBusy, bAddr, 1, 1) // waits until the link closes
		go appendEntries(aBusy, bAddr, 2, 1)
		synctest.Wait() // both are on b, unanswered
		start := time.Now()
		for i := range 20 {
			if resp, err := appendEntries(aFree, bAddr, uint64(i), 1); err != nil || resp.LastLog != uint64(i) {
				t.Fatalf("call %d of the free group: %+v %v", i, resp, err)
			}
		}
		hb := &raft.AppendEntriesRequest{RPCHeader: raft.RPCHeader{Addr: []byte("a")}, Term: 1}
		if err := aFree.AppendEntries("peer", bAddr, hb, &raft.AppendEntriesResponse{}); err != nil {
			t.Fatal(err)
		}
		select {
		case <-got:
		default:
			t.Fatal("the heartbeat did not reach the heartbeat handler")
		}
		// Fake time passes only while every goroutine waits: the free
		// group's calls waited for nothing, not for the busy calls' timeout.
		if took := time.Since(start); took != 0 {
			t.Fatalf("the free group's calls took %s behind the busy one", took)
		}
	})
}

// A peer that goes away fails the calls on its link at once; once it is
// back at the same address, the next call dials it again.
func TestLinkFailsAndRedialsWhenThePeerRestarts(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		pn := newPipeNet()
		a, _ := bareNet(t, pn, "a", 5*time.Second)
		aT := mustTransport(t, a, "g")
		b := New(Config{Layer: pn.listen("b"), Timeout: 5 * time.Second, Logger: slog.New(slog.DiscardHandler)})
		t.Cleanup(func() { b.Close() }) // if the test fails first; closed below
		bT := mustTransport(t, b, "g")
		answer(bT)
		if _, err := appendEntries(aT, "b", 1, 1); err != nil {
			t.Fatal(err)
		}
		bT.Close()
		b.Close()
		start := time.Now()
		if _, err := appendEntries(aT, "b", 2, 1); err == nil {
			t.Fatal("a call to a closed peer succeeded")
		}
		if took := time.Since(start); took != 0 {
			t.Errorf("the call to a closed peer failed after %s, not at once", took)
		}
		synctest.Wait() // a's link reader has seen the close too
		b2, _ := bareNet(t, pn, "b", 5*time.Second)
		answer(mustTransport(t, b2, "g"))
		if resp, err := appendEntries(aT, "b", 3, 1); err != nil || resp.LastLog != 3 {
			t.Fatalf("a call to the restarted peer: %+v %v", resp, err)
		}
	})
}

// A peer that takes calls and never answers (paused, partitioned) fails
// them after the timeout instead of holding raft forever, and its link
// is dropped.
func TestSilentPeerTimesOut(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const timeout = 300 * time.Millisecond
		pn := newPipeNet()
		a, _ := bareNet(t, pn, "a", timeout)
		aT := mustTransport(t, a, "g")
		silent := pn.listen("silent")
		defer silent.Close()
		go func() {
			for {
				c, err := silent.Accept()
				if err != nil {
					return
				}
				go func() {
					defer c.Close()
					if _, err := readHello(c, "", nil); err != nil {
						return
					}
					_, _ = io.Copy(io.Discard, c) // reads everything, answers nothing
				}()
			}
		}()
		start := time.Now()
		res := make(chan error, 1)
		go func() {
			_, err := appendEntries(aT, "silent", 1, 1)
			res <- err
		}()
		var err error
		select {
		case err = <-res:
		case <-time.After(10 * timeout):
			t.Fatal("the call to a silent peer is still waiting after ten timeouts")
		}
		took := time.Since(start)
		if !errors.Is(err, errTimeout) {
			t.Fatalf("got %v, want a timeout", err)
		}
		// Calls expire on the watch's tick, every quarter of the timeout.
		if took < timeout || took > timeout+timeout/2 {
			t.Errorf("timed out after %s, want %s to %s", took, timeout, timeout+timeout/2)
		}
		synctest.Wait()
		a.mu.Lock()
		defer a.mu.Unlock()
		for addr, l := range a.links {
			if l.alive() {
				t.Errorf("the link to %s is still alive", addr)
			}
		}
	})
}

// A group closed and opened again on the peer (a replica removed and
// added back) gets the calls that follow; the closed one answers none.
func TestReopenedGroupTakesTheCalls(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		pn := newPipeNet()
		a, _ := bareNet(t, pn, "a", 5*time.Second)
		b, bAddr := bareNet(t, pn, "b", 5*time.Second)
		aT := mustTransport(t, a, "g")
		first, err := b.Transport("g", nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		answer(first)
		if _, err := appendEntries(aT, bAddr, 1, 1); err != nil {
			t.Fatal(err)
		}
		first.Close()
		if _, err := appendEntries(aT, bAddr, 2, 1); err == nil {
			t.Fatal("a call to a closed group succeeded")
		}
		second := mustTransport(t, b, "g")
		answer(second)
		if resp, err := appendEntries(aT, bAddr, 3, 1); err != nil || resp.LastLog != 3 {
			t.Fatalf("after reopening: %+v %v", resp, err)
		}
	})
}

// A failed link to a peer that is never dialed again (a node that left,
// or moved to another address) is forgotten, with its buffers: one was
// kept for good per departed address, with up to a megabyte of write
// buffer.
func TestFailedLinksAreForgotten(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		pn := newPipeNet()
		a, _ := bareNet(t, pn, "a", 5*time.Second)
		aT := mustTransport(t, a, "g")
		var peers []*Network
		for _, addr := range []string{"b", "c", "d"} {
			p := New(Config{Layer: pn.listen(addr), Timeout: 5 * time.Second, Logger: slog.New(slog.DiscardHandler)})
			t.Cleanup(func() { p.Close() })
			answer(mustTransport(t, p, "g"))
			peers = append(peers, p)
			if _, err := appendEntries(aT, raft.ServerAddress(addr), 1, 1); err != nil {
				t.Fatal(err)
			}
		}
		if got := linkCount(a); got != 3 {
			t.Fatalf("%d links after calls to 3 peers", got)
		}
		var gone *link
		a.mu.Lock()
		gone = a.links["b"]
		a.mu.Unlock()
		peers[0].Close() // b leaves for good
		synctest.Wait()
		time.Sleep(time.Second) // watch's rounds
		if got := linkCount(a); got != 2 {
			t.Errorf("%d links a second after b closed, want 2 (c and d)", got)
		}
		gone.w.mu.Lock()
		kept := cap(gone.w.pending) + cap(gone.w.spare)
		gone.w.mu.Unlock()
		if kept != 0 {
			t.Errorf("b's failed link keeps %d bytes of write buffers", kept)
		}
		if _, err := appendEntries(aT, "c", 2, 1); err != nil {
			t.Errorf("a call to c, whose link stays: %v", err)
		}
	})
}

func linkCount(n *Network) int {
	n.mu.Lock()
	defer n.mu.Unlock()
	return len(n.links)
}

// An inbound link forgets the sessions of groups that closed when it
// starts another: it outlives every group moved off or removed from the
// node, and kept a session of each.
func TestEndedSessionsAreForgotten(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n, _ := bareNet(t, newPipeNet(), "a", 5*time.Second)
		a, b := net.Pipe()
		defer a.Close()
		defer b.Close()
		w := newWriter(a, time.Second)
		defer w.close(net.ErrClosed)
		closed, open := mustTransport(t, n, "old"), mustTransport(t, n, "live")
		sessions := map[string]*session{"old": newSession(closed, w), "live": newSession(open, w)}
		closed.Close()
		synctest.Wait()
		forgetEnded(sessions)
		if _, ok := sessions["old"]; ok || sessions["live"] == nil {
			t.Errorf("sessions after the group old closed: %v, want live alone", slices.Collect(maps.Keys(sessions)))
		}
		sessions["live"].close()
	})
}
