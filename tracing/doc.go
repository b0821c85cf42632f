// Package tracing sets up OpenTelemetry tracing of checks: the entry
// node's dispatch, the forward to a leader on another node (the gRPC
// calls carry the trace context), and the Raft commit on the leader. It
// exports by OTLP/gRPC when an endpoint is configured and is off
// otherwise: spans then cost a no-op call.
package tracing
