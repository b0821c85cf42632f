package fsm

import "errors"

// Errors of the state machines. Refusals are deterministic: every replica
// applying the same entry refuses it the same way.
var (
	// ErrCorrupt marks a log entry or snapshot that cannot be decoded.
	ErrCorrupt = errors.New("corrupt fsm data")
	// ErrSnapshotVersion marks a snapshot written by a newer format.
	ErrSnapshotVersion = errors.New("unsupported snapshot version")
	// ErrRefused marks a well-formed meta command that the state refuses.
	ErrRefused = errors.New("meta command refused")
	// ErrUnknownNode marks a command about a node that is not a member.
	ErrUnknownNode = errors.New("unknown node")
	// ErrUnknownPolicy marks a command about a policy that does not exist.
	ErrUnknownPolicy = errors.New("unknown policy")
)
