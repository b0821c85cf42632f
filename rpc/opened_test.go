package rpc_test

import (
	"net"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/floodgate/floodgate/cluster"
	"github.com/floodgate/floodgate/rpc"
)

// openedNode opens, and does not start, the node of cfg, with its gRPC
// server (opts added) serving at cfg.GRPCAddr, and returns it with its
// peers and a client connection to it; all are closed by the test's end.
func openedNode(t *testing.T, cfg cluster.Config, opts ...grpc.ServerOption) (*cluster.Node, *rpc.Peers, *grpc.ClientConn) {
	t.Helper()
	ln, err := net.Listen("tcp", cfg.GRPCAddr)
	if err != nil {
		t.Fatal(err)
	}
	peers := rpc.NewPeers()
	t.Cleanup(func() { peers.Close() })
	node, err := cluster.Open(cfg, peers)
	if err != nil {
		ln.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() { node.Close() })
	gs, _, _ := rpc.NewGRPCServer(node, peers, rpc.Config{}, opts...)
	go gs.Serve(ln)
	t.Cleanup(gs.Stop)
	conn, err := grpc.NewClient(cfg.GRPCAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return node, peers, conn
}
