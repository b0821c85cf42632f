package rpc

import (
	"context"
	"errors"
	"fmt"
	"net"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"

	"github.com/floodgate/floodgate/fsm"
	peerv1 "github.com/floodgate/floodgate/proto/floodgate/peer/v1"
)

// tooLargePeer answers every ExportSlots as a replica whose export is
// over fsm.MaxExport does, through toStatus.
type tooLargePeer struct{ peerv1.UnimplementedPeerServer }

func (tooLargePeer) ExportSlots(context.Context, *peerv1.ExportSlotsRequest) (*peerv1.ExportSlotsResponse, error) {
	return nil, toStatus(fmt.Errorf("%w: export of 64 slots is 70000000 bytes", fsm.ErrExportTooLarge))
}

// A peer's export too large for one import entry reaches the move's target
// as fsm.ErrExportTooLarge, which it meets by asking for fewer slots
// (cluster.importInParts); before, it was a retryable "no leader" and the
// move retried the same export forever, its slots frozen.
func TestExportTooLargeCrossesAsSuch(t *testing.T) {
	if c := codeOf(fmt.Errorf("x: %w", fsm.ErrExportTooLarge)); c != codes.ResourceExhausted {
		t.Fatalf("code %v", c)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gs := grpc.NewServer()
	peerv1.RegisterPeerServer(gs, tooLargePeer{})
	go gs.Serve(ln)
	defer gs.Stop()
	peers := NewPeers()
	defer peers.Close()
	_, err = peers.ExportSlots(context.Background(), ln.Addr().String(), 1, 7, []uint32{1, 2})
	if !errors.Is(err, fsm.ErrExportTooLarge) {
		t.Fatalf("ExportSlots = %v, want fsm.ErrExportTooLarge", err)
	}
}
