package httpapi

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	pb "github.com/floodgate/floodgate/proto/floodgate/v1"
)

// fakeLimiter admits the first `limit` checks of each key and remembers
// the requests it saw.
type fakeLimiter struct {
	limit int64
	seen  []*pb.AllowRequest
	used  map[string]int64
	err   error
}

func (f *fakeLimiter) Allow(_ context.Context, r *pb.AllowRequest) (*pb.AllowResponse, error) {
	if f.err != nil {
		return nil, f.err
	}
	f.seen = append(f.seen, r)
	if f.used == nil {
		f.used = map[string]int64{}
	}
	ok := f.used[r.Key] < f.limit
	if ok && (r.Cost == nil || *r.Cost > 0) {
		f.used[r.Key]++ // a peek (cost 0) counts nothing
	}
	resp := &pb.AllowResponse{Allowed: ok, Limit: f.limit, Remaining: f.limit - f.used[r.Key], ResetAfterMs: 59_001,
		WindowMs: 60_000, DecidedBy: "per-minute", Key: r.Key}
	if !ok {
		resp.RetryAfterMs = 1_500
	}
	return resp, nil
}

func (f *fakeLimiter) AllowBatch(ctx context.Context, r *pb.AllowBatchRequest) (*pb.AllowBatchResponse, error) {
	out := &pb.AllowBatchResponse{}
	for _, q := range r.Requests {
		resp, _ := f.Allow(ctx, q)
		out.Results = append(out.Results, &pb.AllowBatchItem{Response: resp})
	}
	return out, nil
}

func serve(t *testing.T, l Limiter, h Headers) *httptest.Server {
	mux := http.NewServeMux()
	Register(mux, l, Options{Headers: h})
	s := httptest.NewServer(mux)
	t.Cleanup(s.Close)
	return s
}

func get(t *testing.T, url string) (*http.Response, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

// The draft's syntax: a structured-field string and integer parameters.
var (
	policyHeader = regexp.MustCompile(`^"[^"\\]*";q=\d+(;w=\d+)?$`)
	limitHeader  = regexp.MustCompile(`^"[^"\\]*";r=\d+;t=\d+$`)
)

func TestLimitAnswers200Then429WithHeaders(t *testing.T) {
	s := serve(t, &fakeLimiter{limit: 2}, Draft)
	for i := range 3 {
		resp, body := get(t, s.URL+"/api/v1/limit?key=user_42&policy=api")
		want := http.StatusOK
		if i == 2 {
			want = http.StatusTooManyRequests
		}
		if resp.StatusCode != want {
			t.Fatalf("check %d: %d %s, want %d", i, resp.StatusCode, body, want)
		}
		h := resp.Header
		if p := h.Get("RateLimit-Policy"); !policyHeader.MatchString(p) || p != `"per-minute";q=2;w=60` {
			t.Errorf("RateLimit-Policy %q", p)
		}
		if l := h.Get("RateLimit"); !limitHeader.MatchString(l) || !strings.HasSuffix(l, ";t=60") {
			t.Errorf("RateLimit %q", l)
		}
		if ra := h.Get("Retry-After"); (i == 2) != (ra == "2") {
			t.Errorf("check %d: Retry-After %q (1.5s rounds up to 2)", i, ra)
		}
		if h.Get("X-RateLimit-Limit") != "" {
			t.Error("legacy headers sent in draft style")
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(body), &m); err != nil || m["allowed"] != (i < 2) {
			t.Errorf("body %s: %v", body, err)
		}
	}
}

// A HEAD peeks: monitors and `curl -I` see the headers and the status
// and spend nothing; a cost asked of a HEAD is refused, not ignored.
func TestHeadPeeks(t *testing.T) {
	l := &fakeLimiter{limit: 2}
	s := serve(t, l, Draft)
	head := func(query string) *http.Response {
		t.Helper()
		resp, err := http.Head(s.URL + "/api/v1/limit?" + query)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp
	}
	for i := range 3 {
		if resp := head("key=k&policy=api"); resp.StatusCode != http.StatusOK || resp.Header.Get("RateLimit") != `"per-minute";r=2;t=60` {
			t.Fatalf("HEAD %d: %d, RateLimit %q: want 200 and nothing spent", i, resp.StatusCode, resp.Header.Get("RateLimit"))
		}
	}
	if resp := head("key=k&policy=api&cost=0"); resp.StatusCode != http.StatusOK {
		t.Fatalf("HEAD with cost=0: %d", resp.StatusCode)
	}
	for _, r := range l.seen {
		if r.Cost == nil || *r.Cost != 0 {
			t.Fatalf("a HEAD sent cost %v, want a peek", r.Cost)
		}
	}
	if resp := head("key=k&policy=api&cost=1"); resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("HEAD with cost=1: %d, want 400", resp.StatusCode)
	}
	if len(l.seen) != 4 {
		t.Fatalf("%d checks reached the limiter, want 4 (the refused HEAD none)", len(l.seen))
	}
	for i, want := range []int{http.StatusOK, http.StatusOK, http.StatusTooManyRequests} {
		if resp, body := get(t, s.URL+"/api/v1/limit?key=k&policy=api"); resp.StatusCode != want {
			t.Fatalf("GET %d after the HEADs: %d %s, want %d", i, resp.StatusCode, body, want)
		}
	}
	if resp := head("key=k&policy=api"); resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") != "2" {
		t.Fatalf("HEAD of a spent key: %d, Retry-After %q: want 429 and 2", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
}

func TestLegacyAndBothHeaders(t *testing.T) {
	for _, style := range []Headers{Legacy, Both} {
		s := serve(t, &fakeLimiter{limit: 5}, style)
		resp, _ := get(t, s.URL+"/api/v1/limit?key=k&limit=5&window=1m")
		h := resp.Header
		if h.Get("X-RateLimit-Limit") != "5" || h.Get("X-RateLimit-Remaining") != "4" || h.Get("X-RateLimit-Reset") != "60" {
			t.Errorf("%s: legacy headers %v", style, h)
		}
		if (h.Get("RateLimit") != "") != (style == Both) {
			t.Errorf("%s: draft headers %v", style, h)
		}
	}
}

func TestQueryParameters(t *testing.T) {
	f := &fakeLimiter{limit: 9}
	s := serve(t, f, Draft)
	get(t, s.URL+"/api/v1/limit?descriptor=user=42&descriptor=ip=10.0.0.1&policy=api&cost=3")
	get(t, s.URL+"/api/v1/limit?key=k&limit=5&window=1m&algorithm=token_bucket&burst=9")
	get(t, s.URL+"/api/v1/limit?key=k&limit=5&window=1s&algorithm=sliding_counter&buckets=10")
	if len(f.seen) != 3 {
		t.Fatalf("%d of 3 requests reached the limiter", len(f.seen))
	}
	d, in, sc := f.seen[0], f.seen[1], f.seen[2]
	if d.Descriptors["user"] != "42" || d.Descriptors["ip"] != "10.0.0.1" || d.GetCost() != 3 || d.Policy != "api" {
		t.Errorf("descriptors request %v", d)
	}
	if l := in.Limit; l.GetAlgorithm() != pb.Algorithm_TOKEN_BUCKET || l.GetLimit() != 5 || l.GetWindowMs() != 60_000 || l.GetBurst() != 9 || in.Cost != nil {
		t.Errorf("inline request %v", in)
	}
	if l := sc.Limit; l.GetAlgorithm() != pb.Algorithm_SLIDING_COUNTER || l.GetWindowMs() != 1_000 || l.GetBuckets() != 10 {
		t.Errorf("sliding counter request %v", sc)
	}
}

func TestBadInputIs400NamingTheField(t *testing.T) {
	f := &fakeLimiter{limit: 9}
	s := serve(t, f, Draft)
	for query, field := range map[string]string{
		"key=k&bogus=1":                           "bogus",
		"key=k&cost=x":                            "cost",
		"key=k&key=j":                             "key",
		"descriptor=novalue":                      "descriptor",
		"descriptor=a=1&descriptor=a=2":           "descriptor",
		"key=k&limit=x&window=1m":                 "limit",
		"key=k&limit=5&window=soon":               "window",
		"key=k&limit=5&window=1m&algorithm=magic": "algorithm",
		"key=k&limit=5&window=1500us":             "window",
		"key=k&limit=5&window=1.0005s":            "window",
		"key=k&cost=":                             "cost",
		// Malformed pairs are refused, never dropped: a peek (cost=0)
		// must not count at cost 1.
		"key=k&limit=5&window=1m&cost=0;":            "cost",
		"key=k&cost=%zz":                             "cost",
		"key=k&limit=5&window=1m&algorithm=tok%zzen": "algorithm",
		"key=k&%zz":                   "query",
		"key=k&limit=5&window=1m;x=1": "window",
		// Given but empty is a mistake, not a default.
		"policy=&key=k":                                  "policy",
		"key=k&limit=5&window=1m&algorithm=":             "algorithm",
		"key=k&limit=5&window=1m&burst=":                 "burst",
		"key=k&limit=5&window=1m&buckets=x":              "buckets",
		"key=k&limit=5&window=1m&buckets=1e9":            "buckets",
		"key=":                                           "key",
		"key=k" + strings.Repeat("&descriptor=a=1", 100): "query",
	} {
		resp, body := get(t, s.URL+"/api/v1/limit?"+query)
		var e errorBody
		if resp.StatusCode != http.StatusBadRequest || json.Unmarshal([]byte(body), &e) != nil ||
			e.Error.Code != "INVALID_ARGUMENT" || !strings.HasPrefix(e.Error.Message, field+":") {
			t.Errorf("%s: %d %s, want 400 naming %s", query, resp.StatusCode, body, field)
		}
	}
	for body, field := range map[string]string{`{"kee":"a"}`: "kee", `{"key":`: "body", `{"cost":"x"}`: "cost"} {
		resp, err := http.Post(s.URL+"/v1/allow", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(b), field) {
			t.Errorf("POST %s: %d %s, want 400 naming %s", body, resp.StatusCode, b, field)
		}
	}
	if len(f.seen) != 0 {
		t.Errorf("bad requests reached the limiter: %v", f.seen)
	}
}

// A number too large for its field is said to be out of range, naming
// the parameter; it used to be called "not a whole number", which
// 99999999999999999999 is.
func TestQueryNumbersOutOfRange(t *testing.T) {
	f := &fakeLimiter{limit: 9}
	s := serve(t, f, Draft)
	for query, want := range map[string]string{
		"key=k&cost=9223372036854775808":                                                   `cost: "9223372036854775808" is out of range`,
		"key=k&cost=-9223372036854775809":                                                  `cost: "-9223372036854775809" is out of range`,
		"key=k&limit=99999999999999999999&window=1m":                                       `limit: "99999999999999999999" is out of range`,
		"key=k&limit=5&window=1m&algorithm=token_bucket&burst=1" + strings.Repeat("0", 19): `burst: "1` + strings.Repeat("0", 19) + `" is out of range`,
		"key=k&limit=5&window=1m&algorithm=sliding_counter&buckets=2147483648":             `buckets: "2147483648" is out of range (a 32-bit integer)`,
		"key=k&cost=1.5": `cost: "1.5" is not a whole number`,
	} {
		resp, body := get(t, s.URL+"/api/v1/limit?"+query)
		var e errorBody
		if resp.StatusCode != http.StatusBadRequest || json.Unmarshal([]byte(body), &e) != nil || !strings.HasPrefix(e.Error.Message, want) ||
			strings.Contains(e.Error.Message, "out of range") == strings.Contains(e.Error.Message, "whole number") {
			t.Errorf("%s: %d %s, want 400 %q", query, resp.StatusCode, body, want)
		}
	}
	if len(f.seen) != 0 {
		t.Errorf("%d refused checks reached the limiter", len(f.seen))
	}
}

// An inline limit given in part is told which parameter is missing; it
// used to be told that "" is not a whole number (or not a duration), as
// if the parameter had been given empty.
func TestQueryInlineLimitMissingParameter(t *testing.T) {
	f := &fakeLimiter{limit: 9}
	s := serve(t, f, Draft)
	for query, want := range map[string]string{
		"key=k&algorithm=gcra":            "limit: missing",
		"key=k&window=1m":                 "limit: missing",
		"key=k&limit=5":                   "window: missing",
		"key=k&limit=5&buckets=6":         "window: missing",
		"key=k&window=1m&burst=2&limit=5": "",
	} {
		resp, body := get(t, s.URL+"/api/v1/limit?"+query)
		var e errorBody
		_ = json.Unmarshal([]byte(body), &e)
		if want == "" && resp.StatusCode != 200 || want != "" && (resp.StatusCode != http.StatusBadRequest || !strings.HasPrefix(e.Error.Message, want)) {
			t.Errorf("%s: %d %s, want %q", query, resp.StatusCode, body, want)
		}
	}
}

func TestPostAllowAndBatch(t *testing.T) {
	s := serve(t, &fakeLimiter{limit: 1}, Draft)
	resp, err := http.Post(s.URL+"/v1/allow", "application/json", strings.NewReader(`{"key":"a","policy":"api"}`))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(b), `"allowed":true`) || resp.Header.Get("RateLimit") == "" {
		t.Errorf("POST /v1/allow: %d %s", resp.StatusCode, b)
	}
	resp, err = http.Post(s.URL+"/v1/allow:batch", "application/json", strings.NewReader(`{"requests":[{"key":"b","policy":"api"},{"key":"b","policy":"api"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	var out struct {
		Results []struct {
			Response struct{ Allowed bool } `json:"response"`
		} `json:"results"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || len(out.Results) != 2 || !out.Results[0].Response.Allowed || out.Results[1].Response.Allowed {
		t.Errorf("batch: %+v %v", out, err)
	}
	resp.Body.Close()
}

// The POST routes take their request in the body only: a query parameter
// is refused with 400 naming it, and nothing is counted. It used to be
// dropped without a word, so POST /v1/allow?cost=0, meant as a peek,
// counted at cost 1.
func TestPostRefusesQueryParameters(t *testing.T) {
	l := &fakeLimiter{limit: 5}
	s := serve(t, l, Draft)
	check, batch := `{"key":"a","policy":"api"}`, `{"requests":[{"key":"a","policy":"api"}]}`
	for path, body := range map[string]string{"/v1/allow?cost=0": check, "/v1/allow:batch?cost=0&x=1": batch,
		"/v1/allow?cost": check, "/v1/allow?&cost=%30": check} {
		resp, err := http.Post(s.URL+path, "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		var body errorBody
		err = json.NewDecoder(resp.Body).Decode(&body)
		resp.Body.Close()
		if resp.StatusCode != 400 || err != nil || !strings.HasPrefix(body.Error.Message, `"cost": unknown parameter`) {
			t.Errorf("POST %s: %d %+v %v, want 400 naming \"cost\"", path, resp.StatusCode, body, err)
		}
	}
	if len(l.seen) != 0 {
		t.Errorf("%d checks counted for refused requests", len(l.seen))
	}
}

func TestErrorsMapToHTTPStatus(t *testing.T) {
	for c, want := range map[codes.Code]int{
		codes.InvalidArgument: 400, codes.Unavailable: 503, codes.DeadlineExceeded: 504,
		codes.NotFound: 404, codes.Internal: 500, codes.ResourceExhausted: 429,
	} {
		s := serve(t, &fakeLimiter{err: status.Error(c, "boom")}, Draft)
		resp, body := get(t, s.URL+"/api/v1/limit?key=k&policy=p")
		if resp.StatusCode != want || !strings.Contains(body, snake(c.String())) {
			t.Errorf("%v: %d %s, want %d", c, resp.StatusCode, body, want)
		}
		// What passes with time (no leader yet, a full key store) says
		// when to try again; a bad request does not.
		wantRetry := ""
		if c == codes.Unavailable || c == codes.ResourceExhausted {
			wantRetry = "1"
		}
		if got := resp.Header.Get("Retry-After"); got != wantRetry {
			t.Errorf("%v: Retry-After %q, want %q", c, got, wantRetry)
		}
	}
}

func TestSFString(t *testing.T) {
	for in, want := range map[string]string{"per-minute": `"per-minute"`, `a"b\c`: `"a\"b\\c"`, "é\n": `"???"`} {
		if got := sfString(in); got != want {
			t.Errorf("sfString(%q) = %s, want %s", in, got, want)
		}
	}
}

// A wrong method is answered in JSON too, naming the method, with Allow.
func TestWrongMethodIsJSON(t *testing.T) {
	s := serve(t, &fakeLimiter{limit: 1}, Draft)
	for _, c := range []struct{ method, path, allow string }{
		{"GET", "/v1/allow", "POST"},
		{"PUT", "/v1/allow:batch", "POST"},
		{"POST", "/api/v1/limit?key=a", "GET, HEAD"},
	} {
		resp, e, err := sendForError(t, c.method, s.URL+c.path, "")
		if resp.StatusCode != http.StatusMethodNotAllowed || err != nil || !strings.HasPrefix(e.Error.Message, "method: "+c.method) ||
			resp.Header.Get("Allow") != c.allow || resp.Header.Get("Content-Type") != "application/json" {
			t.Errorf("%s %s: %d %+v %v, Allow %q", c.method, c.path, resp.StatusCode, e, err, resp.Header.Get("Allow"))
		}
	}
	if resp, body := get(t, s.URL+"/api/v1/limit?key=a&limit=1&window=1m"); resp.StatusCode != http.StatusOK {
		t.Errorf("GET still answers: %d %s", resp.StatusCode, body)
	}
}

// A path the API does not serve answers 404 in JSON, like every error.
func TestUnknownPathIsJSON(t *testing.T) {
	s := serve(t, &fakeLimiter{limit: 1}, Draft)
	for _, path := range []string{"/", "/v1/allowed", "/api/v1/limits"} {
		resp, body := get(t, s.URL+path)
		var e errorBody
		if resp.StatusCode != http.StatusNotFound || json.Unmarshal([]byte(body), &e) != nil || e.Error.Code != "NOT_FOUND" ||
			!strings.HasPrefix(e.Error.Message, "path: ") || resp.Header.Get("Content-Type") != "application/json" {
			t.Errorf("GET %s: %d %s", path, resp.StatusCode, body)
		}
	}
}

// sendForError sends method to url with body and decodes the answer as
// an error; err is the decoding's.
func sendForError(t *testing.T, method, url, body string) (*http.Response, errorBody, error) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var e errorBody
	err = json.NewDecoder(resp.Body).Decode(&e)
	return resp, e, err
}
