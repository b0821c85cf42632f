package raftnet

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/hashicorp/raft"
)

// countingLayer counts the dials made through a pipe layer.
type countingLayer struct {
	*pipeLayer
	dials atomic.Int64
}

func (l *countingLayer) Dial(addr raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	l.dials.Add(1)
	return l.pipeLayer.Dial(addr, timeout)
}

// awaitingNet is a Network at "a" on pn whose groups' transports wait
// for peers while *leading holds.
func awaitingNet(t *testing.T, pn *pipeNet, peerWait time.Duration) (*Network, *countingLayer) {
	t.Helper()
	layer := &countingLayer{pipeLayer: pn.listen("a")}
	n := New(Config{Layer: layer, Timeout: 5 * time.Second, PeerWait: peerWait, Logger: slog.New(slog.DiscardHandler)})
	t.Cleanup(func() { n.Close() })
	return n, layer
}

type callResult struct {
	resp *raft.AppendEntriesResponse
	err  error
	at   time.Duration
}

// appendLater makes an AppendEntries on tr in the background and reports
// it with the fake time it took.
func appendLater(tr *Transport, to raft.ServerAddress) <-chan callResult {
	ch := make(chan callResult, 1)
	start := time.Now()
	go func() {
		resp, err := appendEntries(tr, to, 7, 1)
		ch <- callResult{resp, err, time.Since(start)}
	}()
	return ch
}

// A replicating AppendEntries to a peer that cannot be reached waits for
// it and is sent soon after it is back (within two redial periods), and
// the next pipeline to it is refused once; the groups waiting for the
// same peer share its dials.
func TestReplicationWaitsForAPeerThatIsDown(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		pn := newPipeNet()
		a, layer := awaitingNet(t, pn, time.Minute)
		var calls []<-chan callResult
		var trs []*Transport
		for i := range 5 {
			tr := mustTransport(t, a, fmt.Sprintf("g%d", i))
			tr.Await(func() bool { return true })
			calls = append(calls, appendLater(tr, "b"))
			trs = append(trs, tr)
		}
		time.Sleep(30 * time.Second)
		synctest.Wait()
		for i, ch := range calls {
			select {
			case r := <-ch:
				t.Fatalf("group %d: the call ended while the peer was down: %+v", i, r)
			default:
			}
		}
		if d := layer.dials.Load(); d > 30*time.Second.Milliseconds()/redialEvery.Milliseconds()+10 {
			t.Errorf("%d dials in 30s for 5 waiting groups: they do not share them", d)
		}
		b, _ := bareNet(t, pn, "b", 5*time.Second)
		for i := range 5 {
			answer(mustTransport(t, b, fmt.Sprintf("g%d", i)))
		}
		for i, ch := range calls {
			r := <-ch
			if r.err != nil || !r.resp.Success || r.resp.LastLog != 7 {
				t.Fatalf("group %d: %+v", i, r)
			}
			// The group whose turn it is dials within a period of the
			// peer's return, the others find its link at their next try.
			if late := r.at - 30*time.Second; late > 2*redialEvery {
				t.Errorf("group %d: sent %s after the peer was back", i, late)
			}
			for try, want := range []error{raft.ErrPipelineReplicationNotSupported, nil} {
				p, err := trs[i].AppendEntriesPipeline("peer", "b")
				if !errors.Is(err, want) {
					t.Errorf("group %d: pipeline %d after the wait: %v, want %v", i, try+1, err, want)
				}
				if p != nil {
					p.Close()
				}
			}
		}
	})
}

// What raft counts contact by, and elections, are not held up: a
// heartbeat, a vote and a transport that was never told to wait fail at
// once, as before.
func TestHeartbeatsVotesAndPlainTransportsFailAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		pn := newPipeNet()
		a, _ := awaitingNet(t, pn, time.Minute)
		tr := mustTransport(t, a, "g")
		tr.Await(func() bool { return true })
		plain := mustTransport(t, a, "plain")
		start := time.Now()
		hb := &raft.AppendEntriesRequest{RPCHeader: raft.RPCHeader{Addr: []byte("a")}, Term: 1}
		if err := tr.AppendEntries("b", "b", hb, &raft.AppendEntriesResponse{}); err == nil {
			t.Error("a heartbeat to a peer that is down succeeded")
		}
		vote := &raft.RequestVoteRequest{RPCHeader: raft.RPCHeader{Addr: []byte("a")}, Term: 2}
		if err := tr.RequestVote("b", "b", vote, &raft.RequestVoteResponse{}); err == nil {
			t.Error("a vote request to a peer that is down succeeded")
		}
		if _, err := appendEntries(plain, "b", 1, 1); err == nil {
			t.Error("an AppendEntries of a transport without Await succeeded")
		}
		if took := time.Since(start); took != 0 {
			t.Errorf("they failed after %s, not at once", took)
		}
	})
}

// A wait ends, with the dial's error, when the group stops leading
// (raft's shutdown waits for its replication), after PeerWait, or with
// ErrTransportShutdown when the transport closes.
func TestAWaitEnds(t *testing.T) {
	for _, tc := range []struct {
		name    string
		end     func(tr *Transport, leading *atomic.Bool)
		after   time.Duration // of fake time: when end runs; PeerWait is 10s
		within  time.Duration
		closing bool
	}{
		{name: "not leading", end: func(_ *Transport, l *atomic.Bool) { l.Store(false) }, after: 3 * time.Second, within: 3*time.Second + redialEvery},
		{name: "peer wait", end: func(*Transport, *atomic.Bool) {}, after: 0, within: 10 * time.Second},
		{name: "closed", end: func(tr *Transport, _ *atomic.Bool) { tr.Close() }, after: 3 * time.Second, within: 3 * time.Second, closing: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				pn := newPipeNet()
				a, _ := awaitingNet(t, pn, 10*time.Second)
				tr := mustTransport(t, a, "g")
				var leading atomic.Bool
				leading.Store(true)
				tr.Await(leading.Load)
				ch := appendLater(tr, "b")
				time.Sleep(tc.after)
				tc.end(tr, &leading)
				r := <-ch
				if r.err == nil {
					t.Fatal("the call succeeded")
				}
				if tc.closing != errors.Is(r.err, raft.ErrTransportShutdown) {
					t.Errorf("error %v", r.err)
				}
				if r.at > tc.within || r.at < tc.after {
					t.Errorf("ended after %s, want between %s and %s", r.at, tc.after, tc.within)
				}
			})
		})
	}
}

// pipeRaft is a raft node on a pipe net whose store outlives its
// process, so it can be killed and started again on its data.
type pipeRaft struct {
	id    string
	pn    *pipeNet
	net   *Network
	r     *raft.Raft
	fsm   *kv
	store *raft.InmemStore
	snaps *raft.InmemSnapshotStore
}

func (p *pipeRaft) start(t *testing.T, await bool, commitTimeout time.Duration) {
	t.Helper()
	p.net = New(Config{Layer: p.pn.listen(p.id), Timeout: 5 * time.Second, Logger: slog.New(slog.DiscardHandler)})
	tr, err := p.net.Transport("g", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	rc := raft.DefaultConfig()
	rc.LocalID = raft.ServerID(p.id)
	rc.Logger = quietLogger()
	rc.HeartbeatTimeout, rc.ElectionTimeout, rc.LeaderLeaseTimeout = 200*time.Millisecond, 200*time.Millisecond, 100*time.Millisecond
	if commitTimeout > 0 {
		rc.CommitTimeout = commitTimeout
	}
	p.fsm = &kv{}
	if p.r, err = raft.NewRaft(rc, p.fsm, p.store, p.store, p.snaps, tr); err != nil {
		t.Fatal(err)
	}
	if await {
		r := p.r
		tr.Await(func() bool { return r.State() == raft.Leader })
	}
}

func (p *pipeRaft) stop() {
	if p.r != nil {
		p.r.Shutdown().Error()
		p.net.Close()
		p.r = nil
	}
}

// With real raft: a follower down for a minute is replicated to again
// within a moment of its return. raft alone backs off its replication
// to it up to 10s between tries (logged for comparison: about 2s in this
// schedule, up to 10s in others), so a group of three that then lost
// another replica waited that long for a quorum.
func TestAFollowerBackFromALongOutageCatchesUpAtOnce(t *testing.T) {
	if took := catchUpAfterOutage(t, true, 0, 1); took > time.Second {
		t.Errorf("caught up %s after its return, want within 1s", took)
	}
	t.Logf("without the wait (raft's backoff alone) it caught up %s after its return", catchUpAfterOutage(t, false, 0, 1))
}

// The same with more entries written during the outage than one
// AppendEntries carries (raft's MaxAppendEntries, 64), and the groups'
// commit timeout (a second, cluster/group.go): the call that waited was
// built before the outage's entries, and once it was sent raft pipelined
// the rest 64 entries per commit timeout, so a follower back from a
// minute down at 10 entries a second caught up 9-15 s after its return.
func TestAFollowerBackCatchesUpWithEverythingWrittenWhileItWasDown(t *testing.T) {
	took := catchUpAfterOutage(t, true, time.Second, 10)
	if took > 3*time.Second {
		t.Errorf("caught up %s after its return, want within 3s", took)
	}
	t.Logf("caught up %s after its return", took)
}

// catchUpAfterOutage runs three rafts (commitTimeout: raft's default when
// 0), stops a follower for a minute while perSecond entries a second are
// applied, starts it again and returns how long it took to apply them.
func catchUpAfterOutage(t *testing.T, await bool, commitTimeout time.Duration, perSecond int) (took time.Duration) {
	synctest.Test(t, func(t *testing.T) {
		pn := newPipeNet()
		var nodes []*pipeRaft
		var servers []raft.Server
		for i := range 3 {
			p := &pipeRaft{id: fmt.Sprintf("n%d", i+1), pn: pn, store: raft.NewInmemStore(), snaps: raft.NewInmemSnapshotStore()}
			p.start(t, await, commitTimeout)
			nodes = append(nodes, p)
			servers = append(servers, raft.Server{ID: raft.ServerID(p.id), Address: raft.ServerAddress(p.id)})
		}
		defer func() {
			for _, p := range nodes {
				p.stop()
			}
		}()
		if err := nodes[0].r.BootstrapCluster(raft.Configuration{Servers: servers}).Error(); err != nil {
			t.Fatal(err)
		}
		var leader, down *pipeRaft
		for leader == nil {
			time.Sleep(50 * time.Millisecond)
			for _, p := range nodes {
				if p.r.State() == raft.Leader {
					leader = p
				}
			}
		}
		for _, p := range nodes {
			if p != leader {
				down = p
			}
		}
		var want []string
		apply := func(cmd string) {
			want = append(want, cmd)
			if err := leader.r.Apply([]byte(cmd), 5*time.Second).Error(); err != nil {
				t.Fatal(err)
			}
		}
		apply("before")
		down.stop()
		for i := range 60 * perSecond {
			time.Sleep(time.Second / time.Duration(perSecond))
			apply(fmt.Sprintf("during-%d", i))
		}
		down.start(t, await, commitTimeout)
		back := time.Now()
		for !slices.Equal(down.fsm.applied(), want) {
			if time.Since(back) > time.Minute {
				t.Fatalf("%s applied %d of %d entries a minute after its return", down.id, len(down.fsm.applied()), len(want))
			}
			time.Sleep(10 * time.Millisecond)
		}
		took = time.Since(back)
	})
	return took
}
