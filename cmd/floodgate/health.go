package main

import (
	"net"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/keepalive"
)

// healthLimits bound what a caller of the health port, who needs no
// credential, may make a node hold: a health check is a few bytes, and a
// probe opens a call or two. (gRPC's defaults took 4 MiB messages on any
// number of streams, a connection kept as long as its caller liked: a
// client holding 150 streams of messages it never finished held 650 MB of
// a node whose every other port wanted a certificate.)
var healthLimits = []grpc.ServerOption{
	grpc.MaxRecvMsgSize(4 << 10),
	grpc.MaxConcurrentStreams(16),
	grpc.MaxHeaderListSize(16 << 10),
	grpc.KeepaliveParams(keepalive.ServerParameters{MaxConnectionIdle: time.Minute, MaxConnectionAge: 10 * time.Minute}),
}

// serveHealth serves the node's gRPC health, alone and in plaintext, on
// addr (--health-addr): the kubelet's gRPC probes speak neither TLS nor
// mutual TLS, so once --tls-cert is set they cannot reach the health of
// the client port, and every pod would fail its startup probe. Health
// tells nothing a caller could abuse, and no other service is served
// here.
func serveHealth(ln net.Listener, hs *health.Server) *grpc.Server {
	gs := grpc.NewServer(healthLimits...)
	healthpb.RegisterHealthServer(gs, hs)
	go func() { _ = gs.Serve(ln) }()
	return gs
}
