package httpapi

import (
	"net/http"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"

	"github.com/floodgate/floodgate/metrics"
)

// The API's calls reach the gRPC server in-process, past its interceptors:
// they are counted and timed here, by route, method and code, and a
// request refused before the limiter (a query or body that does not parse)
// is a check error as on gRPC.
func TestRequestsAreCountedAndTimed(t *testing.T) {
	s := serve(t, &fakeLimiter{limit: 1}, Draft)
	count := func(route, method, code string) float64 {
		return testutil.ToFloat64(metrics.HTTPRequests.With(prometheus.Labels{"route": route, "method": method, "code": code}))
	}
	timed := func(route, method string) uint64 {
		var m dto.Metric
		if err := metrics.HTTPSeconds.With(prometheus.Labels{"route": route, "method": method}).(prometheus.Metric).Write(&m); err != nil {
			t.Fatal(err)
		}
		return m.GetHistogram().GetSampleCount()
	}
	invalid := metrics.CheckErrors.WithLabelValues("InvalidArgument")
	ok0, limited0, bad0 := count("/api/v1/limit", "get", "200"), count("/api/v1/limit", "get", "429"), count("/api/v1/limit", "get", "400")
	posts0, timed0, invalid0 := count("/v1/allow", "post", "400"), timed("/api/v1/limit", "get"), testutil.ToFloat64(invalid)

	get(t, s.URL+"/api/v1/limit?key=a&limit=1&window=1m")   // 200
	get(t, s.URL+"/api/v1/limit?key=a&limit=1&window=1m")   // 429
	get(t, s.URL+"/api/v1/limit?key=a&limit=abc&window=1m") // 400: limit does not parse
	get(t, s.URL+"/api/v1/limit?key=a&limit=1&window=xyz")  // 400: window does not parse
	resp, err := http.Post(s.URL+"/v1/allow", "application/json", strings.NewReader(`{"key":`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()

	for _, c := range []struct {
		name      string
		got, want float64
	}{
		{"GET /api/v1/limit 200", count("/api/v1/limit", "get", "200") - ok0, 1},
		{"GET /api/v1/limit 429", count("/api/v1/limit", "get", "429") - limited0, 1},
		{"GET /api/v1/limit 400", count("/api/v1/limit", "get", "400") - bad0, 2},
		{"POST /v1/allow 400", count("/v1/allow", "post", "400") - posts0, 1},
		{"GET /api/v1/limit timed", float64(timed("/api/v1/limit", "get") - timed0), 4},
		{"check errors, InvalidArgument", testutil.ToFloat64(invalid) - invalid0, 3},
	} {
		if c.got != c.want {
			t.Errorf("%s: rose by %v, want %v", c.name, c.got, c.want)
		}
	}
}
