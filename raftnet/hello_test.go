package raftnet

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/hashicorp/raft"
)

// memberOf is an Admit for a node of cluster ours: the rule the node
// applies (package cluster), a peer that knows no cluster taken.
func memberOf(ours string, refusals *atomic.Int64) func(string) error {
	return func(theirs string) error {
		if ours != "" && theirs != "" && theirs != ours {
			if refusals != nil {
				refusals.Add(1)
			}
			return fmt.Errorf("a node of cluster %q, this one is of %q", theirs, ours)
		}
		return nil
	}
}

// clusterNet is a Network at addr on pn, a node of cluster id.
func clusterNet(t *testing.T, pn *pipeNet, addr, id string, peerWait time.Duration) *Network {
	t.Helper()
	n := New(Config{Layer: pn.listen(addr), Timeout: 5 * time.Second, PeerWait: peerWait,
		Cluster: func() string { return id }, Admit: memberOf(id, nil), Logger: slog.New(slog.DiscardHandler)})
	t.Cleanup(func() { n.Close() })
	return n
}

// awaitingWithFallback is a's transport of group "g", waiting for peers,
// with a NetworkTransport fallback whose dials legacy counts.
func awaitingWithFallback(t *testing.T, pn *pipeNet, a *Network) (*Transport, *countingLayer) {
	t.Helper()
	legacy := &countingLayer{pipeLayer: pn.listen("a-legacy")}
	fallback := raft.NewNetworkTransportWithConfig(&raft.NetworkTransportConfig{
		Stream: legacy, MaxPool: 2, Timeout: 5 * time.Second, Logger: quietLogger()})
	tr, err := a.Transport("g", fallback, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tr.Close() })
	tr.Await(func() bool { return true })
	return tr, legacy
}

// Raft calls between the nodes of one cluster, or with a node that knows
// none yet (a fresh one, or an older release's), go through; between
// nodes of two clusters they fail with ErrOtherCluster whichever side
// knows it, reach no group of the other, and are neither sent through
// NetworkTransport nor waited for.
func TestCallsBetweenClustersAreRefused(t *testing.T) {
	for _, tc := range []struct {
		dialer, acceptor string
		refused          bool
	}{
		{"c1", "c1", false},
		{"", "c1", false},
		{"c1", "", false},
		{"", "", false},
		{"c1", "c2", true},
	} {
		t.Run(fmt.Sprintf("%q to %q", tc.dialer, tc.acceptor), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				pn := newPipeNet()
				a := clusterNet(t, pn, "a", tc.dialer, time.Minute)
				b := clusterNet(t, pn, "b", tc.acceptor, time.Minute)
				tr, legacy := awaitingWithFallback(t, pn, a)
				var reached atomic.Int64
				bt := mustTransport(t, b, "g")
				go func() {
					for {
						select {
						case rpc := <-bt.Consumer():
							reached.Add(1)
							if rpc.Reader != nil { // an InstallSnapshot
								_, _ = io.Copy(io.Discard, rpc.Reader)
								rpc.Respond(&raft.InstallSnapshotResponse{Success: true}, nil)
								continue
							}
							rpc.Respond(&raft.AppendEntriesResponse{Success: true}, nil)
						case <-bt.closed:
							return
						}
					}
				}()
				start := time.Now()
				_, err := appendEntries(tr, "b", 7, 1)
				switch {
				case tc.refused && !errors.Is(err, ErrOtherCluster):
					t.Fatalf("a call to a node of another cluster: %v, want ErrOtherCluster", err)
				case tc.refused && time.Since(start) > 0:
					t.Errorf("the call was refused after %s: a node of another cluster is not waited for", time.Since(start))
				case !tc.refused && err != nil:
					t.Fatalf("a call within a cluster: %v", err)
				}
				var s raft.InstallSnapshotResponse
				err = tr.InstallSnapshot("b", "b", &raft.InstallSnapshotRequest{Term: 1, Size: 1}, &s, bytes.NewReader([]byte{1}))
				if tc.refused != errors.Is(err, ErrOtherCluster) {
					t.Errorf("a snapshot: %v, refused %v", err, tc.refused)
				}
				synctest.Wait()
				if tc.refused && reached.Load() != 0 {
					t.Errorf("%d calls reached the other cluster's group", reached.Load())
				}
				if d := legacy.dials.Load(); d != 0 {
					t.Errorf("%d dials through NetworkTransport", d)
				}
			})
		})
	}
}

// The answer names the acceptor's cluster, so a dialer refuses a node of
// another cluster that would take it (one that judges nobody).
func TestDialerRefusesAnAcceptorOfAnotherCluster(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		pn := newPipeNet()
		a := clusterNet(t, pn, "a", "c1", time.Minute)
		b := New(Config{Layer: pn.listen("b"), Timeout: 5 * time.Second, Cluster: func() string { return "c2" },
			Logger: slog.New(slog.DiscardHandler)})
		t.Cleanup(func() { b.Close() })
		answer(mustTransport(t, b, "g"))
		_, err := appendEntries(mustTransport(t, a, "g"), "b", 7, 1)
		if !errors.Is(err, ErrOtherCluster) {
			t.Fatalf("a call to a node of cluster c2 that takes anyone: %v, want ErrOtherCluster", err)
		}
	})
}

// A hello of protocol version 1 (a release before the cluster was in
// it) is still taken, and answered in version 1.
func TestVersion1HelloIsTaken(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		pn := newPipeNet()
		clusterNet(t, pn, "b", "c1", time.Minute)
		c, err := pn.listen("a").Dial("b", time.Second)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if _, err := c.Write(append(helloMagic[:], protocolV1, useLink)); err != nil {
			t.Fatal(err)
		}
		var ack [5]byte
		if _, err := io.ReadFull(c, ack[:]); err != nil {
			t.Fatalf("no answer to a version 1 hello: %v", err)
		}
		if want := append(helloMagic[:], protocolV1); !bytes.Equal(ack[:], want) {
			t.Fatalf("answer %q, want %q", ack[:], want)
		}
	})
}

// A hello or an answer cut short, or with an unknown status, is an
// error, not a connection taken; a cluster id too long for the length
// byte is not sent.
func TestMalformedHandshakes(t *testing.T) {
	hello := func(id string) []byte {
		return append(append(helloMagic[:], protocolVersion, useLink, byte(len(id))), id...)
	}
	for name, b := range map[string][]byte{
		"cut in the id":        hello("c1")[:8],
		"no id length":         hello("c1")[:6],
		"unknown version":      append(helloMagic[:], 9, useLink, 0),
		"unknown use":          append(helloMagic[:], protocolVersion, 'X', 0),
		"not a raftnet header": []byte("GET / HTTP/1.1\r\n"),
	} {
		if _, err := readHello(&rwPair{r: bytes.NewReader(b)}, "c1", memberOf("c1", nil)); err == nil {
			t.Errorf("%s: taken", name)
		}
	}
	answer := func(status byte, id string) []byte {
		return append(append(helloMagic[:], protocolVersion, status, byte(len(id))), id...)
	}
	noDeadline := func(time.Time) error { return nil }
	for name, b := range map[string][]byte{
		"cut in the id":  answer(helloTaken, "c1")[:8],
		"unknown status": answer(7, "c1"),
	} {
		err := sendHello(&rwPair{r: bytes.NewReader(b)}, useLink, "c1", nil, noDeadline, time.Second)
		if err == nil || errors.Is(err, errNotSpoken) {
			t.Errorf("%s: %v, want an error other than errNotSpoken", name, err)
		}
	}
	long := string(make([]byte, maxClusterID+1))
	if err := sendHello(&rwPair{r: bytes.NewReader(nil)}, useLink, long, nil, noDeadline, time.Second); err == nil {
		t.Error("a cluster id of 256 bytes was sent")
	}
	p := &rwPair{r: bytes.NewReader(hello("c1"))}
	if _, err := readHello(p, long, nil); err == nil || p.w.Len() != 0 {
		t.Errorf("a node of a cluster id of 256 bytes answered: %v, %q", err, p.w.Bytes())
	}
}

// rwPair reads from r and takes every write.
type rwPair struct {
	r io.Reader
	w bytes.Buffer
}

func (p *rwPair) Read(b []byte) (int, error)  { return p.r.Read(b) }
func (p *rwPair) Write(b []byte) (int, error) { return p.w.Write(b) }

// A peer that answers that it takes no peer yet (a held data dir: the
// node's mux) is waited for like a peer that is down, never taken for an
// older release and called through NetworkTransport; the call goes
// through once the peer takes it.
func TestHeldPeerIsAwaited(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		pn := newPipeNet()
		a := clusterNet(t, pn, "a", "c1", time.Minute)
		tr, legacy := awaitingWithFallback(t, pn, a)
		held := pn.listen("b")
		go func() {
			for {
				c, err := held.Accept()
				if err != nil {
					return
				}
				RefuseHeld(c, time.Second)
			}
		}()
		call := appendLater(tr, "b")
		time.Sleep(3 * time.Second)
		held.Close()
		synctest.Wait()
		b := clusterNet(t, pn, "b", "c1", time.Minute)
		answer(mustTransport(t, b, "g"))
		r := <-call
		if r.err != nil || !r.resp.Success {
			t.Fatalf("after %s: %+v, %v; want the call through once b takes peers (3s)", r.at, r.resp, r.err)
		}
		if d := legacy.dials.Load(); d != 0 {
			t.Errorf("%d dials through NetworkTransport to a held peer", d)
		}
	})
}
