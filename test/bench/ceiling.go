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
// against an in-process server that does no work, in rounds: the ratio
// between them is the most any Allow can reach against the health check
// with this client on this machine (an Allow request and answer cost ghz
// more to build, send and decode than the health check's empty ones).
func benchCeiling(ctx context.Context, rp *report, g *ghzRunner, w workload, keys, rounds int, duration, warmup time.Duration) error {
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
	run, err := w.ghz(keys, g.dir)
	if err != nil {
		return err
	}
	hm := measurement{name: "gRPC health check, stub server", run: func(int) (*result, error) {
		return g.run(ctx, addr, ghzRun{call: healthCall, data: "{}", decisions: 1}, duration, warmup)
	}}
	stub := measurement{name: "Allow on a stub server", run: func(int) (*result, error) {
		return g.run(ctx, addr, run, duration, warmup)
	}}
	healths, samples, errs, err := inRounds(rp.out, rounds, hm, []measurement{stub})
	if err != nil {
		return err
	}
	if errs[0] != nil {
		return errs[0]
	}
	_, hr := medianHealth("gRPC health check, stub server (reference)", ghzClient+" stub", healths)
	rp.add(hr)
	w.name = "Allow on a stub server that does nothing (the client's ceiling)"
	w.kind = info
	r, _ := w.judgeRounds(ghzClient+" stub", samples[0])
	r.figure += " (no Allow can do better with ghz here)"
	rp.add(r)
	return nil
}
