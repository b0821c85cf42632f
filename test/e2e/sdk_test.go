package e2e

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/floodgate/floodgate/rpc/client"
)

var (
	sdkPolicy = regexp.MustCompile(`^"per-minute";q=2;w=60$`)
	sdkLimit  = regexp.MustCompile(`^"per-minute";r=(\d+);t=(\d+)$`)
)

// The SDK's middleware in front of a service, as a service uses it: a
// net/http handler and a gRPC server limited by a policy of a real
// cluster, called by a real HTTP and gRPC client; then, with the cluster
// gone, fail-open and fail-closed.
func TestSDKMiddlewareAgainstRealNodes(t *testing.T) {
	t.Parallel()
	c := startCluster(t, 3)
	setPolicies(t, c, `
policies:
  - name: api
    key_by: [user]
    limits:
      - {name: per-minute, algorithm: sliding_log, limit: 2, window: 1m}
`)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var addrs []string
	for _, n := range c.Running() {
		addrs = append(addrs, n.GRPC)
	}
	cl, err := client.New(ctx, client.Options{Addrs: addrs, CallTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	api := cl.Policy("api")

	// net/http: 200, 200, then 429 with Retry-After; the draft's headers
	// on every answer.
	byUser := func(r *http.Request) client.D { return client.D{"user": r.Header.Get("X-User")} }
	hello := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { fmt.Fprint(w, "hello") })
	web := func(l client.Limiter, failOpen bool) *httptest.Server {
		s := httptest.NewServer(client.HTTPMiddleware(l, client.HTTPOptions{Descriptors: byUser, FailOpen: failOpen})(hello))
		t.Cleanup(s.Close)
		return s
	}
	get := func(url string) (*http.Response, string) {
		t.Helper()
		req, _ := http.NewRequestWithContext(ctx, "GET", url, nil)
		req.Header.Set("X-User", "42")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp, string(b)
	}
	closed, open := web(api, false), web(api, true)
	// A key the cluster refuses (too long) turns no limiting off, even
	// fail-open: 500.
	long := func(url string) int {
		t.Helper()
		req, _ := http.NewRequestWithContext(ctx, "GET", url, nil)
		req.Header.Set("X-User", strings.Repeat("x", 2000))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if a, b := long(closed.URL), long(open.URL); a != 500 || b != 500 {
		t.Fatalf("an over-long key: fail-closed %d, fail-open %d, want 500 both", a, b)
	}
	for i, want := range []int{200, 200, 429} {
		resp, body := get(closed.URL)
		h := resp.Header
		m := sdkLimit.FindStringSubmatch(h.Get("RateLimit"))
		if resp.StatusCode != want || !sdkPolicy.MatchString(h.Get("RateLimit-Policy")) || m == nil || m[1] != strconv.Itoa(max(1-i, 0)) {
			t.Fatalf("request %d: %d %q, RateLimit-Policy %q, RateLimit %q; want %d", i, resp.StatusCode, body, h.Get("RateLimit-Policy"), h.Get("RateLimit"), want)
		}
		if ra, err := strconv.Atoi(h.Get("Retry-After")); (want == 429) != (err == nil) || (err == nil && (ra < 1 || ra > 60)) {
			t.Fatalf("request %d: Retry-After %q", i, h.Get("Retry-After"))
		}
	}

	// gRPC: a health server behind the interceptors, the user from the
	// call's metadata. The third call is ResourceExhausted, and its
	// RetryInfo crosses the wire; a stream of an exhausted user is refused.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	byMD := func(ctx context.Context, _ string) client.D {
		md, _ := metadata.FromIncomingContext(ctx)
		return client.D{"user": md.Get("x-user")[0]}
	}
	serveGRPC := func(ln net.Listener, failOpen bool) {
		o := client.GRPCOptions{Descriptors: byMD, FailOpen: failOpen}
		gs := grpc.NewServer(grpc.ChainUnaryInterceptor(client.UnaryServerInterceptor(api, o)),
			grpc.ChainStreamInterceptor(client.StreamServerInterceptor(api, o)))
		healthpb.RegisterHealthServer(gs, health.NewServer())
		go gs.Serve(ln)
		t.Cleanup(gs.Stop)
	}
	serveGRPC(ln, false)
	health := func(addr string) healthpb.HealthClient {
		conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close() })
		return healthpb.NewHealthClient(conn)
	}
	hc := health(ln.Addr().String())
	gctx := metadata.AppendToOutgoingContext(ctx, "x-user", "7")
	for i := range 3 {
		_, err := hc.Check(gctx, &healthpb.HealthCheckRequest{})
		if i < 2 {
			if err != nil {
				t.Fatalf("gRPC call %d: %v", i, err)
			}
			continue
		}
		st := status.Convert(err)
		var retry *errdetails.RetryInfo
		for _, d := range st.Details() {
			if ri, ok := d.(*errdetails.RetryInfo); ok {
				retry = ri
			}
		}
		if st.Code() != codes.ResourceExhausted || retry == nil || retry.GetRetryDelay().AsDuration() <= 0 || retry.GetRetryDelay().AsDuration() > time.Minute {
			t.Fatalf("gRPC call %d: %v, details %v; want ResourceExhausted with RetryInfo", i, err, st.Details())
		}
	}
	stream, err := hc.Watch(gctx, &healthpb.HealthCheckRequest{})
	if err == nil {
		_, err = stream.Recv()
	}
	if status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("stream of an exhausted user: %v, want ResourceExhausted", err)
	}

	// The cluster gone: fail-closed answers 503 and Unavailable, fail-open
	// lets requests through, without rate-limit headers.
	for _, n := range c.Running() {
		n.Stop()
	}
	if resp, body := get(closed.URL); resp.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("cluster down, fail-closed: %d %q, want 503", resp.StatusCode, body)
	}
	if resp, body := get(open.URL); resp.StatusCode != 200 || resp.Header.Get("RateLimit") != "" {
		t.Fatalf("cluster down, fail-open: %d %q %v, want 200 and no RateLimit", resp.StatusCode, body, resp.Header)
	}
	if _, err := hc.Check(gctx, &healthpb.HealthCheckRequest{}); status.Code(err) != codes.Unavailable {
		t.Fatalf("cluster down, fail-closed gRPC: %v, want Unavailable", err)
	}
	ln2, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	serveGRPC(ln2, true)
	if _, err := health(ln2.Addr().String()).Check(gctx, &healthpb.HealthCheckRequest{}); err != nil {
		t.Fatalf("cluster down, fail-open gRPC: %v", err)
	}
}
