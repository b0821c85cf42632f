package client

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	pb "github.com/floodgate/floodgate/proto/floodgate/v1"
)

// oneNode admits the first check of all and denies every other one.
type oneNode struct {
	pb.UnimplementedRateLimiterServer
	n atomic.Int64
}

func (o *oneNode) Allow(context.Context, *pb.AllowRequest) (*pb.AllowResponse, error) {
	if o.n.Add(1) == 1 {
		return &pb.AllowResponse{Allowed: true, Limit: 1}, nil
	}
	return &pb.AllowResponse{Allowed: false, Limit: 1, RetryAfterMs: 60000}, nil
}

// serveOneNode starts a node of one check and returns a client of it.
func serveOneNode(t *testing.T, o Options) (*Client, *oneNode) {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	adm := &statusNode{answers: 1 << 30}
	node := &oneNode{}
	s := grpc.NewServer()
	pb.RegisterAdminServer(s, adm)
	pb.RegisterRateLimiterServer(s, node)
	go s.Serve(lis)
	t.Cleanup(s.Stop)
	adm.nodes = []string{lis.Addr().String()}
	o.Addrs = adm.nodes
	c, err := New(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c, node
}

// A client that hangs up as soon as its request is sent is not let
// through by the middleware's FailOpen: the limiter could answer, the
// caller gave up. It was, uncounted, every time.
func TestHTTPMiddlewareDoesNotFailOpenForACallerGone(t *testing.T) {
	c, _ := serveOneNode(t, Options{})
	var served atomic.Int64
	h := HTTPMiddleware(c.Policy("api"), HTTPOptions{
		Descriptors: func(*http.Request) D { return D{"key": "attacker"} },
		FailOpen:    true,
	})(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { served.Add(1) }))
	for range 2 { // the limit is 1: the second is denied
		h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("POST", "/transfer", nil))
	}
	for range 20 {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest("POST", "/transfer", nil).WithContext(ctx))
		if w.Code != statusClientClosed {
			t.Fatalf("a canceled request: %d, want %d", w.Code, statusClientClosed)
		}
	}
	if got := served.Load(); got != 1 {
		t.Fatalf("limit 1: the handler ran %d times", got)
	}
}

// The same of the gRPC interceptor, under the client's own FailOpen: a
// caller's deadline of a nanosecond (grpc-timeout: 1n) ends the check
// before it is answered, and the call fails with DeadlineExceeded.
func TestInterceptorDoesNotFailOpenForACallerGone(t *testing.T) {
	c, _ := serveOneNode(t, Options{FailOpen: true})
	ic := UnaryServerInterceptor(c.Policy("api"), GRPCOptions{Descriptors: func(context.Context, string) D { return D{"key": "attacker"} }, FailOpen: true})
	ran := 0
	h := func(context.Context, any) (any, error) { ran++; return nil, nil }
	info := &grpc.UnaryServerInfo{FullMethod: "/x.Y/SendSMS"}
	for range 2 {
		_, _ = ic(context.Background(), nil, info, h)
	}
	for range 20 {
		ctx, cancel := context.WithTimeout(context.Background(), time.Nanosecond)
		_, err := ic(ctx, nil, info, h)
		cancel()
		if status.Code(err) != codes.DeadlineExceeded {
			t.Fatalf("a call past its deadline: %v, want DeadlineExceeded", err)
		}
	}
	if ran != 1 {
		t.Fatalf("limit 1: the handler ran %d times", ran)
	}
}
