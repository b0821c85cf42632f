package rpc

import (
	"errors"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/floodgate/floodgate/cluster"
	"github.com/floodgate/floodgate/fsm"
)

// A peer's answer maps to the cluster error its callers classify: a
// refusal of this node's credentials is final for a join (ErrDenied) and
// stays retryable for calls made across a credential rotation.
func TestFromStatus(t *testing.T) {
	for _, tc := range []struct {
		code codes.Code
		is   []error
	}{
		{codes.FailedPrecondition, []error{fsm.ErrRefused}},
		{codes.InvalidArgument, []error{cluster.ErrConfig}},
		{codes.NotFound, []error{cluster.ErrUnknownNode}},
		{codes.Unauthenticated, []error{cluster.ErrDenied, cluster.ErrNoLeader}},
		{codes.PermissionDenied, []error{cluster.ErrDenied, cluster.ErrNoLeader}},
		{codes.Unavailable, []error{cluster.ErrNoLeader}},
	} {
		if tc.code == codes.Unauthenticated {
			if msg := fromStatus(status.Error(tc.code, "why")).Error(); msg != "credentials refused: Unauthenticated: why" {
				t.Errorf("message %q", msg)
			}
		}
		err := fromStatus(status.Error(tc.code, "why"))
		for _, want := range tc.is {
			if !errors.Is(err, want) {
				t.Errorf("%s: %v is not %v", tc.code, err, want)
			}
		}
		if tc.code == codes.Unavailable && errors.Is(err, cluster.ErrDenied) {
			t.Errorf("%s: %v is a credential refusal", tc.code, err)
		}
	}
	alive := fromStatus(status.Error(codes.Unavailable, "node.id: n2 is a "+cluster.ErrMemberAlive.Error()))
	if !errors.Is(alive, cluster.ErrMemberAlive) || !errors.Is(alive, cluster.ErrNoLeader) {
		t.Errorf("a member seen alive: %v", alive)
	}
	if fromStatus(nil) != nil {
		t.Error("nil")
	}
	// A peer's message that names its error already is not prefixed again.
	for msg, want := range map[string]string{
		"invalid configuration: gossip_key: wrong": "invalid configuration: gossip_key: wrong",
		"gossip_key: wrong":                        "invalid configuration: gossip_key: wrong",
	} {
		if got := fromStatus(status.Error(codes.InvalidArgument, msg)).Error(); got != want {
			t.Errorf("%q: %q, want %q", msg, got, want)
		}
	}
}
