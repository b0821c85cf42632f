package e2e

import (
	"encoding/json"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// httpGet fetches url and returns the answer and its body.
func httpGet(t *testing.T, url string) (*http.Response, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

func httpPost(t *testing.T, url, body string) (*http.Response, string) {
	t.Helper()
	resp, err := http.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

var (
	draftPolicy = regexp.MustCompile(`^"per-minute";q=3;w=60$`)
	draftLimit  = regexp.MustCompile(`^"per-minute";r=(\d+);t=(\d+)$`)
)

// The HTTP/JSON API of real nodes, as a service without gRPC uses it.
func TestHTTPAPI(t *testing.T) {
	t.Parallel()
	c := startCluster(t, 3, "--http-ratelimit-headers", "both")
	setPolicies(t, c, `
policies:
  - name: login
    key_by: [user]
    limits:
      - {name: per-minute, algorithm: sliding_log, limit: 3, window: 1m}
      - {name: per-hour, algorithm: sliding_log, limit: 100, window: 1h}
`)
	nodes := c.Running()
	url := func(i int, path string) string { return "http://" + nodes[i%len(nodes)].HTTP + path }

	for i := range 4 {
		resp, body := httpGet(t, url(i, "/api/v1/limit?policy=login&descriptor=user=42"))
		want := http.StatusOK
		if i == 3 {
			want = http.StatusTooManyRequests
		}
		if resp.StatusCode != want {
			t.Fatalf("check %d: %d %s, want %d", i, resp.StatusCode, body, want)
		}
		h := resp.Header
		if !draftPolicy.MatchString(h.Get("RateLimit-Policy")) {
			t.Fatalf("check %d: RateLimit-Policy %q", i, h.Get("RateLimit-Policy"))
		}
		m := draftLimit.FindStringSubmatch(h.Get("RateLimit"))
		if m == nil {
			t.Fatalf("check %d: RateLimit %q", i, h.Get("RateLimit"))
		}
		r, _ := strconv.Atoi(m[1])
		reset, _ := strconv.Atoi(m[2])
		// t is the per-minute limit's own reset, not the hour's.
		if r != max(2-i, 0) || reset < 1 || reset > 60 {
			t.Fatalf("check %d: RateLimit %q, want r=%d and 1 ≤ t ≤ 60", i, h.Get("RateLimit"), max(2-i, 0))
		}
		if h.Get("X-RateLimit-Limit") != "3" || h.Get("X-RateLimit-Remaining") != m[1] || h.Get("X-RateLimit-Reset") != m[2] {
			t.Fatalf("check %d: legacy headers %v", i, h)
		}
		if ra, err := strconv.Atoi(h.Get("Retry-After")); (i == 3) != (err == nil) || (i == 3 && (ra < 1 || ra > 60)) {
			t.Fatalf("check %d: Retry-After %q", i, h.Get("Retry-After"))
		}
		var a struct {
			Allowed bool
			Key     string
		}
		if err := json.Unmarshal([]byte(body), &a); err != nil || a.Allowed != (i < 3) || a.Key != "user=42" {
			t.Fatalf("check %d: body %s", i, body)
		}
	}

	// The protojson API: one check and a batch.
	resp, body := httpPost(t, url(1, "/v1/allow"), `{"policy":"login","descriptors":{"user":"7"}}`)
	if resp.StatusCode != 200 || !strings.Contains(body, `"allowed":true`) || !strings.Contains(body, `"remaining":"2"`) {
		t.Fatalf("POST /v1/allow: %d %s", resp.StatusCode, body)
	}
	resp, body = httpPost(t, url(2, "/v1/allow:batch"), `{"requests":[{"policy":"login","descriptors":{"user":"7"}},{"policy":"login","descriptors":{"user":"42"}}]}`)
	var batch struct {
		Results []struct {
			Response struct{ Allowed bool } `json:"response"`
		} `json:"results"`
	}
	if resp.StatusCode != 200 || json.Unmarshal([]byte(body), &batch) != nil || len(batch.Results) != 2 ||
		!batch.Results[0].Response.Allowed || batch.Results[1].Response.Allowed {
		t.Fatalf("POST /v1/allow:batch: %d %s", resp.StatusCode, body)
	}

	// Bad input: 400, JSON naming the field, nothing counted.
	for _, bad := range []struct{ method, path, body, field string }{
		{"GET", "/api/v1/limit?policy=login&descriptor=user=9&cost=-1", "", "cost"},
		{"GET", "/api/v1/limit?policy=nope&descriptor=user=9", "", "policy"},
		{"GET", "/api/v1/limit?policy=login&descriptor=ip=1.2.3.4", "", "descriptors"},
		{"GET", "/api/v1/limit?policy=login&descriptor=user=9&whatever=1", "", "whatever"},
		{"POST", "/v1/allow", `{"policy":"login","descriptors":{"user":"9"},"cost":"x"}`, "cost"},
		{"POST", "/v1/allow:batch", `{"requests":[{"policy":"login","descriptors":{"user":"9"}},{"policy":"login"}]}`, "requests[1]"},
	} {
		var resp *http.Response
		var body string
		if bad.method == "GET" {
			resp, body = httpGet(t, url(0, bad.path))
		} else {
			resp, body = httpPost(t, url(0, bad.path), bad.body)
		}
		var e struct {
			Error struct{ Code, Message string }
		}
		if resp.StatusCode != 400 || json.Unmarshal([]byte(body), &e) != nil || e.Error.Code != "INVALID_ARGUMENT" || !strings.Contains(e.Error.Message, bad.field) {
			t.Fatalf("%s %s: %d %s, want 400 naming %s", bad.method, bad.path, resp.StatusCode, body, bad.field)
		}
	}
	resp, body = httpGet(t, url(1, "/api/v1/limit?policy=login&descriptor=user=9&cost=0"))
	if resp.StatusCode != 200 || resp.Header.Get("X-RateLimit-Remaining") != "3" {
		t.Fatalf("user 9 after bad requests: %d %s, want nothing counted", resp.StatusCode, body)
	}

	// The node's own routes answer a wrong method with 405 and Allow, an
	// unknown path with 404, both in JSON.
	for _, c := range []struct {
		method, path string
		status       int
	}{
		{"POST", "/healthz", 405}, {"DELETE", "/readyz", 405}, {"PUT", "/metrics", 405}, {"GET", "/nope", 404},
	} {
		req, _ := http.NewRequest(c.method, url(0, c.path), nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != c.status || resp.Header.Get("Content-Type") != "application/json" ||
			(c.status == 405 && resp.Header.Get("Allow") != "GET, HEAD") {
			t.Errorf("%s %s: %d %v %s, want %d in JSON", c.method, c.path, resp.StatusCode, resp.Header, b, c.status)
		}
	}
}
