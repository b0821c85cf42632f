package rpc

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/floodgate/floodgate/cluster"
)

// movingOwner is a slot table that names group from, then, once moved is
// called, group to, and says so on MetaChanged.
type movingOwner struct {
	mu      sync.Mutex
	group   int
	changed chan struct{}
	lookups int
}

func (m *movingOwner) ShardOf(string) (int, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.lookups++
	return m.group, nil
}

func (m *movingOwner) MetaChanged() <-chan struct{} {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.changed
}

func (m *movingOwner) move(to int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.group = to
	close(m.changed)
	m.changed = make(chan struct{})
}

// A reset whose group no longer owns the key (its slot moved: the group
// answers ErrMoved, or a peer whose table is ahead answers wrong shard) is
// routed again once the table changes, to the new owner, within the wait.
// Before, the admin got Unavailable (or InvalidArgument) for a key that
// merely moved.
func TestResetRoutedAgainWhenTheSlotMoved(t *testing.T) {
	for name, refusal := range map[string]error{
		"local":                fmt.Errorf("shard-1: %w", cluster.ErrMoved),
		"peer, moved":          peerOwnerError("n2", status.Error(codes.Unavailable, "reset k: shard-1: "+cluster.ErrMoved.Error())),
		"peer, table ahead":    peerOwnerError("n2", status.Error(codes.InvalidArgument, "invalid request: shard: "+cluster.ErrWrongShard.Error())),
		"local, table changed": fmt.Errorf("%w: slot 7 is group 2's", cluster.ErrWrongShard),
	} {
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				m := &movingOwner{group: 1, changed: make(chan struct{})}
				var tried []int
				go func() {
					time.Sleep(30 * time.Millisecond) // the move's import lands
					m.move(2)
				}()
				start := time.Now()
				err := routedToOwner(context.Background(), m, "k", 2*time.Second, func(_ context.Context, shard int, _ time.Duration) error {
					tried = append(tried, shard)
					if shard == 1 {
						return refusal
					}
					return nil
				})
				if err != nil || tried[len(tried)-1] != 2 {
					t.Fatalf("err %v after trying groups %v", err, tried)
				}
				if took := time.Since(start); took > 100*time.Millisecond {
					t.Fatalf("took %v: did not follow the table's change", took)
				}
			})
		})
	}
}

// A group that keeps refusing the key fails the reset once the wait is
// over, with the refusal; any other error fails it at once.
func TestResetRoutedAgainGivesUp(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := &movingOwner{group: 1, changed: make(chan struct{})}
		start := time.Now()
		err := routedToOwner(context.Background(), m, "k", time.Second, func(context.Context, int, time.Duration) error {
			return cluster.ErrMoved
		})
		if !errors.Is(err, cluster.ErrMoved) || time.Since(start) < time.Second || time.Since(start) > 1100*time.Millisecond {
			t.Fatalf("%v after %v", err, time.Since(start))
		}
		m.lookups = 0
		boom := errors.New("boom")
		if err := routedToOwner(context.Background(), m, "k", time.Second, func(context.Context, int, time.Duration) error { return boom }); err != boom || m.lookups != 1 {
			t.Fatalf("%v after %d lookups", err, m.lookups)
		}
	})
}

// peerOwnerError leaves a peer's other refusals as they were.
func TestPeerResetErrorKeepsOtherRefusals(t *testing.T) {
	for _, err := range []error{
		status.Error(codes.Unavailable, "no leader"),
		status.Error(codes.InvalidArgument, "invalid request: key: must not be empty"),
	} {
		if got := peerOwnerError("n2", err); errors.Is(got, cluster.ErrMoved) || status.Code(got) != status.Code(err) {
			t.Errorf("%v became %v", err, got)
		}
	}
	if got := peerOwnerError("n2", status.Error(codes.PermissionDenied, "no")); status.Code(got) != codes.Unavailable {
		t.Errorf("a refusal of this node's credentials is %v", got)
	}
}
