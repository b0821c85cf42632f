package rpc_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	peerv1 "github.com/floodgate/floodgate/proto/floodgate/peer/v1"
	"github.com/floodgate/floodgate/test/inproc"
)

// The call rules (cmd/floodgate: authz, given to NewGRPCServer as a
// server option) judge a Peer call before its cluster is: a caller
// without the peer role is refused as such, PermissionDenied, never
// answered Unavailable (try again) with the node's cluster id in it, which
// anyone who reaches the port could read by naming a made-up cluster.
func TestPeerCallsAreAuthorizedBeforeTheirCluster(t *testing.T) {
	cfg := inproc.Config(t, "n1")
	const own = "0123456789abcdef"
	if err := os.WriteFile(filepath.Join(cfg.DataDir, "cluster"), []byte(own+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	deny := func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		return nil, status.Errorf(codes.PermissionDenied, "%s: the peer role is required", info.FullMethod)
	}
	_, _, conn := openedNode(t, cfg, grpc.ChainUnaryInterceptor(deny))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ctx = metadata.AppendToOutgoingContext(ctx, "floodgate-cluster", "made-up")
	_, err := peerv1.NewPeerClient(conn).ShardProgress(ctx, &peerv1.ShardProgressRequest{})
	if status.Code(err) != codes.PermissionDenied || strings.Contains(err.Error(), own) {
		t.Fatalf("an unauthorized Peer call naming another cluster: %v; want PermissionDenied, without the node's cluster", err)
	}
}
