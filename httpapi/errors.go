package httpapi

import (
	"encoding/json"
	"net/http"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/floodgate/floodgate/metrics"
)

// badRequest is InvalidArgument with the message of format and args,
// each string or error among args clipped (an error never echoes a
// megabyte of the request back).
func badRequest(format string, args ...any) error {
	for i, a := range args {
		switch a := a.(type) {
		case string:
			args[i] = clip(a)
		case error:
			args[i] = clip(a.Error())
		}
	}
	return status.Errorf(codes.InvalidArgument, format, args...)
}

// errorBody is every error's JSON: {"error":{"code":"INVALID_ARGUMENT",
// "message":"invalid request: limit.window_ms: …"}}.
type errorBody struct {
	Error struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// refuse answers err, a request refused before it reached the limiter (a
// query or body that does not parse), and counts it as one check error,
// as the gRPC server counts the requests it refuses: the failed-checks
// panel and the error ratio see HTTP's bad requests too.
func refuse(w http.ResponseWriter, err error) {
	refused(status.Code(err))
	writeError(w, err)
}

// refused counts one request refused with code before the limiter.
func refused(code codes.Code) { metrics.CheckErrors.WithLabelValues(code.String()).Inc() }

// writeError answers err, a gRPC status, with the HTTP status of its code.
func writeError(w http.ResponseWriter, err error) {
	st := status.Convert(err)
	if c := st.Code(); c == codes.Unavailable || c == codes.ResourceExhausted {
		// It passes with time (a group electing its leader, a full key
		// store whose old keys expire): say when to try again, for the
		// clients whose retry policy honours Retry-After (RFC 9110 §10.2.3)
		// rather than retrying at once.
		w.Header().Set("Retry-After", "1")
	}
	writeJSONError(w, httpStatus(st.Code()), st.Code(), st.Message())
}

func writeJSONError(w http.ResponseWriter, httpCode int, code codes.Code, msg string) {
	var body errorBody
	body.Error.Code = snake(code.String())
	body.Error.Message = msg
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(httpCode)
	_ = json.NewEncoder(w).Encode(body)
}

// snake spells a gRPC code as its constant: InvalidArgument →
// INVALID_ARGUMENT.
func snake(s string) string {
	var b strings.Builder
	for i, c := range s {
		if i > 0 && c >= 'A' && c <= 'Z' {
			b.WriteByte('_')
		}
		b.WriteRune(c)
	}
	return strings.ToUpper(b.String())
}

// httpStatus is the HTTP status of a gRPC code, as grpc-gateway maps them.
func httpStatus(c codes.Code) int {
	switch c {
	case codes.OK:
		return http.StatusOK
	case codes.InvalidArgument, codes.OutOfRange, codes.FailedPrecondition:
		return http.StatusBadRequest
	case codes.Unauthenticated:
		return http.StatusUnauthorized
	case codes.PermissionDenied:
		return http.StatusForbidden
	case codes.NotFound:
		return http.StatusNotFound
	case codes.AlreadyExists, codes.Aborted:
		return http.StatusConflict
	case codes.ResourceExhausted:
		return http.StatusTooManyRequests
	case codes.Canceled:
		return 499 // the client went away (nginx's and grpc-gateway's code)
	case codes.Unimplemented:
		return http.StatusNotImplemented
	case codes.Unavailable:
		return http.StatusServiceUnavailable
	case codes.DeadlineExceeded:
		return http.StatusGatewayTimeout
	}
	return http.StatusInternalServerError
}
