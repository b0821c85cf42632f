package cluster

import (
	"errors"
	"fmt"
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
	// ErrUnavailable means the write was handed to Raft but its outcome is
	// unknown (leadership lost, commit timed out): it may or may not have
	// been applied, so it must not be retried.
	ErrUnavailable = errors.New("outcome unknown")
	// ErrNotFresh refuses to move a node with its own members or data into
	// another cluster.
	ErrNotFresh = errors.New("node is not fresh")
	// ErrUnknownNode names a node that is not a member.
	ErrUnknownNode = errors.New("unknown node")
	// ErrClosed means the node is shutting down.
	ErrClosed = errors.New("node closed")
	// ErrNotReady means the node has not joined a cluster yet.
	ErrNotReady = errors.New("node not part of a cluster yet")
	// ErrDamaged means a Raft log file failed its consistency check.
	ErrDamaged = errors.New("damaged raft log")
	// ErrDataDirInUse means another process holds the data dir's lock.
	ErrDataDirInUse = errors.New("data dir in use")
	// ErrWrongShard refuses a check sent to a shard that does not own its
	// key: counting it there would leave the key's own shard untouched.
	ErrWrongShard = errors.New("key does not belong to this shard")
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
// outcome (ErrUnavailable) never is, even when it wraps one of those. This
// is the one retry rule of the Allow path.
func Retryable(err error) bool {
	if err == nil || errors.Is(err, ErrUnavailable) {
		return false
	}
	return errors.Is(err, ErrNotLeader) || errors.Is(err, ErrNoLeader) || errors.Is(err, ErrNotReady)
}
