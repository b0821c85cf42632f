package client

import (
	"context"
	"net/http"
	"strings"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/floodgate/floodgate/httpapi"
)

// HTTPOptions configure HTTPMiddleware.
type HTTPOptions struct {
	// Descriptors says what a request is counted under, for example
	// client.D{"ip": host(r.RemoteAddr)} or {"user": r.Header.Get("X-User")}.
	// Required.
	Descriptors func(*http.Request) D
	// Cost is a request's cost (default 1).
	Cost func(*http.Request) int64
	// FailOpen lets a request through when the limiter cannot answer;
	// otherwise it gets 503. A request whose client went away before its
	// check was answered is not let through (499). (The
	// client's own Options.FailOpen, if set, already admits unanswered
	// checks.) A check the limiter refuses (InvalidArgument: an unknown
	// policy, a key too long) is 500 either way, so neither a typo nor a
	// long header turns limiting off; one of a new key that the cluster
	// has no room for (--max-key-states: a flood of new keys) is 429
	// either way.
	FailOpen bool
	// Headers picks the rate-limit headers (the IETF draft's by default).
	Headers httpapi.Headers
	// OnError, if set, hears about every failed check.
	OnError func(error)
}

// HTTPMiddleware limits the requests of next with l: a denied request
// gets 429 Too Many Requests with Retry-After, and every answered one the
// rate-limit headers, as floodgate's own HTTP API writes them.
func HTTPMiddleware(l Limiter, o HTTPOptions) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			cost := int64(1)
			if o.Cost != nil {
				cost = o.Cost(r)
			}
			dec, err := l.AllowN(r.Context(), o.Descriptors(r), cost)
			if err != nil {
				if o.OnError != nil {
					o.OnError(err)
				}
				switch {
				case refused(err):
					http.Error(w, "rate limiter refused the check", http.StatusInternalServerError)
				case full(err):
					http.Error(w, "too many requests: the rate limiter holds no room for new keys", http.StatusTooManyRequests)
				case r.Context().Err() != nil:
					// The client went away before its check was answered:
					// not a limiter that cannot answer, which FailOpen
					// admits. Admitted, a client hanging up at once would
					// pass every limit uncounted.
					http.Error(w, "request canceled", statusClientClosed)
				case o.FailOpen:
					next.ServeHTTP(w, r)
				default:
					http.Error(w, "rate limiter unavailable", http.StatusServiceUnavailable)
				}
				return
			}
			if !dec.FailedOpen {
				httpapi.WriteHeaders(w.Header(), o.Headers, quota(dec))
			}
			if !dec.Allowed {
				http.Error(w, "too many requests", http.StatusTooManyRequests)
				return
			}
			next.ServeHTTP(w, r)
		})
	}
}

// statusClientClosed answers a request whose client went away (nginx's
// 499, which floodgate's HTTP API sends for Canceled too).
const statusClientClosed = 499

// refused reports whether err is the limiter refusing the check itself
// (InvalidArgument), which FailOpen does not admit: not a failure to
// answer it.
func refused(err error) bool { return status.Code(err) == codes.InvalidArgument }

// full reports whether err is the cluster refusing a new key for want of
// room (ResourceExhausted from a group at --max-key-states, whose message
// says "key states full"; gRPC's own ResourceExhausted, a message too
// large, is not one): an answer, which FailOpen does not admit, and to the
// caller a limit like any other.
func full(err error) bool {
	st := status.Convert(err)
	return st.Code() == codes.ResourceExhausted && strings.Contains(st.Message(), keyStatesFull)
}

// keyStatesFull is in the message of every refusal of a full group
// (cluster.ErrFull's text; the SDK does not import the cluster).
const keyStatesFull = "key states full"

func quota(d Decision) httpapi.Quota {
	return httpapi.Quota{Name: d.DecidedBy, Allowed: d.Allowed, Limit: d.Limit, Remaining: d.Remaining,
		Window: d.Window, ResetAfter: d.ResetAfter, RetryAfter: d.RetryAfter}
}

// GRPCOptions configure the gRPC server interceptors.
type GRPCOptions struct {
	// Descriptors says what a call is counted under, from its context
	// (peer, metadata) and full method name. Required.
	Descriptors func(ctx context.Context, fullMethod string) D
	// Cost is a call's cost (default 1).
	Cost func(ctx context.Context, fullMethod string) int64
	// FailOpen lets a call through when the limiter cannot answer;
	// otherwise it fails with Unavailable. A call whose own deadline
	// passed or that was canceled before its check was answered fails
	// with DeadlineExceeded or Canceled either way. A check the limiter refuses (InvalidArgument) fails the
	// call with Internal either way, and one of a new key the cluster has
	// no room for (--max-key-states) with ResourceExhausted.
	FailOpen bool
	// OnError, if set, hears about every failed check.
	OnError func(error)
}

// check decides a call: nil to go ahead, or the status to fail it with
// (ResourceExhausted carrying errdetails.RetryInfo when denied).
func (o GRPCOptions) check(ctx context.Context, l Limiter, method string) error {
	cost := int64(1)
	if o.Cost != nil {
		cost = o.Cost(ctx, method)
	}
	dec, err := l.AllowN(ctx, o.Descriptors(ctx, method), cost)
	if err != nil {
		if o.OnError != nil {
			o.OnError(err)
		}
		switch {
		case refused(err):
			return status.Errorf(codes.Internal, "rate limiter refused the check: %v", err)
		case full(err):
			return status.Errorf(codes.ResourceExhausted, "rate limited: the rate limiter holds no room for new keys: %v", err)
		case ctx.Err() != nil:
			// The caller's own deadline or cancellation (grpc-timeout:
			// 1n), not a limiter that cannot answer: never admitted.
			return status.FromContextError(ctx.Err()).Err()
		case o.FailOpen:
			return nil
		}
		return status.Errorf(codes.Unavailable, "rate limiter unavailable: %v", err)
	}
	if dec.Allowed {
		return nil
	}
	st := status.Newf(codes.ResourceExhausted, "rate limited by %s: retry after %s", dec.DecidedBy, dec.RetryAfter)
	if d, err := st.WithDetails(&errdetails.RetryInfo{RetryDelay: durationpb.New(dec.RetryAfter)}); err == nil {
		st = d
	}
	return st.Err()
}

// UnaryServerInterceptor limits a gRPC server's unary calls with l.
func UnaryServerInterceptor(l Limiter, o GRPCOptions) grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		if err := o.check(ctx, l, info.FullMethod); err != nil {
			return nil, err
		}
		return handler(ctx, req)
	}
}

// StreamServerInterceptor limits a gRPC server's streams with l: one
// check when a stream opens.
func StreamServerInterceptor(l Limiter, o GRPCOptions) grpc.StreamServerInterceptor {
	return func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
		if err := o.check(ss.Context(), l, info.FullMethod); err != nil {
			return err
		}
		return handler(srv, ss)
	}
}
