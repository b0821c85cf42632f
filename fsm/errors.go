package fsm

import (
	"errors"
	"fmt"
)

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
	// ErrUnknownEntry is wrapped by the value Apply panics with on a log
	// entry this binary cannot interpret: an unknown type, or a body
	// version newer than it knows. A newer node wrote it; skipping it
	// would leave this replica silently behind the ones that apply it, so
	// the node stops instead (doc.go).
	ErrUnknownEntry = errors.New("unknown log entry")
)

// stop panics with ErrUnknownEntry for the entry at index of a group
// ("shard" or "meta"), of type typ; version is its body version when the
// type is known and the version is not (0 otherwise).
func stop(group string, index uint64, typ, version, newest byte) {
	if version == 0 {
		panic(fmt.Errorf("%w: %s log entry %d has type %d, which this binary does not know (written by a newer floodgate?): stopping rather than skipping it",
			ErrUnknownEntry, group, index, typ))
	}
	panic(fmt.Errorf("%w: %s log entry %d of type %d has body version %d, this binary knows up to %d (written by a newer floodgate?): stopping rather than skipping it",
		ErrUnknownEntry, group, index, typ, version, newest))
}
