package client

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	pb "github.com/floodgate/floodgate/proto/floodgate/v1"
)

// serveAdminWithToken serves n on a new loopback port to callers that
// send "Bearer "+token.
func serveAdminWithToken(t *testing.T, n *statusNode, token string) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := grpc.NewServer(grpc.UnaryInterceptor(func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		md, _ := metadata.FromIncomingContext(ctx)
		if got := md.Get("authorization"); len(got) != 1 || got[0] != "Bearer "+token {
			return nil, status.Errorf(codes.Unauthenticated, "authorization %q", got)
		}
		return h(ctx, req)
	}))
	pb.RegisterAdminServer(s, n)
	go s.Serve(lis)
	t.Cleanup(s.Stop)
	return lis.Addr().String()
}

// A token read from a file keeps its newline: the client drops
// surrounding white space, as a node does with its token files, instead of
// failing every call (gRPC refuses to send such a header: Internal). A
// token gRPC cannot send is refused by New, naming Options.Token.
func TestTokenFromAFile(t *testing.T) {
	n := &statusNode{answers: 1 << 30}
	addr := serveAdminWithToken(t, n, "s3cret")
	n.nodes = []string{addr}
	c, err := New(context.Background(), Options{Addrs: []string{addr}, Token: "s3cret\n", RefreshInterval: time.Hour})
	if err != nil {
		t.Fatalf("New with a token that ends in a newline: %v", err)
	}
	c.Close()
	for _, tok := range []string{"s3\u00a0cret", "\ufeffs3cret", "s3 cret"} {
		_, err := New(context.Background(), Options{Addrs: []string{addr}, Token: tok, RefreshInterval: time.Hour})
		if err == nil || !strings.Contains(err.Error(), "Options.Token") {
			t.Errorf("New with token %q: %v, want a refusal naming Options.Token", tok, err)
		}
	}
}

// A wrong token fails New with the node's code (Unauthenticated), still
// ErrNoNodes: a start-up loop retrying while no node answers must be able
// to tell a misconfiguration, which no retry mends. The code was lost
// (Unknown).
func TestNewKeepsTheNodesCode(t *testing.T) {
	n := &statusNode{answers: 1 << 30}
	addr := serveAdminWithToken(t, n, "s3cret")
	n.nodes = []string{addr}
	_, err := New(context.Background(), Options{Addrs: []string{addr}, Token: "wrong", RefreshInterval: time.Hour})
	if status.Code(err) != codes.Unauthenticated || !errors.Is(err, ErrNoNodes) {
		t.Fatalf("New with a wrong token: %v (code %v), want Unauthenticated and ErrNoNodes", err, status.Code(err))
	}
}
