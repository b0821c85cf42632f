// Package httpapi serves rate-limit checks over HTTP/JSON, for services
// that do not speak gRPC:
//
//   - POST /v1/allow and POST /v1/allow:batch take and answer the gRPC
//     messages in protojson (AllowRequest, AllowBatchRequest);
//   - GET /api/v1/limit?key=…&policy=… answers 200 when the request is
//     allowed and 429 Too Many Requests with Retry-After when not; a
//     HEAD of it peeks (counts nothing).
//
// Every answer to a check carries the IETF draft's rate-limit headers
// (draft-ietf-httpapi-ratelimit-headers-10: RateLimit-Policy and
// RateLimit), or the legacy X-RateLimit-Limit/-Remaining/-Reset triple, or
// both. Errors are JSON naming the field at fault, with the gRPC code and
// the matching HTTP status (400 for bad input, 503 when the cluster cannot
// answer). The package calls the RateLimiter service in-process; it knows
// HTTP and protobuf, not Raft.
package httpapi
