package main

import (
	"context"
	"fmt"
	"net"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/reflection"

	pb "github.com/floodgate/floodgate/proto/floodgate/v1"
)

// stubLimiter answers every check at once with a decision shaped like a
// real one, counting nothing: what an Allow costs the client and gRPC
// alone.
type stubLimiter struct {
	pb.UnimplementedRateLimiterServer
}

func (stubLimiter) Allow(_ context.Context, r *pb.AllowRequest) (*pb.AllowResponse, error) {
	return stubDecision(r.GetKey()), nil
}

func stubDecision(key string) *pb.AllowResponse {
	now := time.Now().UnixMilli()
	return &pb.AllowResponse{Allowed: true, Limit: 1000, Remaining: 999, ResetAtMs: now + 1000,
		DecidedBy: "limits[0]", Key: key, ResetAfterMs: 1000, WindowMs: 1000}
}

// benchCeiling measures, with ghz, the health check and a single Allow
// against an in-process server that does no work: the ratio between them
// is the most any Allow can reach against the health check with this
// client on this machine (an Allow request and answer cost ghz more to
// build, send and decode than the health check's empty ones).
func benchCeiling(ctx context.Context, rp *report, g *ghzRunner, w workload, keys int, duration, warmup time.Duration) error {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	srv := grpc.NewServer()
	pb.RegisterRateLimiterServer(srv, stubLimiter{})
	healthpb.RegisterHealthServer(srv, health.NewServer())
	reflection.Register(srv) // ghz reads the service definitions from it
	go srv.Serve(ln)
	defer srv.Stop()
	addr := ln.Addr().String()
	fmt.Printf("\nclient ceiling: ghz against a stub server in this process (%s) that answers at once\n", addr)
	health, err := g.run(ctx, addr, ghzRun{call: healthCall, data: "{}", decisions: 1}, duration, warmup)
	if err != nil {
		return err
	}
	rp.add(healthRow("gRPC health check, stub server (reference)", ghzClient+" stub", health))
	run, err := w.ghz(keys, g.dir)
	if err != nil {
		return err
	}
	res, err := g.run(ctx, addr, run, duration, warmup)
	if err != nil {
		return err
	}
	r := rateRow("Allow on a stub server that does nothing (the client's ceiling)", ghzClient+" stub", res, health, 0)
	r.figure += " (no Allow can do better with ghz here)"
	rp.add(r)
	return nil
}
