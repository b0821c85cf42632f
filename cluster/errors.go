package cluster

import (
	"errors"
	"fmt"

	"github.com/floodgate/floodgate/fsm"
	"github.com/floodgate/floodgate/policy"
	"github.com/floodgate/floodgate/raftnet"
)

// Errors of the cluster. rpc maps them to gRPC codes.
var (
	// ErrConfig marks an unusable configuration; the message names the flag.
	ErrConfig = errors.New("invalid configuration")
	// ErrNotLeader means this node does not lead the group. Nothing was
	// written: the request may be retried on the leader (see NotLeaderError).
	ErrNotLeader = errors.New("not the leader")
	// ErrNoLeader means the group has no reachable leader now (no quorum,
	// or an election under way). Nothing was written.
	ErrNoLeader = errors.New("no leader")
	// ErrBacklog refuses, unwritten, a check queued behind more than one
	// log entry of a group's checks whose deadline is nearer than a commit:
	// written, it would count for a caller gone by its answer. Not
	// retryable: sent again it would queue behind the same backlog.
	ErrBacklog = errors.New("not written: the group's queue is longer than the check's deadline")
	// ErrUnavailable means the write was handed to Raft but its outcome is
	// unknown (leadership lost, commit timed out): it may or may not have
	// been applied, so it must not be retried.
	ErrUnavailable = errors.New("outcome unknown")
	// ErrOtherCluster refuses a node of another cluster on a node-to-node
	// path (a member's address reused by a node of another cluster): the
	// Raft handshake's error, so that its refusals are not wrapped twice.
	ErrOtherCluster = raftnet.ErrOtherCluster
	// ErrNotFresh refuses to move a node with its own members or data into
	// another cluster.
	ErrNotFresh = errors.New("node is not fresh")
	// ErrUnknownNode names a node that is not a member.
	ErrUnknownNode = errors.New("unknown node")
	// ErrClosed means the node is shutting down.
	ErrClosed = errors.New("node closed")
	// ErrNotReady means the node has not joined a cluster yet.
	ErrNotReady = errors.New("node not part of a cluster yet")
	// ErrClock means this node's clock is too far from the cluster's.
	ErrClock = errors.New("clock out of step")
	// ErrTimeAhead refuses a backup's states whose log time is ahead of
	// this node's clock beyond the cluster's clock tolerance
	// (CheckRestoreTime). Nothing was restored.
	ErrTimeAhead = errors.New("log time ahead of this node's clock")
	// ErrNoClock means a member tells no time (an older release): its
	// clock cannot be checked.
	ErrNoClock = errors.New("tells no time")
	// ErrStorage means the node's log could not be written.
	ErrStorage = errors.New("raft log write failed")
	// ErrDamaged means a Raft log file failed its consistency check.
	ErrDamaged = errors.New("damaged raft log")
	// ErrDataDirInUse means another process holds the data dir's lock.
	ErrDataDirInUse = errors.New("data dir in use")
	// ErrNoMoveQuery means a member cannot say whether its replica applied
	// a slot move's step: it runs a release from before the question.
	ErrNoMoveQuery = errors.New("does not answer move queries (an older release)")
	// ErrWrongShard refuses a check sent to a shard that does not own its
	// key: counting it there would leave the key's own shard untouched.
	ErrWrongShard = errors.New("key does not belong to this shard")
	// ErrDenied means a member refused this node's credentials (its peer
	// token or certificate). Peers report it as ErrNoLeader too, so that a
	// call retried across a credential rotation stays retryable; a join
	// takes it as final.
	ErrDenied = errors.New("credentials refused")
	// ErrMemberAlive refuses new addresses for a member that gossip still
	// sees alive at its old ones: a second process with its id, or one
	// that moved before its old process was declared dead. It clears
	// itself in the second case, so a join retries it.
	ErrMemberAlive = errors.New("member still alive at its old address")
	// ErrFull refuses a check that would add key states to a group that
	// holds --max-key-states: nothing was counted, and a retry fails alike
	// until old states expire.
	ErrFull = errors.New("key states full")
	// ErrMoved means the group does not own the key's slot (now): the slot
	// moved away, is moving, or has not arrived yet. Nothing was counted;
	// the sender routes the check again once its slot table changes.
	ErrMoved = errors.New("the key's slot is not owned by this group")
)

// NotLeaderError is ErrNotLeader with a hint of who leads, when known.
type NotLeaderError struct {
	Group      string
	LeaderID   string
	LeaderAddr string // the leader's gRPC address
}

func (e *NotLeaderError) Error() string {
	if e.LeaderID == "" {
		return fmt.Sprintf("%s: %v", e.Group, ErrNotLeader)
	}
	return fmt.Sprintf("%s: %v (leader is %s at %s)", e.Group, ErrNotLeader, e.LeaderID, e.LeaderAddr)
}

// Is makes errors.Is(err, ErrNotLeader) hold.
func (e *NotLeaderError) Is(target error) bool { return target == ErrNotLeader }

// Retryable reports whether err means the request was written nowhere
// (not the leader, no leader yet, the node not ready), so it may be sent
// again, here or to another node, without being counted twice. An unknown
// outcome (ErrUnavailable) never is, even when it wraps one of those, nor
// is a PartialError, whatever its items say. This is the one retry rule of
// the Allow path; ErrMoved is retried after routing the check again.
func Retryable(err error) bool {
	var pe *PartialError
	if err == nil || errors.Is(err, ErrUnavailable) || errors.As(err, &pe) {
		return false // a partial answer counted some of its checks
	}
	return errors.Is(err, ErrNotLeader) || errors.Is(err, ErrNoLeader) || errors.Is(err, ErrNotReady) ||
		errors.Is(err, ErrMoved)
}

// MetaRefused reports whether a meta write's error is the meta state's
// refusal of the command (or a malformed command): sent again, anywhere,
// it fails alike. Every other error of a meta write (no leader, the
// outcome unknown) may pass with time. The one rule for meta writes.
func MetaRefused(err error) bool {
	return errors.Is(err, fsm.ErrRefused) || errors.Is(err, fsm.ErrUnknownNode) || errors.Is(err, ErrUnknownNode) ||
		errors.Is(err, fsm.ErrUnknownPolicy) || errors.Is(err, fsm.ErrCorrupt) || errors.Is(err, ErrConfig)
}

// PartialError answers a call of several checks of which some failed alone
// (refused as invalid, or their slot moved) while the others were
// evaluated, and possibly counted: each check gets its own answer, and none
// of the evaluated ones may be retried.
type PartialError struct {
	Results []policy.Result
	Errs    []error // nil where Results holds the answer
}

// NewPartialError returns errs[0] itself for a single check, so a lone
// check's error keeps its own code and message.
func NewPartialError(results []policy.Result, errs []error) error {
	if len(errs) == 1 {
		return errs[0]
	}
	return &PartialError{Results: results, Errs: errs}
}

func (e *PartialError) Error() string {
	for _, err := range e.Errs {
		if err != nil {
			return err.Error()
		}
	}
	return "partial result"
}

// Unwrap exposes the first item error, so a partial answer maps to the
// code of its failures.
func (e *PartialError) Unwrap() error {
	for _, err := range e.Errs {
		if err != nil {
			return err
		}
	}
	return nil
}
