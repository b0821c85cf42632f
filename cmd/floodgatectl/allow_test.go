package main

import (
	"errors"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// A node's refusal of an inline limit names the API's fields; floodgatectl
// allow names the flags that gave them instead (--window, not
// limit.window_ms), and leaves other errors and words as they are.
func TestFlagFields(t *testing.T) {
	for in, want := range map[string]string{
		"invalid request: limit.limit: must be between 1 and 1000000000, got -1":     "invalid request: --limit: must be between 1 and 1000000000, got -1",
		"invalid request: limit.window_ms: must be more than 0":                      "invalid request: --window: must be more than 0",
		"invalid request: limit.burst: must be between 0 and 1000000000, got -4":     "invalid request: --burst: must be between 0 and 1000000000, got -4",
		"invalid request: cost: 7 is more than the limit (5)":                        "invalid request: --cost: 7 is more than the limit (5)",
		"invalid request: limit.limit: a sliding_log is capped; the cost: unchanged": "invalid request: --limit: a sliding_log is capped; the cost: unchanged",
		"invalid request: policy: unknown policy \"x\"":                              "invalid request: policy: unknown policy \"x\"",
	} {
		got := flagFields(status.Error(codes.InvalidArgument, in))
		if status.Convert(got).Message() != want || status.Code(got) != codes.InvalidArgument {
			t.Errorf("%q: %v, want %q", in, got, want)
		}
	}
	other := status.Error(codes.Unavailable, "limit.limit: not a refusal")
	if got := flagFields(other); got != other {
		t.Errorf("an Unavailable error became %v", got)
	}
	plain := errors.New("limit.limit: not a status")
	if got := flagFields(plain); got != plain {
		t.Errorf("a plain error became %v", got)
	}
}
