package httpapi

import (
	"net/http"
	"strings"
	"testing"
)

// Every answer to a check, allowed, denied or refused, on every route,
// says Cache-Control: no-store: a GET that counts must not be answered
// from a cache, which would admit checks nobody counted.
func TestCheckAnswersAreNotStored(t *testing.T) {
	s := serve(t, &fakeLimiter{limit: 1}, Draft)
	for _, tc := range []struct {
		name, method, path, body string
		code                     int
	}{
		{"allowed", "GET", "/api/v1/limit?key=k&policy=api", "", http.StatusOK},
		{"denied", "GET", "/api/v1/limit?key=k&policy=api", "", http.StatusTooManyRequests},
		{"refused", "GET", "/api/v1/limit?key=k&cost=x", "", http.StatusBadRequest},
		{"post", "POST", "/v1/allow", `{"key":"p","policy":"api"}`, http.StatusOK},
		{"batch", "POST", "/v1/allow:batch", `{"requests":[{"key":"b","policy":"api"}]}`, http.StatusOK},
	} {
		req, err := http.NewRequest(tc.method, s.URL+tc.path, strings.NewReader(tc.body))
		if err != nil {
			t.Fatal(err)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != tc.code || resp.Header.Get("Cache-Control") != "no-store" {
			t.Errorf("%s: %d, Cache-Control %q; want %d, no-store", tc.name, resp.StatusCode, resp.Header.Get("Cache-Control"), tc.code)
		}
	}
}
