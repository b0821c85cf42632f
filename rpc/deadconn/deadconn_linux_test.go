package deadconn

import (
	"context"
	"net"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

// userTimeout reads a connection's TCP_USER_TIMEOUT.
func userTimeout(t *testing.T, c net.Conn) time.Duration {
	t.Helper()
	raw, err := c.(*net.TCPConn).SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var ms int
	var gerr error
	if err := raw.Control(func(fd uintptr) {
		ms, gerr = unix.GetsockoptInt(int(fd), unix.IPPROTO_TCP, unix.TCP_USER_TIMEOUT)
	}); err != nil {
		t.Fatal(err)
	}
	if gerr != nil {
		t.Fatal(gerr)
	}
	return time.Duration(ms) * time.Millisecond
}

// A client's connections (a node's to its peers, the SDK's) give up on
// data unacknowledged for After, so that a cut leaves no connection in
// TCP backoff: gRPC sets the keepalive timeout on the connection its
// dialer returns.
func TestClientConnectionsDropUnacknowledgedData(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gs := grpc.NewServer()
	healthpb.RegisterHealthServer(gs, health.NewServer())
	go func() { _ = gs.Serve(ln) }()
	defer gs.Stop()
	var mu sync.Mutex
	var dialed []net.Conn
	record := grpc.WithContextDialer(func(ctx context.Context, addr string) (net.Conn, error) {
		var d net.Dialer
		c, err := d.DialContext(ctx, "tcp", addr)
		if err == nil {
			mu.Lock()
			dialed = append(dialed, c)
			mu.Unlock()
		}
		return c, err
	})
	cc, err := grpc.NewClient(ln.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()), DialOption(), record)
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	check(t, cc)
	mu.Lock()
	defer mu.Unlock()
	if len(dialed) != 1 {
		t.Fatalf("%d connections dialed, want 1", len(dialed))
	}
	if got := userTimeout(t, dialed[0]); got != After {
		t.Errorf("TCP_USER_TIMEOUT %s, want %s", got, After)
	}
}

// check makes one health check on cc.
func check(t *testing.T, cc *grpc.ClientConn) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := healthpb.NewHealthClient(cc).Check(ctx, &healthpb.HealthCheckRequest{}); err != nil {
		t.Fatal(err)
	}
}

// capture is a listener that keeps the connections it accepted.
type capture struct {
	net.Listener
	mu    sync.Mutex
	conns []net.Conn
}

func (c *capture) Accept() (net.Conn, error) {
	conn, err := c.Listener.Accept()
	if err == nil {
		c.mu.Lock()
		c.conns = append(c.conns, conn)
		c.mu.Unlock()
	}
	return conn, err
}

// The node's server gives up on answers unacknowledged for After
// (gRPC's default is 20 s): a client cut off for longer than that would
// otherwise get its next answers only at the server's next
// retransmission.
func TestServerConnectionsDropUnacknowledgedData(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cl := &capture{Listener: ln}
	gs := grpc.NewServer(ServerOption())
	healthpb.RegisterHealthServer(gs, health.NewServer())
	go func() { _ = gs.Serve(cl) }()
	defer gs.Stop()
	cc, err := grpc.NewClient(ln.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	check(t, cc)
	cl.mu.Lock()
	defer cl.mu.Unlock()
	if len(cl.conns) != 1 {
		t.Fatalf("%d connections accepted, want 1", len(cl.conns))
	}
	if got := userTimeout(t, cl.conns[0]); got != After {
		t.Errorf("TCP_USER_TIMEOUT %s, want %s", got, After)
	}
}
