package client_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"testing/synctest"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/floodgate/floodgate/cluster"
	pb "github.com/floodgate/floodgate/proto/floodgate/v1"
	"github.com/floodgate/floodgate/rpc/client"
	"github.com/floodgate/floodgate/test/inproc"
)

func perMinute(n int64) *pb.Policy {
	return &pb.Policy{Name: "api", KeyBy: []string{"user"}, Limits: []*pb.PolicyLimit{{Name: "per-minute",
		Limit: &pb.Limit{Algorithm: pb.Algorithm_SLIDING_LOG, Limit: n, WindowMs: 60_000}}}}
}

// The policy handle against a real (in-process) cluster, and Local, the
// in-process stand-in, give the same typed answers.
func TestPolicyHandleAndLocalAgree(t *testing.T) {
	nodes := inproc.Cluster(t, 3)
	ctx := context.Background()
	if _, err := nodes[0].Admin().SetPolicies(ctx, &pb.SetPoliciesRequest{Policies: []*pb.Policy{perMinute(3)}}); err != nil {
		t.Fatal(err)
	}
	c, err := client.New(ctx, client.Options{Addrs: []string{nodes[0].Cfg.GRPCAddr}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	local, err := client.NewLocal(perMinute(3))
	if err != nil {
		t.Fatal(err)
	}
	for name, l := range map[string]client.Limiter{"cluster": c.Policy("api"), "local": local} {
		for i := range 4 {
			d, err := l.Allow(ctx, client.D{"user": "42"})
			if err != nil {
				t.Fatal(err)
			}
			if d.Allowed != (i < 3) || d.Limit != 3 || d.Remaining != int64(max(2-i, 0)) || d.DecidedBy != "per-minute" ||
				d.Key != "user=42" || d.Window != time.Minute || d.FailedOpen || d.ResetAfter <= 0 || d.ResetAfter > time.Minute {
				t.Fatalf("%s check %d: %+v", name, i, d)
			}
			if !d.Allowed && (d.RetryAfter <= 0 || d.RetryAfter > time.Minute) {
				t.Fatalf("%s: denied with RetryAfter %s", name, d.RetryAfter)
			}
		}
		if d, err := l.AllowN(ctx, client.D{"user": "7"}, 0); err != nil || d.Remaining != 3 {
			t.Fatalf("%s peek: %+v %v", name, d, err)
		}
		if _, err := l.AllowN(ctx, client.D{"ip": "1.2.3.4"}, 1); status.Code(err) != codes.InvalidArgument {
			t.Fatalf("%s: a descriptor the policy does not key by: %v", name, err)
		}
		cctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
		if err := l.Wait(cctx, client.D{"user": "42"}); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("%s: Wait on an exhausted key: %v, want the context's end", name, err)
		}
		cancel()
	}
}

// The handle and Local agree on policies whose keys are unusual: one
// keyed by a descriptor named "key" (not a raw key), and a colocated one
// (whose stored key carries a hash tag the answer leaves out). Before, the
// handle sent D{"key": k} as a raw key and was refused, and Local answered
// the colocated key with its tag.
func TestPolicyHandleAndLocalAgreeOnKeys(t *testing.T) {
	limit := []*pb.PolicyLimit{{Name: "per-minute", Limit: &pb.Limit{Algorithm: pb.Algorithm_SLIDING_LOG, Limit: 3, WindowMs: 60_000}}}
	byKey := &pb.Policy{Name: "bykey", KeyBy: []string{"key"}, Limits: limit}
	colocated := &pb.Policy{Name: "co", KeyBy: []string{"user"}, Colocate: true, Limits: limit}
	nodes := inproc.Cluster(t, 1)
	ctx := context.Background()
	if _, err := nodes[0].Admin().SetPolicies(ctx, &pb.SetPoliciesRequest{Policies: []*pb.Policy{byKey, colocated}}); err != nil {
		t.Fatal(err)
	}
	c, err := client.New(ctx, client.Options{Addrs: []string{nodes[0].Cfg.GRPCAddr}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for _, tc := range []struct {
		p    *pb.Policy
		d    client.D
		want string
	}{{byKey, client.D{"key": "42"}, "key=42"}, {colocated, client.D{"user": "42"}, "user=42"}} {
		local, err := client.NewLocal(tc.p)
		if err != nil {
			t.Fatal(err)
		}
		for name, l := range map[string]client.Limiter{"cluster": c.Policy(tc.p.Name), "local": local} {
			d, err := l.Allow(ctx, tc.d)
			if err != nil || d.Key != tc.want || d.Remaining != 2 {
				t.Errorf("%s, policy %s: %+v %v, want key %q", name, tc.p.Name, d, err, tc.want)
			}
		}
	}
}

// A policy created after the client's last refresh, keyed by a
// descriptor named "key", counts D{"key": k} under "key=k" like one the
// client knew: the client used to send k as a plain key, which the node
// refused (InvalidArgument) until the next refresh, 5 s later by default.
func TestPolicyNotLearnedYetKeyedByKey(t *testing.T) {
	nodes := inproc.Cluster(t, 1)
	ctx := context.Background()
	c, err := client.New(ctx, client.Options{Addrs: []string{nodes[0].Cfg.GRPCAddr}, RefreshInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	limit := []*pb.PolicyLimit{{Limit: &pb.Limit{Algorithm: pb.Algorithm_SLIDING_LOG, Limit: 3, WindowMs: 60_000}}}
	if _, err := nodes[0].Admin().SetPolicies(ctx, &pb.SetPoliciesRequest{Policies: []*pb.Policy{
		{Name: "bykey", KeyBy: []string{"key"}, Limits: limit}, {Name: "plain", Limits: limit}}}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ policy, key string }{{"bykey", "key=42"}, {"plain", "42"}} {
		for i := range 2 {
			d, err := c.Policy(tc.policy).Allow(ctx, client.D{"key": "42"})
			if err != nil || d.Key != tc.key || d.Remaining != int64(2-i) {
				t.Errorf("policy %s, check %d: %+v %v, want key %q, %d remaining (each counted once)", tc.policy, i+1, d, err, tc.key, 2-i)
			}
		}
	}
}

// A request the client's copy of a policy refuses, but the policy as the
// cluster now has it admits (it changed since the client's last refresh),
// is asked of the node rather than refused for up to a refresh interval.
// Should the node not answer, the local refusal stands, FailOpen or not.
func TestStalePolicyCopyDoesNotRefuse(t *testing.T) {
	limit := []*pb.PolicyLimit{{Limit: &pb.Limit{Algorithm: pb.Algorithm_SLIDING_LOG, Limit: 3, WindowMs: 60_000}}}
	nodes := inproc.Cluster(t, 1)
	ctx := context.Background()
	set := func(keyBy ...string) {
		if _, err := nodes[0].Admin().SetPolicies(ctx, &pb.SetPoliciesRequest{Policies: []*pb.Policy{{Name: "p", KeyBy: keyBy, Limits: limit}}}); err != nil {
			t.Fatal(err)
		}
	}
	set("user")
	c, err := client.New(ctx, client.Options{Addrs: []string{nodes[0].Cfg.GRPCAddr}, FailOpen: true, RefreshInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	both := client.D{"user": "1", "ip": "10.0.0.1"}
	if _, err := c.Policy("p").Allow(ctx, both); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("a descriptor the policy does not key by: %v", err)
	}
	set("user", "ip")
	d, err := c.Policy("p").Allow(ctx, both)
	if err != nil || !d.Allowed || d.Key != "user=1,ip=10.0.0.1" {
		t.Fatalf("after the policy changed: %+v %v", d, err)
	}
	nodes[0].Stop()
	// c's copy may have been refreshed by now (the refusal asked for it):
	// a request both copies refuse, with the node gone, is refused.
	if d, err := c.Policy("p").Allow(ctx, client.D{"host": "x"}); status.Code(err) != codes.InvalidArgument || d.FailedOpen {
		t.Fatalf("a request the policy refuses, cluster down, FailOpen: %+v %v", d, err)
	}
}

func TestDecideFailsOpen(t *testing.T) {
	nodes := inproc.Cluster(t, 1)
	ctx := context.Background()
	c, err := client.New(ctx, client.Options{Addrs: []string{nodes[0].Cfg.GRPCAddr}, FailOpen: true})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	nodes[0].Stop()
	cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	d, err := c.Decide(cctx, &pb.AllowRequest{Key: "k", Limit: &pb.Limit{Algorithm: pb.Algorithm_FIXED_WINDOW, Limit: 1, WindowMs: 1000}})
	if err != nil || !d.Allowed || !d.FailedOpen || d.Remaining != -1 {
		t.Fatalf("Decide with the cluster down: %+v %v", d, err)
	}
}

// Wait sleeps each denial's RetryAfter and returns once admitted: on fake
// time, a token bucket of 10 per second admits the 11th request 100ms on.
func TestLocalWaitSleepsRetryAfter(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l, err := client.NewLocal(&pb.Policy{Name: "tb", Limits: []*pb.PolicyLimit{{Limit: &pb.Limit{
			Algorithm: pb.Algorithm_TOKEN_BUCKET, Limit: 10, WindowMs: 1000}}}})
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		start := time.Now()
		for range 11 {
			if err := l.Wait(ctx, client.D{"key": "k"}); err != nil {
				t.Fatal(err)
			}
		}
		if took := time.Since(start); took != 100*time.Millisecond {
			t.Fatalf("11 waits took %s, want 100ms (one refill)", took)
		}
	})
}

// A Wait whose next chance is past the context's deadline gives up at
// once, as x/time/rate's does. Before, it slept until the deadline for a
// denial it knew of at the start.
func TestWaitPastTheDeadlineEndsAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l, err := client.NewLocal(perMinute(1))
		if err != nil {
			t.Fatal(err)
		}
		if err := l.Wait(context.Background(), client.D{"user": "42"}); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		start := time.Now()
		err = l.Wait(ctx, client.D{"user": "42"})
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("Wait: %v, want DeadlineExceeded", err)
		}
		if took := time.Since(start); took != 0 {
			t.Errorf("Wait took %v, want no time", took)
		}
	})
}

func TestNewLocalRefusesABadPolicy(t *testing.T) {
	if _, err := client.NewLocal(&pb.Policy{Name: "x"}); status.Code(err) != codes.InvalidArgument {
		t.Fatal("a policy without limits was accepted")
	}
}

// failing is a Limiter whose cluster cannot answer.
type failing struct{ client.Limiter }

func (failing) AllowN(context.Context, client.D, int64) (client.Decision, error) {
	return client.Decision{}, status.Error(codes.Unavailable, "down")
}

// fullCluster is a Limiter whose groups hold --max-key-states: every new
// key is refused, as a node words it.
type fullCluster struct{ client.Limiter }

func (fullCluster) AllowN(context.Context, client.D, int64) (client.Decision, error) {
	return client.Decision{}, status.Error(codes.ResourceExhausted, fmt.Errorf("shard-1: %w: the group holds --max-key-states (10) key states", cluster.ErrFull).Error())
}

// tooLarge is a Limiter whose call gRPC itself refused as too large: a
// ResourceExhausted that is no answer of the cluster.
type tooLarge struct{ client.Limiter }

func (tooLarge) AllowN(context.Context, client.D, int64) (client.Decision, error) {
	return client.Decision{}, status.Error(codes.ResourceExhausted, "grpc: received message larger than max (5000000 vs. 4194304)")
}

func TestHTTPMiddleware(t *testing.T) {
	l, err := client.NewLocal(perMinute(2))
	if err != nil {
		t.Fatal(err)
	}
	ok := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusTeapot) })
	byUser := func(r *http.Request) client.D { return client.D{"user": r.Header.Get("X-User")} }
	h := client.HTTPMiddleware(l, client.HTTPOptions{Descriptors: byUser})(ok)
	for i, want := range []int{http.StatusTeapot, http.StatusTeapot, http.StatusTooManyRequests} {
		rec := httptest.NewRecorder()
		req := httptest.NewRequest("GET", "/", nil)
		req.Header.Set("X-User", "ann")
		h.ServeHTTP(rec, req)
		if rec.Code != want || rec.Header().Get("RateLimit-Policy") != `"per-minute";q=2;w=60` {
			t.Fatalf("request %d: %d %v, want %d", i, rec.Code, rec.Header(), want)
		}
		if (want == http.StatusTooManyRequests) != (rec.Header().Get("Retry-After") != "") {
			t.Fatalf("request %d: Retry-After %q", i, rec.Header().Get("Retry-After"))
		}
	}
	// A check the limiter refuses (here a descriptor the policy does not
	// key by) is refused, fail-open or not: FailOpen is for a limiter that
	// cannot answer.
	byIP := func(*http.Request) client.D { return client.D{"ip": "1.2.3.4"} }
	for _, failOpen := range []bool{true, false} {
		rec := httptest.NewRecorder()
		client.HTTPMiddleware(l, client.HTTPOptions{Descriptors: byIP, FailOpen: failOpen})(ok).ServeHTTP(rec, httptest.NewRequest("GET", "/", nil))
		if rec.Code != http.StatusInternalServerError {
			t.Fatalf("a refused check, fail-open %v: %d, want 500", failOpen, rec.Code)
		}
	}
	for _, failOpen := range []bool{true, false} {
		h := client.HTTPMiddleware(failing{}, client.HTTPOptions{Descriptors: byUser, FailOpen: failOpen})(ok)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("GET", "/", nil))
		if want := map[bool]int{true: http.StatusTeapot, false: http.StatusServiceUnavailable}[failOpen]; rec.Code != want {
			t.Fatalf("limiter down, fail-open %v: %d, want %d", failOpen, rec.Code, want)
		}
		// A new key the cluster has no room for: an answer, limited either way.
		rec = httptest.NewRecorder()
		client.HTTPMiddleware(fullCluster{}, client.HTTPOptions{Descriptors: byUser, FailOpen: failOpen})(ok).ServeHTTP(rec, httptest.NewRequest("GET", "/", nil))
		if rec.Code != http.StatusTooManyRequests {
			t.Fatalf("a full cluster, fail-open %v: %d, want 429", failOpen, rec.Code)
		}
		// gRPC's own ResourceExhausted is a failure to answer, as any other.
		rec = httptest.NewRecorder()
		client.HTTPMiddleware(tooLarge{}, client.HTTPOptions{Descriptors: byUser, FailOpen: failOpen})(ok).ServeHTTP(rec, httptest.NewRequest("GET", "/", nil))
		if want := map[bool]int{true: http.StatusTeapot, false: http.StatusServiceUnavailable}[failOpen]; rec.Code != want {
			t.Fatalf("a call too large, fail-open %v: %d, want %d", failOpen, rec.Code, want)
		}
	}
}

func TestGRPCInterceptors(t *testing.T) {
	l, err := client.NewLocal(perMinute(1))
	if err != nil {
		t.Fatal(err)
	}
	o := client.GRPCOptions{Descriptors: func(context.Context, string) client.D { return client.D{"user": "ann"} }}
	unary := client.UnaryServerInterceptor(l, o)
	handler := func(context.Context, any) (any, error) { return "done", nil }
	info := &grpc.UnaryServerInfo{FullMethod: "/svc/M"}
	if out, err := unary(context.Background(), nil, info, handler); err != nil || out != "done" {
		t.Fatalf("first call: %v %v", out, err)
	}
	_, err = unary(context.Background(), nil, info, handler)
	st := status.Convert(err)
	if st.Code() != codes.ResourceExhausted {
		t.Fatalf("second call: %v, want ResourceExhausted", err)
	}
	var retry *errdetails.RetryInfo
	for _, d := range st.Details() {
		if ri, ok := d.(*errdetails.RetryInfo); ok {
			retry = ri
		}
	}
	if retry == nil || retry.GetRetryDelay().AsDuration() <= 0 {
		t.Fatalf("denial without RetryInfo: %v", st.Details())
	}
	stream := client.StreamServerInterceptor(l, o)
	if err := stream(nil, fakeStream{}, &grpc.StreamServerInfo{FullMethod: "/svc/S"}, func(any, grpc.ServerStream) error { return nil }); status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("stream on an exhausted key: %v", err)
	}
	down := client.GRPCOptions{Descriptors: o.Descriptors}
	if _, err := client.UnaryServerInterceptor(failing{}, down)(context.Background(), nil, info, handler); status.Code(err) != codes.Unavailable {
		t.Fatalf("fail-closed: %v", err)
	}
	down.FailOpen = true
	if _, err := client.UnaryServerInterceptor(failing{}, down)(context.Background(), nil, info, handler); err != nil {
		t.Fatalf("fail-open: %v", err)
	}
	if _, err := client.UnaryServerInterceptor(fullCluster{}, down)(context.Background(), nil, info, handler); status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("a full cluster, fail-open: %v, want ResourceExhausted", err)
	}
	bad := client.GRPCOptions{Descriptors: func(context.Context, string) client.D { return client.D{"ip": "1"} }, FailOpen: true}
	if _, err := client.UnaryServerInterceptor(l, bad)(context.Background(), nil, info, handler); status.Code(err) != codes.Internal {
		t.Fatalf("a refused check, fail-open: %v, want Internal", err)
	}
}

type fakeStream struct{ grpc.ServerStream }

func (fakeStream) Context() context.Context { return context.Background() }
