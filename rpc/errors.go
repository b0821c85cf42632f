package rpc

import (
	"context"
	"errors"
	"fmt"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/floodgate/floodgate/cluster"
	"github.com/floodgate/floodgate/fsm"
	"github.com/floodgate/floodgate/policy"
	"github.com/floodgate/floodgate/rpc/validate"
	"github.com/floodgate/floodgate/window"
)

// Errors of the rpc layer.
var (
	// ErrInvalid marks a request that can never succeed; the message names
	// the field. It maps to InvalidArgument (it is validate.ErrInvalid).
	ErrInvalid = validate.ErrInvalid
	// ErrOverloaded marks checks a node refused, uncounted, because it
	// waits on --max-checks-waiting checks already (admission). It maps
	// to Unavailable: the cluster could not answer them.
	ErrOverloaded = errors.New("node overloaded")
)

// codeOf maps an error to the gRPC code a client should see.
func codeOf(err error) codes.Code {
	if s, ok := status.FromError(err); ok && s.Code() != codes.Unknown {
		return s.Code()
	}
	switch {
	case errors.Is(err, ErrInvalid), errors.Is(err, window.ErrInvalid), errors.Is(err, policy.ErrCorrupt),
		errors.Is(err, cluster.ErrConfig), errors.Is(err, cluster.ErrWrongShard), errors.Is(err, cluster.ErrTimeAhead):
		return codes.InvalidArgument
	case errors.Is(err, cluster.ErrUnknownNode), errors.Is(err, fsm.ErrUnknownNode), errors.Is(err, fsm.ErrUnknownPolicy):
		return codes.NotFound
	case errors.Is(err, cluster.ErrNotFresh), errors.Is(err, fsm.ErrRefused), errors.Is(err, fsm.ErrNotFrozen):
		return codes.FailedPrecondition
	case errors.Is(err, cluster.ErrNotLeader), errors.Is(err, cluster.ErrNoLeader),
		errors.Is(err, cluster.ErrUnavailable), errors.Is(err, cluster.ErrClosed), errors.Is(err, cluster.ErrNotReady),
		errors.Is(err, cluster.ErrMoved), errors.Is(err, fsm.ErrNotOwned), errors.Is(err, cluster.ErrMemberAlive),
		errors.Is(err, ErrOverloaded), errors.Is(err, cluster.ErrBacklog):
		return codes.Unavailable
	case errors.Is(err, cluster.ErrFull), errors.Is(err, fsm.ErrExportTooLarge):
		return codes.ResourceExhausted
	case errors.Is(err, context.DeadlineExceeded):
		return codes.DeadlineExceeded
	case errors.Is(err, context.Canceled):
		return codes.Canceled
	}
	return codes.Internal
}

// toStatus converts err to a gRPC status error.
func toStatus(err error) error {
	if err == nil {
		return nil
	}
	if _, ok := status.FromError(err); ok {
		return err
	}
	return status.Error(codeOf(err), err.Error())
}

// peerRefusal turns a peer's refusal of this node's credentials
// (PermissionDenied, Unauthenticated: its peer token or certificate) into
// Unavailable naming the peer and the settings at fault. The node makes
// such calls on its caller's behalf (a forwarded check, a snapshot, a
// reset), and the caller's own credentials were accepted: told
// PermissionDenied, it would look for the fault in them, and would not
// retry on another node. Other errors are returned as they are.
func peerRefusal(addr string, err error) error {
	switch status.Code(err) {
	case codes.PermissionDenied, codes.Unauthenticated:
		return status.Error(codes.Unavailable, fmt.Sprintf("node %s refused this node's peer credentials (--peer-token-file, --peer-tls-*): %s",
			addr, status.Convert(err).Message()))
	}
	return err
}
