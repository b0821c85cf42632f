package fsm

import (
	"errors"
	"fmt"

	"github.com/floodgate/floodgate/policy"
	"github.com/floodgate/floodgate/window"
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
	// errNewer marks, besides ErrCorrupt or ErrSnapshotVersion, a part of
	// an entry or snapshot in a format newer than this binary reads (a
	// check flag, a nested snapshot's version): see newerFormat.
	errNewer = errors.New("written by a newer floodgate")
)

// newerFormat reports whether err says that something inside an entry or
// snapshot was written in a newer format than this binary reads: a
// policy's or a key state's version or flag, a nested shard snapshot's
// version, a check's flag. Unlike a corrupt body, which every replica
// refuses alike, such a body is read by the replicas of the newer release,
// so an entry holding it stops the node as an unknown type does, and a
// snapshot holding it is of a version this binary does not read.
func newerFormat(err error) bool {
	return errors.Is(err, errNewer) || errors.Is(err, policy.ErrNewerVersion) || errors.Is(err, window.ErrNewerVersion)
}

// stopNewer panics with ErrUnknownEntry for the entry at index of a group,
// of type typ, part of which is of a newer format (err says which).
func stopNewer(group string, index uint64, typ byte, err error) {
	panic(fmt.Errorf("%w: %s log entry %d of type %d: %w (a newer floodgate's?): stopping rather than skipping it",
		ErrUnknownEntry, group, index, typ, err))
}

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
