package main

import (
	"fmt"
	"net"

	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

// serveHealth serves the node's gRPC health, alone and in plaintext, on
// addr (--health-addr): the kubelet's gRPC probes speak neither TLS nor
// mutual TLS, so once --tls-cert is set they cannot reach the health of
// the client port, and every pod would fail its startup probe. Health
// tells nothing a caller could abuse, and no other service is served
// here.
func serveHealth(addr string, hs *health.Server) (*grpc.Server, net.Addr, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, nil, fmt.Errorf("health-addr: %w", err)
	}
	gs := grpc.NewServer()
	healthpb.RegisterHealthServer(gs, hs)
	go func() { _ = gs.Serve(ln) }()
	return gs, ln.Addr(), nil
}
