package raftnet

import (
	"errors"
	"io"
	"log/slog"
	"net"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

// bareNet is a Network on its own loopback listener, with no raft: tests
// play raft by reading its groups' consumers.
func bareNet(t *testing.T, timeout time.Duration) (*Network, raft.ServerAddress) {
	t.Helper()
	l := newTCPLayer(t)
	n := New(Config{Layer: l, Timeout: timeout, Logger: slog.New(slog.DiscardHandler)})
	t.Cleanup(func() { n.Close() })
	return n, raft.ServerAddress(l.Addr().String())
}

func mustTransport(t *testing.T, n *Network, group string) *Transport {
	t.Helper()
	tr, err := n.Transport(group, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

// answer plays raft for tr: it answers every AppendEntries with Success
// and LastLog set to the request's PrevLogEntry, until tr closes.
func answer(tr *Transport) {
	go func() {
		for {
			select {
			case rpc := <-tr.Consumer():
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
	a, _ := bareNet(t, 5*time.Second)
	b, bAddr := bareNet(t, 5*time.Second)
	mustTransport(t, b, "busy") // nobody reads its consumer: raft is stuck on a disk write
	free := mustTransport(t, b, "free")
	answer(free)
	got := make(chan struct{}, 1)
	free.SetHeartbeatHandler(func(rpc raft.RPC) {
		got <- struct{}{}
		rpc.Respond(&raft.AppendEntriesResponse{Term: 1, Success: true}, nil)
	})
	aBusy, aFree := mustTransport(t, a, "busy"), mustTransport(t, a, "free")
	go appendEntries(aBusy, bAddr, 1, 1) // waits for good
	go appendEntries(aBusy, bAddr, 2, 1)
	time.Sleep(50 * time.Millisecond)
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
	if took := time.Since(start); took > time.Second {
		t.Fatalf("the free group's calls took %s behind the busy one", took)
	}
}

// A peer that goes away fails the calls on its link at once; once it is
// back, the next call dials it again.
func TestLinkFailsAndRedialsWhenThePeerRestarts(t *testing.T) {
	a, _ := bareNet(t, 5*time.Second)
	aT := mustTransport(t, a, "g")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := raft.ServerAddress(ln.Addr().String())
	b := New(Config{Layer: tcpLayer{ln}, Timeout: 5 * time.Second, Logger: slog.New(slog.DiscardHandler)})
	answer(mustTransport(t, b, "g"))
	if _, err := appendEntries(aT, addr, 1, 1); err != nil {
		t.Fatal(err)
	}
	b.Close()
	start := time.Now()
	if _, err := appendEntries(aT, addr, 2, 1); err == nil {
		t.Fatal("a call to a closed peer succeeded")
	}
	if took := time.Since(start); took > time.Second {
		t.Errorf("the call to a closed peer failed after %s", took)
	}
	ln2, err := net.Listen("tcp", string(addr))
	if err != nil {
		t.Skipf("the port was taken meanwhile: %v", err)
	}
	b2 := New(Config{Layer: tcpLayer{ln2}, Timeout: 5 * time.Second, Logger: slog.New(slog.DiscardHandler)})
	defer b2.Close()
	answer(mustTransport(t, b2, "g"))
	eventually(t, 5*time.Second, "a call to the restarted peer", func() error {
		_, err := appendEntries(aT, addr, 3, 1)
		return err
	})
}

// A peer that takes calls and never answers (paused, partitioned) fails
// them after the timeout instead of holding raft forever, and its link
// is dropped.
func TestSilentPeerTimesOut(t *testing.T) {
	a, _ := bareNet(t, 300*time.Millisecond)
	aT := mustTransport(t, a, "g")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				if _, err := readHello(c); err != nil {
					return
				}
				_, _ = io.Copy(io.Discard, c) // reads everything, answers nothing
			}()
		}
	}()
	start := time.Now()
	_, err = appendEntries(aT, raft.ServerAddress(ln.Addr().String()), 1, 1)
	took := time.Since(start)
	if !errors.Is(err, errTimeout) {
		t.Fatalf("got %v, want a timeout", err)
	}
	if took < 300*time.Millisecond || took > 2*time.Second {
		t.Errorf("timed out after %s, want about 300ms", took)
	}
	eventually(t, 2*time.Second, "the silent link dropped", func() error {
		a.mu.Lock()
		defer a.mu.Unlock()
		for _, l := range a.links {
			if l.alive() {
				return errors.New("still alive")
			}
		}
		return nil
	})
}

// A group closed and opened again on the peer (a replica removed and
// added back) gets the calls that follow; the closed one answers none.
func TestReopenedGroupTakesTheCalls(t *testing.T) {
	a, _ := bareNet(t, 5*time.Second)
	b, bAddr := bareNet(t, 5*time.Second)
	aT := mustTransport(t, a, "g")
	first := mustTransport(t, b, "g")
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
}
