package httpapi

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/floodgate/floodgate/metrics"
	pb "github.com/floodgate/floodgate/proto/floodgate/v1"
	"github.com/floodgate/floodgate/rpc/validate"
	"github.com/floodgate/floodgate/window"
)

// Limiter is the RateLimiter service the API calls.
type Limiter interface {
	Allow(context.Context, *pb.AllowRequest) (*pb.AllowResponse, error)
	AllowBatch(context.Context, *pb.AllowBatchRequest) (*pb.AllowBatchResponse, error)
}

// Options tunes the API.
type Options struct {
	// Headers picks the rate-limit headers of answers (Draft by default).
	Headers Headers
}

// maxBody bounds a request body: gRPC's own bound on a message.
const maxBody = 16 << 20

// bodyTimeout bounds reading a request body: maxBody at about 0.5 MB/s.
const bodyTimeout = 30 * time.Second

// Register adds the API's routes to mux, and claims "/" for a 404 in JSON
// on any path no route of mux serves.
func Register(mux *http.ServeMux, l Limiter, o Options) {
	a := &api{l: l, o: o}
	// Counted and timed by route (floodgate_http_requests_total,
	// floodgate_http_request_duration_seconds): the gRPC server's
	// interceptors never see these calls, made to it in-process.
	for pattern, h := range map[string]http.HandlerFunc{"POST /v1/allow": a.allow, "POST /v1/allow:batch": a.allowBatch, "GET /api/v1/limit": a.limit} {
		method, route, _ := strings.Cut(pattern, " ")
		mux.Handle(pattern, metrics.InstrumentHTTP(method, route, h))
	}
	// Any other path: 404 in JSON too. (More specific routes of the same
	// mux, such as /metrics, win over this one.)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeJSONError(w, http.StatusNotFound, codes.NotFound,
			fmt.Sprintf("path: %q is not served (POST /v1/allow, POST /v1/allow:batch, GET /api/v1/limit)", clip(r.URL.Path)))
	})
	for path, allow := range map[string]string{"/v1/allow": "POST", "/v1/allow:batch": "POST", "/api/v1/limit": "GET, HEAD"} {
		MethodNotAllowed(mux, path, allow)
	}
}

// MethodNotAllowed answers any method on path that no route of mux serves
// with a 405 in JSON, as every error of the API, naming the methods of
// allow (an Allow header's value). Without it, the 404 Register claims
// "/" for would answer them.
func MethodNotAllowed(mux *http.ServeMux, path, allow string) {
	mux.HandleFunc(path, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Allow", allow)
		writeJSONError(w, http.StatusMethodNotAllowed, codes.Unimplemented, fmt.Sprintf("method: %s not allowed (%s)", r.Method, allow))
	})
}

type api struct {
	l Limiter
	o Options
}

var (
	unmarshal = protojson.UnmarshalOptions{}
	marshal   = protojson.MarshalOptions{EmitUnpopulated: true}
)

func (a *api) allow(w http.ResponseWriter, r *http.Request) {
	noStore(w)
	var req pb.AllowRequest
	if !noQuery(w, r) || !decode(w, r, &req) {
		return
	}
	resp, err := a.l.Allow(r.Context(), &req)
	if err != nil {
		writeError(w, err)
		return
	}
	WriteHeaders(w.Header(), a.o.Headers, QuotaOf(resp))
	writeProto(w, http.StatusOK, resp)
}

// allowBatch answers 200 with every item's answer or error; one set of
// headers cannot describe many limits, so it sends none.
func (a *api) allowBatch(w http.ResponseWriter, r *http.Request) {
	noStore(w)
	var req pb.AllowBatchRequest
	if !noQuery(w, r) || !decode(w, r, &req) {
		return
	}
	resp, err := a.l.AllowBatch(r.Context(), &req)
	if err != nil {
		writeError(w, err)
		return
	}
	writeProto(w, http.StatusOK, resp)
}

// limit is the seed's GET /api/v1/limit?key=…: 200 when allowed, 429 with
// Retry-After when not, the answer as JSON either way. HEAD peeks.
func (a *api) limit(w http.ResponseWriter, r *http.Request) {
	noStore(w)
	q, err := parseQuery(r.URL.RawQuery)
	if err != nil {
		refuse(w, err)
		return
	}
	req, err := limitRequest(q)
	if err == nil && r.Method == http.MethodHead {
		err = headPeeks(req)
	}
	if err != nil {
		refuse(w, err)
		return
	}
	resp, err := a.l.Allow(r.Context(), req)
	if err != nil {
		writeError(w, queryFields(err))
		return
	}
	WriteHeaders(w.Header(), a.o.Headers, QuotaOf(resp))
	code := http.StatusOK
	if !resp.GetAllowed() {
		code = http.StatusTooManyRequests
	}
	writeProto(w, code, resp)
}

// headPeeks makes a HEAD of GET /api/v1/limit a peek (cost 0): HEAD is a
// safe method (RFC 9110 §9.3.2), sent by monitors and link checkers and
// by `curl -I`, none of which means to spend the key's quota. A cost
// other than 0 is refused rather than ignored.
func headPeeks(req *pb.AllowRequest) error {
	if req.Cost != nil && *req.Cost != 0 {
		return badRequest("cost: %d: a HEAD checks without counting (cost 0 or none); GET counts", *req.Cost)
	}
	var peek int64
	req.Cost = &peek
	return nil
}

// noStore marks an answer to a check as not to be stored by any cache.
// A check counts, but GET /api/v1/limit is a GET, and its 200 is
// heuristically cacheable (RFC 9111 §4.2.2): a shared cache in front of
// the nodes (Varnish keeps such an answer two minutes by default) would
// answer the same "allowed" to every check of a key, none of them
// counted. The POST routes say it too, for caches told to store POSTs.
func noStore(w http.ResponseWriter) {
	w.Header().Set("Cache-Control", "no-store")
}

// queryParams are the parameters of GET /api/v1/limit.
var queryParams = []string{"key", "policy", "cost", "descriptor", "limit", "window", "algorithm", "burst", "buckets"}

// maxQueryParams bounds the parameters of a query.
const maxQueryParams = 100

// parseQuery is url.ParseQuery, except that its error names the parameter
// it is in. (r.URL.Query drops a malformed pair without a word: a cost=0;
// that asked for a peek would count at cost 1.)
func parseQuery(raw string) (url.Values, error) {
	q := url.Values{}
	for n := 0; raw != ""; {
		var pair string
		pair, raw, _ = strings.Cut(raw, "&")
		if pair == "" {
			continue
		}
		if n++; n > maxQueryParams {
			// As url.ParseQuery's own cap, far lower: a check has 8 kinds
			// of parameter and at most validate.MaxDescriptors descriptors.
			return nil, badRequest("query: more than %d parameters", maxQueryParams)
		}
		k, v, _ := strings.Cut(pair, "=")
		name, err := url.QueryUnescape(k)
		if err != nil {
			return nil, badRequest("query: parameter name %q is not URL-encoded: %v", k, err)
		}
		if strings.Contains(pair, ";") {
			return nil, badRequest("%s: %q holds a semicolon: parameters are separated by & (a semicolon in a value is %%3B)", name, pair)
		}
		value, err := url.QueryUnescape(v)
		if err != nil {
			return nil, badRequest("%s: %q is not URL-encoded: %v", name, v, err)
		}
		q[name] = append(q[name], value)
	}
	return q, nil
}

// limitRequest reads a check from query parameters: key or descriptor
// (repeatable, name=value), policy or an inline limit (limit, window,
// algorithm: sliding_log by default, burst, buckets), cost.
func limitRequest(q url.Values) (*pb.AllowRequest, error) {
	for name, vs := range q {
		if !slices.Contains(queryParams, name) {
			return nil, badRequest("%s: unknown parameter (known: %s)", name, strings.Join(queryParams, ", "))
		}
		if len(vs) > 1 && name != "descriptor" {
			return nil, badRequest("%s: given %d times", name, len(vs))
		}
		if slices.Contains(vs, "") {
			// Given but empty: a mistake, never a default.
			return nil, badRequest("%s: empty", name)
		}
	}
	req := &pb.AllowRequest{Key: q.Get("key"), Policy: q.Get("policy")}
	for _, d := range q["descriptor"] {
		name, value, ok := strings.Cut(d, "=")
		if !ok {
			return nil, badRequest("descriptor: %q is not name=value", d)
		}
		if req.Descriptors == nil {
			req.Descriptors = map[string]string{}
		}
		if _, dup := req.Descriptors[name]; dup {
			return nil, badRequest("descriptor: %q given twice", name)
		}
		req.Descriptors[name] = value
	}
	if q.Has("cost") {
		s := q.Get("cost")
		c, err := wholeNumber("cost", s, 64)
		if err != nil {
			return nil, err
		}
		req.Cost = &c
	}
	if q.Has("limit") || q.Has("window") || q.Has("algorithm") || q.Has("burst") || q.Has("buckets") {
		l, err := inlineLimit(q)
		if err != nil {
			return nil, err
		}
		req.Limit = l
	}
	return req, nil
}

func inlineLimit(q url.Values) (*pb.Limit, error) {
	l := &pb.Limit{Algorithm: pb.Algorithm_SLIDING_LOG}
	if s := q.Get("algorithm"); s != "" {
		a, ok := pb.Algorithm_value[strings.ToUpper(s)]
		if !ok || a == 0 {
			return nil, badRequest("algorithm: %q is not one of sliding_log, sliding_counter, sliding_counter_weighted, fixed_window, token_bucket, gcra", s)
		}
		l.Algorithm = pb.Algorithm(a)
	}
	for _, name := range []string{"limit", "window"} {
		if !q.Has(name) {
			// Not given, rather than given as "": say so, not that ""
			// is not a number.
			return nil, badRequest("%s: missing: an inline limit takes limit and window (and algorithm, burst, buckets), or give a policy", name)
		}
	}
	var err error
	if l.Limit, err = wholeNumber("limit", q.Get("limit"), 64); err != nil {
		return nil, err
	}
	d, err := time.ParseDuration(q.Get("window"))
	if err != nil {
		return nil, badRequest("window: %q is not a duration (1m, 10s)", q.Get("window"))
	}
	if d%time.Millisecond != 0 {
		// Windows count whole milliseconds; a finer one is refused, not cut.
		return nil, badRequest("window: %q is not a whole number of milliseconds", q.Get("window"))
	}
	if d <= 0 || int64(d) > window.MaxWindow {
		// Said as the query gives it (a duration), not in the API's
		// window_ms.
		return nil, badRequest("window: %q must be more than 0 and at most a year (%s)", q.Get("window"), time.Duration(window.MaxWindow))
	}
	l.WindowMs = d.Milliseconds()
	if s := q.Get("burst"); s != "" {
		if l.Burst, err = wholeNumber("burst", s, 64); err != nil {
			return nil, err
		}
	}
	if s := q.Get("buckets"); s != "" {
		// A sliding counter's buckets, as the API's field: by default the
		// most up to 60 that divide the window.
		b, err := wholeNumber("buckets", s, 32)
		if err != nil {
			return nil, err
		}
		l.Buckets = int32(b)
	}
	return l, nil
}

// apiLimitField is a field of an inline limit as the API names it.
var apiLimitField = regexp.MustCompile(`\blimit\.(window_ms|limit|algorithm|burst|buckets)\b`)

// queryFields renames, in err's message when it refuses the request
// (InvalidArgument), the inline limit's fields to the query parameters
// that gave them: the API's limit.window_ms is the query's window.
func queryFields(err error) error {
	st := status.Convert(err)
	if st.Code() != codes.InvalidArgument {
		return err
	}
	msg := apiLimitField.ReplaceAllStringFunc(st.Message(), func(m string) string {
		return validate.HandField(strings.TrimPrefix(m, "limit."))
	})
	return status.Error(codes.InvalidArgument, msg)
}

// wholeNumber parses parameter name's value s as a decimal integer of
// bits bits. A number too large for them is said to be so: "is not a
// whole number" would be wrong about 99999999999999999999.
func wholeNumber(name, s string, bits int) (int64, error) {
	n, err := strconv.ParseInt(s, 10, bits)
	if errors.Is(err, strconv.ErrRange) {
		return 0, badRequest("%s: %q is out of range (a %d-bit integer)", name, s, bits)
	}
	if err != nil {
		return 0, badRequest("%s: %q is not a whole number", name, s)
	}
	return n, nil
}

// noQuery answers 400 and reports false when a POST route, which takes
// its request in the body only, is given query parameters: dropped
// without a word, a ?cost=0 asking for a peek would count at cost 1.
func noQuery(w http.ResponseWriter, r *http.Request) bool {
	if r.URL.RawQuery == "" {
		return true
	}
	first, _, _ := strings.Cut(strings.TrimLeft(r.URL.RawQuery, "&"), "&")
	name, _, _ := strings.Cut(first, "=")
	if n, err := url.QueryUnescape(name); err == nil {
		name = n
	}
	name = strconv.Quote(name)
	refuse(w, badRequest("%s: unknown parameter: %s %s takes no query parameters, its request is the JSON body", name, r.Method, r.URL.Path))
	return false
}

// decode reads a protojson body into m, or answers 400 (413 when too
// large) and reports false.
func decode(w http.ResponseWriter, r *http.Request, m proto.Message) bool {
	// The body must come within bodyTimeout: a client that sends it
	// slowly, or never, holds a connection and a goroutine only that long.
	// (net/http lifts the deadline once the body is read to its end.) A
	// body that failed closes an HTTP/1 connection: what follows it is not
	// a request.
	_ = http.NewResponseController(w).SetReadDeadline(time.Now().Add(bodyTimeout)) // not every writer can (tests); the server's ReadTimeout still bounds it
	if r.ContentLength > maxBody {
		// Said too large before it is sent: refused at once, not after
		// reading 16 MiB of it (or waiting bodyTimeout for a client that
		// waits for an answer before it sends).
		if r.ProtoMajor == 1 {
			w.Header().Set("Connection", "close")
		}
		refused(codes.InvalidArgument)
		writeJSONError(w, http.StatusRequestEntityTooLarge, codes.InvalidArgument,
			fmt.Sprintf("body: Content-Length %d is more than %d bytes", r.ContentLength, maxBody))
		return false
	}
	b, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
	if err != nil {
		if r.ProtoMajor == 1 {
			// On HTTP/2 it would end every stream of the connection.
			w.Header().Set("Connection", "close")
		}
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			refused(codes.InvalidArgument)
			writeJSONError(w, http.StatusRequestEntityTooLarge, codes.InvalidArgument, fmt.Sprintf("body: more than %d bytes", maxBody))
			return false
		}
		refuse(w, badRequest("body: %v", err))
		return false
	}
	if len(b) > maxValues && jsonValues(b) > maxValues { // a value takes a byte at least
		// Decoded, such a body ({"requests":[{},{},…]}) held 50 times its
		// size: 800 MB for 16 MiB, and a few of them ran the node out.
		refuse(w, badRequest("body: more than %d JSON values (a batch holds at most 1000 checks)", maxValues))
		return false
	}
	if err := unmarshal.Unmarshal(b, m); err != nil {
		refuse(w, badRequest("body: %v", err))
		return false
	}
	return true
}

// maxValues bounds the JSON values of a body: a batch of 1,000 checks of
// 32 descriptors each holds under 100,000.
const maxValues = 500_000

// jsonValues counts the values of the JSON document b, about: every comma
// and colon outside strings separates two, so an empty object or list
// costs its sender a byte or two; it stops counting past maxValues.
func jsonValues(b []byte) int {
	n, in := 1, false
	for i := 0; i < len(b) && n <= maxValues; i++ {
		switch c := b[i]; {
		case in && c == '\\':
			i++ // the escaped byte
		case c == '"':
			in = !in
		case !in && (c == ',' || c == ':'):
			n++
		}
	}
	return n
}

func writeProto(w http.ResponseWriter, code int, m proto.Message) {
	b, err := marshal.Marshal(m)
	if err != nil {
		writeError(w, status.Errorf(codes.Internal, "encode answer: %v", err))
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_, _ = w.Write(append(b, '\n'))
}
