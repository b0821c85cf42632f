package cluster

import (
	"errors"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/floodgate/floodgate/raftnet"
)

// A held mux answers a raftnet hello that it takes no peer yet rather
// than closing it: a closed hello reads as an older release, which the
// dialer would then call through NetworkTransport once the mux admits
// peers, with no handshake naming a cluster (how a node of another
// cluster starting at a member's address was taken into the member's
// cluster's meta group). Admitted, the mux routes raftnet as before.
func TestHeldMuxAnswersRaftnet(t *testing.T) {
	open := func(held bool) (*Mux, *raftnet.Network, raft.ServerAddress) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		m := NewMux(ln, nil, nil, slog.New(slog.DiscardHandler), held)
		t.Cleanup(func() { m.Close() })
		layer, err := m.Layer(raftnet.LayerName)
		if err != nil {
			t.Fatal(err)
		}
		n := raftnet.New(raftnet.Config{Layer: layer, Timeout: 5 * time.Second, Logger: slog.New(slog.DiscardHandler)})
		t.Cleanup(func() { n.Close() })
		return m, n, raft.ServerAddress(ln.Addr().String())
	}
	_, a, _ := open(false)
	bm, b, bAddr := open(true)
	at, err := a.Transport("g", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer at.Close()
	bt, err := b.Transport("g", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer bt.Close()
	done := make(chan struct{})
	defer close(done)
	go func() {
		for {
			select {
			case rpc := <-bt.Consumer():
				rpc.Respond(&raft.AppendEntriesResponse{Success: true}, nil)
			case <-done:
				return
			}
		}
	}()
	call := func() error {
		req := &raft.AppendEntriesRequest{Term: 1, Entries: []*raft.Log{{Index: 1, Term: 1, Data: []byte("x")}}}
		return at.AppendEntries("b", bAddr, req, &raft.AppendEntriesResponse{})
	}
	err = call()
	if err == nil || !strings.Contains(err.Error(), "takes no peer yet") || errors.Is(err, raftnet.ErrOtherCluster) {
		t.Fatalf("a call to a held node: %v, want it told that the node takes no peer yet", err)
	}
	if bm.Refused() != 1 {
		t.Errorf("the held mux counted %d refusals, want 1", bm.Refused())
	}
	bm.Admit()
	if err := call(); err != nil {
		t.Fatalf("once admitted: %v", err)
	}
}
