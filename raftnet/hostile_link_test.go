package raftnet

//lint:file-ignore SA1019 the requests carry raft's deprecated Leader and Candidate fields, as raft sends them.

import (
	"bufio"
	"errors"
	"io"
	"log/slog"
	"net"
	"sync/atomic"
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
				if _, err := readHello(c, "", nil); err != nil {
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

// lowerMaxFrame sets maxFrame to n for the test: frames over it cost
// hundreds of MiB at its real size.
func lowerMaxFrame(t *testing.T, n uint32) {
	old := maxFrame
	maxFrame = n
	t.Cleanup(func() { maxFrame = old })
}

// A follower behind several large entries (slot moves' imports, up to 64
// MiB each, against a 256 MiB frame) catches up: raft batches entries by
// count only, and a request over maxFrame was refused at every retry, so
// raft's replication, which resends the same batch after a failure, never
// got past them. The transport now sends the entries that fit, and raft,
// which advances by the request's entries after the call, sends the rest
// next. Both of raft's ways are played: plain calls and a pipeline.
func TestLargeEntriesAreSentInFrames(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		lowerMaxFrame(t, 1<<20)
		lp := newLinkedPair(t, 5*time.Second)
		got := make(chan []uint64, 64)
		go func() { // the follower's raft: takes every entry it is sent
			for {
				select {
				case rpc := <-lp.bT.Consumer():
					req := rpc.Command.(*raft.AppendEntriesRequest)
					var idx []uint64
					for _, l := range req.Entries {
						idx = append(idx, l.Index)
					}
					got <- idx
					rpc.Respond(&raft.AppendEntriesResponse{Term: 1, LastLog: req.PrevLogEntry + uint64(len(idx)), Success: true}, nil)
				case <-lp.bT.closed:
					return
				}
			}
		}()
		const last = 7
		data := make([]byte, 400<<10) // two fit in a frame, three do not
		batch := func(next uint64) *raft.AppendEntriesRequest {
			req := &raft.AppendEntriesRequest{RPCHeader: raft.RPCHeader{Addr: []byte("a")}, Term: 1, Leader: []byte("a"),
				PrevLogEntry: next - 1, PrevLogTerm: 1}
			for i := next; i <= last; i++ { // raft: up to 64, whatever their size
				req.Entries = append(req.Entries, &raft.Log{Index: i, Term: 1, Type: raft.LogCommand, Data: data})
			}
			return req
		}
		check := func(how string) {
			var all []uint64
			for len(got) > 0 {
				all = append(all, <-got...)
			}
			for i, idx := range all {
				if idx != uint64(i+1) {
					t.Fatalf("%s: the follower got entries %v, want 1 to %d in order", how, all, last)
				}
			}
			if len(all) != last {
				t.Errorf("%s: the follower got entries %v, want 1 to %d", how, all, last)
			}
		}

		// raft's replicateTo: resend from nextIndex after a failure,
		// advance by the request's last entry after a success.
		next, failures := uint64(1), 0
		for next <= last && failures < 5 {
			req := batch(next)
			if err := lp.aT.AppendEntries("b", lp.bAddr, req, &raft.AppendEntriesResponse{}); err != nil {
				failures++
				t.Logf("AppendEntries of %d entries from %d: %v", len(req.Entries), next, err)
				continue
			}
			next = req.Entries[len(req.Entries)-1].Index + 1
		}
		check("plain calls")

		// raft's pipelineSend and pipelineDecode.
		p, err := lp.aT.AppendEntriesPipeline("b", lp.bAddr)
		if err != nil {
			t.Fatal(err)
		}
		defer p.Close()
		next = 1
		for sends := 0; next <= last && sends < 10; sends++ {
			req := batch(next)
			if _, err := p.AppendEntries(req, &raft.AppendEntriesResponse{}); err != nil {
				t.Fatalf("pipelined AppendEntries from %d: %v", next, err)
			}
			next = req.Entries[len(req.Entries)-1].Index + 1
		}
		for range (last + 1) / 2 {
			f := <-p.Consumer()
			if err := f.Error(); err != nil || !f.Response().Success {
				t.Fatalf("pipelined answer: %v %+v", err, f.Response())
			}
		}
		check("a pipeline")
	})
}

// A connection that never sends its hello does not hold up Close: the
// hello had a deadline of the timeout, and Close, which waits for every
// accepted connection's goroutine, waited that long for it (10 s more
// at a node's shutdown).
func TestSilentHandshakeDoesNotHoldUpClose(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		pn := newPipeNet()
		b := New(Config{Layer: pn.listen("b"), Timeout: 10 * time.Second, Logger: slog.New(slog.DiscardHandler)})
		conn, err := pn.listen("x").Dial("b", time.Second)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		synctest.Wait() // b's serve reads the hello that never comes
		start := time.Now()
		b.Close()
		if took := time.Since(start); took > 0 {
			t.Errorf("Close took %s with a connection silent at its handshake", took)
		}
	})
}

// A group's raft never waits on a peer's connection: raft answers an RPC
// by a send on its RespChan, and a session's was one channel of 16 for
// every call. While the session waited to write an answer (a peer not
// reading its link), raft, taking the calls that kept coming, filled it
// and blocked in Respond: the group's main loop stopped (no vote, no
// election, nothing applied) until the write failed, the timeout later.
// The session now hands raft no more calls than that channel holds
// answers.
func TestSessionNeverBlocksRaftOnASlowPeer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a, b := net.Pipe()
		defer a.Close()
		defer b.Close()
		w := newWriter(a, 10*time.Second)
		defer w.close(net.ErrClosed)
		tr := &Transport{consumer: make(chan raft.RPC), closed: make(chan struct{})}
		var taken, answered atomic.Int64
		go func() { // raft: answers each call as it takes it
			for {
				select {
				case rpc := <-tr.consumer:
					taken.Add(1)
					rpc.Respond(&raft.RequestVoteResponse{Term: 1}, nil)
					answered.Add(1)
				case <-tr.closed:
					return
				}
			}
		}()
		s := newSession(tr, w)
		defer s.close()
		const calls = 40
		for id := range uint64(calls) {
			// The link's reader hands each call to raft itself while
			// raft is free and nothing is queued, and raft is free: the
			// peer reads nothing, and the session waits in a write.
			s.submit(id, &raft.RequestVoteRequest{Term: 1})
			synctest.Wait()
		}
		if tk, an := taken.Load(), answered.Load(); tk != an {
			t.Errorf("raft took %d calls and answered %d: it waits in Respond, on the peer", tk, an)
		}
		// Once the peer reads, every call is answered, in order.
		r := bufio.NewReader(b)
		for id := range uint64(calls) {
			f, _, err := readFrame(r, nil)
			if err != nil {
				t.Fatalf("answer %d: %v", id, err)
			}
			if f.id != id || f.kind != kindResponse {
				t.Fatalf("answer %d: kind %d for call %d", id, f.kind, f.id)
			}
		}
		close(tr.closed)
	})
}

// A configuration raft cannot decode is refused at decoding, in an
// AppendEntries' configuration entry and in an InstallSnapshot: raft's
// DecodeConfiguration panics on it (appendEntries, installSnapshot), so
// one such frame from any peer killed the node.
func TestUndecodableConfigurationIsRefused(t *testing.T) {
	good := raft.EncodeConfiguration(raft.Configuration{Servers: []raft.Server{{ID: "a", Address: "a"}}})
	for _, c := range []struct {
		data []byte
		ok   bool
	}{{good, true}, {[]byte("garbage"), false}, {nil, false}, {good[:len(good)-1], false}} {
		ae := &raft.AppendEntriesRequest{Term: 3, Leader: []byte("a"),
			Entries: []*raft.Log{{Index: 1, Term: 3, Type: raft.LogConfiguration, Data: c.data}}}
		is := &raft.InstallSnapshotRequest{SnapshotVersion: 1, Term: 3, Leader: []byte("a"), Configuration: c.data, Size: 1}
		for _, req := range []any{ae, is} {
			b, rpc, err := appendRequest(nil, 1, "g", req)
			if err != nil {
				t.Fatal(err)
			}
			f, err := parseFrame(b[4:])
			if err != nil {
				t.Fatal(err)
			}
			if _, err := decodeRequest(rpc, f.body); c.ok != (err == nil) {
				t.Errorf("%T with configuration %q: decode error %v", req, c.data, err)
			}
		}
	}
}

// A snapshot stream cut midway gives raft fewer bytes than the request's
// size and then the end, never more nor an error-free whole: raft's
// installSnapshot cancels the snapshot when the count differs from the
// size, so half a state machine is never installed. Pinned.
func TestCutSnapshotStreamEndsShort(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		pn := newPipeNet()
		a, _ := bareNet(t, pn, "a", 5*time.Second)
		b, bAddr := bareNet(t, pn, "b", 5*time.Second)
		bT := mustTransport(t, b, "g")
		got := make(chan int64, 1)
		go func() { // b's raft: reads the data as installSnapshot does
			rpc := <-bT.Consumer()
			n, _ := io.Copy(io.Discard, rpc.Reader)
			got <- n
			rpc.Respond(nil, errors.New("short read"))
		}()
		conn, err := a.dial(bAddr, useSnapshot)
		if err != nil {
			t.Fatal(err)
		}
		req := &raft.InstallSnapshotRequest{SnapshotVersion: 1, Term: 2, Leader: []byte("a"), LastLogIndex: 9, LastLogTerm: 2,
			Configuration: raft.EncodeConfiguration(raft.Configuration{}), Size: 1000}
		frame, _, err := appendRequest(nil, 0, "g", req)
		if err != nil {
			t.Fatal(err)
		}
		go func() {
			_, _ = conn.Write(append(frame, make([]byte, 500)...))
			conn.Close() // the sender dies halfway
		}()
		if n := <-got; n >= req.Size {
			t.Errorf("raft read %d bytes of a %d-byte snapshot cut at 500", n, req.Size)
		}
	})
}
