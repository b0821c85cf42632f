package metrics

import (
	"net/http"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

var (
	// HTTPRequests counts the HTTP API's requests by route (the API's own
	// paths, never the request's), method and status code: the HTTP
	// counterpart of grpc_server_handled_total.
	HTTPRequests = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "floodgate_http_requests_total",
		Help: "HTTP API requests answered, by route, method and status code.",
	}, []string{"route", "method", "code"})

	// HTTPSeconds times the HTTP API's requests by route and method, in
	// the buckets of grpc_server_handling_seconds, so one panel reads both.
	HTTPSeconds = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "floodgate_http_request_duration_seconds",
		Help:    "Time the HTTP API took to answer a request, by route and method.",
		Buckets: latencyBuckets,
	}, []string{"route", "method"})
)

// InstrumentHTTP counts and times h's requests under route. Methods other
// than the standard ones are labelled "unknown" (promhttp), so a caller
// cannot mint series. The series of method (the route's, as promhttp
// spells it: "get", "post") exist from the start, as the dashboard and
// rate() want them.
func InstrumentHTTP(method, route string, h http.Handler) http.Handler {
	labels := prometheus.Labels{"route": route}
	HTTPSeconds.WithLabelValues(route, strings.ToLower(method))
	return promhttp.InstrumentHandlerDuration(HTTPSeconds.MustCurryWith(labels),
		promhttp.InstrumentHandlerCounter(HTTPRequests.MustCurryWith(labels), h))
}
