package deadconn

import (
	"context"
	"net"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

// A connection whose peer was down for long is dialed again within
// MaxRedialDelay of the peer's return: gRPC's default backoff would have
// grown to seconds after a 6 s outage (attempts near 0, 1, 2.6, 5.2 and
// 9.4 s), and to two minutes after a longer one. The caller keeps
// calling meanwhile, as a node's forwards and the SDK's checks do; a call
// on a connection in backoff fails at once and dials nothing.
func TestRedialAfterALongOutage(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // the peer is down: dials are refused
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()), Redial())
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	hc := healthpb.NewHealthClient(cc)
	call := func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel()
		_, err := hc.Check(ctx, &healthpb.HealthCheckRequest{})
		return err
	}
	for end := time.Now().Add(6 * time.Second); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
		if call() == nil {
			t.Fatal("a call succeeded while nothing listened")
		}
	}

	if ln, err = net.Listen("tcp", addr); err != nil {
		t.Fatal(err)
	}
	gs := grpc.NewServer()
	healthpb.RegisterHealthServer(gs, health.NewServer())
	go func() { _ = gs.Serve(ln) }()
	defer gs.Stop()
	back := time.Now()
	for call() != nil {
		if time.Since(back) > 3*time.Second {
			t.Fatal("no call succeeded 3 s after the peer came back")
		}
		time.Sleep(20 * time.Millisecond)
	}
	// The next attempt comes at most MaxRedialDelay (+20% jitter) after
	// the last, and the dial and the call take milliseconds (800 ms of
	// slack for a loaded machine; without Redial this took 3 s).
	if took := time.Since(back); took > 2*time.Second {
		t.Errorf("calls succeeded again %s after the peer came back, want within %s", took, MaxRedialDelay)
	} else {
		t.Logf("calls succeeded again %s after the peer came back", took)
	}
}
