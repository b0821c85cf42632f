package rpc

import (
	"context"
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/hashicorp/raft"
	"google.golang.org/grpc/codes"
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
