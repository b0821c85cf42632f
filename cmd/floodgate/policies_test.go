package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/floodgate/floodgate/cluster"
	"github.com/floodgate/floodgate/fsm"
	"github.com/floodgate/floodgate/policy"
	"github.com/floodgate/floodgate/window"
)

// laggingNode is a node whose meta state shows the cluster's policies
// only once caught up with the meta leader, as one restarted on its data
// (its last snapshot) or still replaying the log.
type laggingNode struct {
	mu        sync.Mutex
	cluster   map[string]*policy.Policy // the meta leader's
	caughtUp  bool
	catchUpOK bool // whether CatchUpMeta reaches the leader
	catchUps  int
	sets      int
	refuse    error // SetPolicies' error, when set
}

func (n *laggingNode) CatchUpMeta(context.Context) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.catchUps++
	if !n.catchUpOK {
		return errors.New("no meta leader")
	}
	n.caughtUp = true
	return nil
}

func (n *laggingNode) View() *fsm.MetaView {
	n.mu.Lock()
	defer n.mu.Unlock()
	if !n.caughtUp {
		return &fsm.MetaView{}
	}
	return &fsm.MetaView{Policies: n.cluster}
}

func (n *laggingNode) SetPolicies(_ context.Context, ps []*policy.Policy) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.sets++
	if n.refuse != nil {
		return n.refuse
	}
	for _, p := range ps {
		n.cluster[p.Name] = p
	}
	return nil
}

func (n *laggingNode) counts() (catchUps, sets int) {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.catchUps, n.sets
}

func seedPolicy(name string, limit int64) *policy.Policy {
	return &policy.Policy{Name: name, Limits: []policy.Limit{{Limit: window.Limit{Algorithm: window.SlidingLog, Limit: limit, Window: int64(time.Minute)}}}}
}

// --policies seeds a cluster only when the cluster has none, judged on a
// meta state caught up with the meta leader's. It used to judge on the
// node's own state, which a node restarted on its data takes from its
// last snapshot: one taken before the first policies were applied made
// the node store the file's policies over the operator's.
func TestSeedPoliciesWaitsForTheMetaLeader(t *testing.T) {
	log := slog.New(slog.DiscardHandler)
	file := []*policy.Policy{seedPolicy("api", 5)}

	t.Run("the cluster has policies", func(t *testing.T) {
		applied := seedPolicy("api", 100)
		n := &laggingNode{cluster: map[string]*policy.Policy{"api": applied}, catchUpOK: true}
		seedPolicies(context.Background(), n, file, log)
		if _, sets := n.counts(); sets != 0 || n.cluster["api"] != applied {
			t.Fatalf("%d writes: the file's policies replaced the cluster's (limit %d)", sets, n.cluster["api"].Limits[0].Limit.Limit)
		}
	})

	t.Run("a new cluster", func(t *testing.T) {
		n := &laggingNode{cluster: map[string]*policy.Policy{}, catchUpOK: true}
		seedPolicies(context.Background(), n, file, log)
		if _, sets := n.counts(); sets != 1 || n.cluster["api"] == nil {
			t.Fatalf("%d writes, want the file's policies stored once", sets)
		}
	})

	t.Run("no meta leader", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			applied := seedPolicy("api", 100)
			n := &laggingNode{cluster: map[string]*policy.Policy{"api": applied}}
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan struct{})
			go func() { seedPolicies(ctx, n, file, log); close(done) }()
			time.Sleep(10 * time.Second)
			synctest.Wait()
			if catchUps, sets := n.counts(); sets != 0 || catchUps < 2 {
				t.Fatalf("without a meta leader: %d writes, %d catch-ups; want none, and tries again", sets, catchUps)
			}
			n.mu.Lock()
			n.catchUpOK = true
			n.mu.Unlock()
			time.Sleep(2 * time.Second)
			synctest.Wait()
			<-done
			cancel()
			if _, sets := n.counts(); sets != 0 || n.cluster["api"] != applied {
				t.Fatalf("once caught up: %d writes; want none", sets)
			}
		})
	})

	t.Run("the policies refused", func(t *testing.T) {
		// The meta leader's cap is lower than this node's: the same write
		// fails alike every time, so it is not retried for a minute under
		// a message that blamed an unanswering meta group.
		synctest.Test(t, func(t *testing.T) {
			n := &laggingNode{cluster: map[string]*policy.Policy{}, catchUpOK: true,
				refuse: fmt.Errorf("%w: invalid request: policies[0].limits[0].limit: capped at 10000", cluster.ErrConfig)}
			var logged bytes.Buffer
			start := time.Now()
			seedPolicies(context.Background(), n, file, slog.New(slog.NewTextHandler(&logged, nil)))
			if _, sets := n.counts(); sets != 1 || time.Since(start) > 0 {
				t.Errorf("a refused seed: %d writes over %v, want one at once", sets, time.Since(start))
			}
			if out := logged.String(); !strings.Contains(out, "refused") || !strings.Contains(out, "capped at 10000") || strings.Contains(out, "retrying") {
				t.Errorf("log %q: want the refusal and its reason, no retry", out)
			}
		})
	})
}
