package rpc

import (
	"context"
	"errors"
	"fmt"
	"net"
	"testing"
	"testing/synctest"
	"time"

	"github.com/hashicorp/raft"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	"github.com/floodgate/floodgate/cluster"
)

// localLeader routes every group to this node.
type localLeader struct{}

func (localLeader) ID() string { return "n1" }
func (localLeader) Route(int) (cluster.Route, error) {
	return cluster.Route{Local: true, NodeID: "n1"}, nil
}

// onLeader sends a call again only when its first try was written
// nowhere, or when it only reads: a reset or a restore whose entry may
// have been applied (the leadership lost after it was written) is not
// sent again, which would erase what was counted between the two. A bad
// request or one too large is never sent again.
func TestOnLeaderRetries(t *testing.T) {
	notLeader := &cluster.NotLeaderError{Group: "shard-0"}
	lost := fmt.Errorf("shard-0: %w: %w", cluster.ErrUnavailable, raft.ErrLeadershipLost)
	tooLarge := status.Error(codes.ResourceExhausted, "message larger than max")
	for _, tc := range []struct {
		name     string
		first    error
		readOnly bool
		calls    int
	}{
		{"write, not the leader", notLeader, false, 2},
		{"write, written and lost", lost, false, 1},
		{"write, invalid", ErrInvalid, false, 1},
		{"read, not the leader", notLeader, true, 2},
		{"read, written and lost", lost, true, 2},
		{"read, invalid", ErrInvalid, true, 1},
		{"read, too large", tooLarge, true, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				calls := 0
				err := onLeader(context.Background(), localLeader{}, 0, time.Second, tc.readOnly, func(context.Context, cluster.Route) error {
					calls++
					if calls == 1 {
						return tc.first
					}
					return nil
				})
				if calls != tc.calls {
					t.Fatalf("called %d times (err %v), want %d", calls, err, tc.calls)
				}
				if (calls == 1) != (err != nil) {
					t.Fatalf("err %v after %d calls", err, calls)
				}
			})
		})
	}
}

// A peer's failure of a write sent on this node's behalf (a reset, a
// restore's group) is sent again only when it was written nowhere: never
// sent, or refused before the peer wrote it (the peer's message names
// why). One whose outcome is unknown, a refusal of the request, or of
// this node's credentials, is final; a group that no longer owns the key
// is routed again. Before, every remote refusal was final once resets
// stopped resending unknown outcomes: a reset reaching a stale leader
// failed instead of following the new one.
func TestPeerWriteError(t *testing.T) {
	sentTo := &peer.Peer{Addr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 7000}}
	unavailable := func(msg string) error { return status.Error(codes.Unavailable, msg) }
	notLeader := (&cluster.NotLeaderError{Group: "shard-0", LeaderID: "n3", LeaderAddr: "127.0.0.1:7003"}).Error()
	for _, tc := range []struct {
		name  string
		err   error
		p     *peer.Peer
		retry bool
		moved bool
		code  codes.Code
	}{
		{"never sent", unavailable("connection refused"), &peer.Peer{}, true, false, codes.Unavailable},
		{"not the leader", unavailable(notLeader), sentTo, true, false, codes.Unavailable},
		{"no leader", unavailable("shard-0: " + cluster.ErrNoLeader.Error()), sentTo, true, false, codes.Unavailable},
		{"not ready", unavailable(cluster.ErrNotReady.Error()), sentTo, true, false, codes.Unavailable},
		{"written and lost", unavailable(fmt.Sprintf("shard-0: %v: %v", cluster.ErrUnavailable, raft.ErrLeadershipLost)), sentTo, false, false, codes.Unavailable},
		{"lost, after a not-leader", unavailable(fmt.Sprintf("%s: %v", notLeader, cluster.ErrUnavailable)), sentTo, false, false, codes.Unavailable},
		{"moved", unavailable("reset k: shard-1: " + cluster.ErrMoved.Error()), sentTo, false, true, codes.Unavailable},
		{"invalid", status.Error(codes.InvalidArgument, "key: must not be empty"), sentTo, false, false, codes.InvalidArgument},
		{"credentials", status.Error(codes.PermissionDenied, "no"), sentTo, false, false, codes.Unavailable},
	} {
		got := peerWriteError("n2", tc.err, tc.p)
		moved := errors.Is(got, cluster.ErrMoved)
		retry := cluster.Retryable(got) && !moved // a moved key is routed again, not resent
		if retry != tc.retry || moved != tc.moved || codeOf(got) != tc.code {
			t.Errorf("%s: %v: resent %v, moved %v, code %v; want %v, %v, %v", tc.name, got, retry, moved, codeOf(got), tc.retry, tc.moved, tc.code)
		}
	}
}
