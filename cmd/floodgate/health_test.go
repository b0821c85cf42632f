package main

import (
	"context"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	pb "github.com/floodgate/floodgate/proto/floodgate/v1"
	"github.com/floodgate/floodgate/rpc"
)

// With TLS on the client port, the kubelet's gRPC probes (plaintext, no
// client certificate) could not reach the node's health, and no setting
// let them: --health-addr serves that health, and only it, in plaintext.
func TestHealthAddrServesOnlyHealthInPlaintext(t *testing.T) {
	hs := health.NewServer()
	rpc.MarkNotServing(hs)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer serveHealth(ln, hs).Stop()
	conn, err := grpc.NewClient(ln.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	check := func(service string) healthpb.HealthCheckResponse_ServingStatus {
		t.Helper()
		resp, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{Service: service})
		if err != nil {
			t.Fatal(err)
		}
		return resp.Status
	}
	if got := check(pb.RateLimiter_ServiceDesc.ServiceName); got != healthpb.HealthCheckResponse_NOT_SERVING {
		t.Fatalf("a node not started yet: %v", got)
	}
	// The node's own health server: its changes show at once.
	rpc.MarkServing(hs)
	if got := check(pb.RateLimiter_ServiceDesc.ServiceName); got != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("a serving node: %v", got)
	}
	if _, err := pb.NewRateLimiterClient(conn).Allow(ctx, &pb.AllowRequest{Key: "k"}); status.Code(err) != codes.Unimplemented {
		t.Fatalf("a check on the health port: %v, want Unimplemented", err)
	}
	if _, err := pb.NewAdminClient(conn).Status(ctx, &pb.StatusRequest{}); status.Code(err) != codes.Unimplemented {
		t.Fatalf("Admin on the health port: %v, want Unimplemented", err)
	}
	// Nobody needs a credential here, so nobody may send more than a
	// health check: a 4 MiB message was taken, and held while unfinished.
	big := &healthpb.HealthCheckRequest{Service: strings.Repeat("x", 8<<10)}
	if _, err := healthpb.NewHealthClient(conn).Check(ctx, big); status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("an 8 KiB health check: %v, want ResourceExhausted", err)
	}
}

// --health-addr and --http-addr are checked as the other listeners are,
// before anything starts (so by --check-config too).
func TestHealthAddrFlag(t *testing.T) {
	for _, tc := range []struct {
		args []string
		env  map[string]string
		want string
	}{
		{[]string{"--health-addr", "7704"}, nil, `health-addr: "7704" is not host:port`},
		{[]string{"--health-addr", "127.0.0.1:7700"}, nil, "health-addr: 127.0.0.1:7700 is also --grpc-addr's"},
		// A port out of range: refused here, as --grpc-addr's is, not
		// only when the node binds it at start.
		{[]string{"--health-addr", "127.0.0.1:99999"}, nil, `health-addr: "127.0.0.1:99999": port must be a number from 0 to 65535`},
		{[]string{"--http-addr", "127.0.0.1:99999"}, nil, `http-addr: "127.0.0.1:99999": port must be a number from 0 to 65535`},
		{[]string{"--http-addr", "127.0.0.1:-1"}, nil, `http-addr: "127.0.0.1:-1": port must be a number from 0 to 65535`},
		{nil, map[string]string{"FLOODGATE_HTTP_ADDR": "bad/host:80"}, `http-addr: "bad/host:80": host must be a name or an IP address`},
	} {
		if _, err := parseOptions(tc.args, envOf(tc.env), io.Discard); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: %v, want %q", tc.args, err, tc.want)
		}
	}
	o, err := parseOptions([]string{"--health-addr", "127.0.0.1:7704"}, noEnv, io.Discard)
	if err != nil || o.healthAddr != "127.0.0.1:7704" {
		t.Fatalf("a good --health-addr: %v, %+v", err, o)
	}
}
