package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	pb "github.com/floodgate/floodgate/proto/floodgate/v1"
)

// 100 clients spread over all three nodes hammer one key limited to 50:
// exactly 50 requests are admitted, whichever node they arrive at.
func TestExactLimitUnderConcurrency(t *testing.T) {
	t.Parallel()
	c := startCluster(t, 3)
	for _, lim := range []*pb.Limit{
		slidingLog(50, time.Minute),
		{Algorithm: pb.Algorithm_SLIDING_COUNTER, Limit: 50, WindowMs: time.Hour.Milliseconds()},
	} {
		key := "user:concurrent:" + lim.Algorithm.String()
		var allowed, denied atomic.Int64
		var wg sync.WaitGroup
		errs := make(chan error, 300)
		for i := 0; i < 100; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				node := c.Nodes[i%3]
				for j := 0; j < 3; j++ {
					ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
					resp, err := node.Limiter().Allow(ctx, &pb.AllowRequest{Key: key, Limit: lim})
					cancel()
					switch {
					case err != nil:
						errs <- err
					case resp.Allowed:
						allowed.Add(1)
					default:
						denied.Add(1)
					}
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Errorf("%s: %v", lim.Algorithm, err)
		}
		if allowed.Load() != 50 || denied.Load() != 250 {
			t.Errorf("%s: %d allowed and %d denied of 300, want exactly 50 and 250", lim.Algorithm, allowed.Load(), denied.Load())
		}
	}
}

// Killing the leader of a busy shard with kill -9: checks are answered
// again within 2 seconds, and no key is ever admitted beyond its limit.
func TestKillBusyShardLeader(t *testing.T) {
	c := startCluster(t, 3)
	ctx := context.Background()
	st, err := c.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	const shard, perKey = 1, 40
	leaderID := st.ShardStatus[shard].Leader
	var leader *Node
	var survivors []*Node
	for _, n := range c.Nodes {
		if n.ID == leaderID {
			leader = n
		} else {
			survivors = append(survivors, n)
		}
	}
	keys := keysInShard(st, "busy", shard, 16)
	lim := slidingLog(perKey, time.Minute)

	var (
		mu        sync.Mutex
		allowed   = map[string]int{}
		unknown   = map[string]int{} // answers that may or may not have counted
		lastOK    time.Time
		killedAt  time.Time
		firstOK   time.Time // first answer after the kill
		stop      = make(chan struct{})
		wg        sync.WaitGroup
		invalid   atomic.Int64
		requested atomic.Int64
	)
	for w := 0; w < 24; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			node := survivors[w%len(survivors)]
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				key := keys[(w+i)%len(keys)]
				sent := time.Now()
				rctx, cancel := context.WithTimeout(ctx, 3*time.Second)
				resp, err := node.Limiter().Allow(rctx, &pb.AllowRequest{Key: key, Limit: lim})
				cancel()
				requested.Add(1)
				now := time.Now()
				mu.Lock()
				switch {
				case err == nil:
					lastOK = now
					// Only a call sent after the kill shows a failover:
					// one sent before may have been answered before it.
					if !killedAt.IsZero() && sent.After(killedAt) && firstOK.IsZero() {
						firstOK = now
					}
					if resp.Allowed {
						allowed[key]++
					}
				case status.Code(err) == codes.InvalidArgument:
					invalid.Add(1)
				default:
					unknown[key]++
				}
				mu.Unlock()
				// Pace the load so the window outlasts the test: each key
				// reaches its limit over the whole run, not at once.
				time.Sleep(20 * time.Millisecond)
			}
		}()
	}
	time.Sleep(1500 * time.Millisecond)
	mu.Lock()
	killedAt = time.Now()
	mu.Unlock()
	leader.Kill()
	time.Sleep(4 * time.Second)
	mu.Lock()
	stopped := time.Now() // calls still out may take their 3s: not a gap
	mu.Unlock()
	close(stop)
	wg.Wait()

	if invalid.Load() > 0 {
		t.Fatalf("%d invalid-argument answers", invalid.Load())
	}
	if firstOK.IsZero() {
		t.Fatalf("no answer after killing %s (%d requests)", leaderID, requested.Load())
	}
	if gap := firstOK.Sub(killedAt); gap > 2*time.Second {
		t.Errorf("first answer %s after killing the leader, want within 2s", gap)
	} else {
		t.Logf("shard %d answered again %s after its leader %s was killed", shard, gap.Round(time.Millisecond), leaderID)
	}
	if gap := stopped.Sub(lastOK); gap > time.Second {
		t.Errorf("no answer in the last %s before the load stopped", gap)
	}
	for _, k := range keys {
		if allowed[k] > perKey {
			t.Errorf("key %s admitted %d times, limit %d", k, allowed[k], perKey)
		}
		if allowed[k]+unknown[k] < perKey {
			t.Errorf("key %s: %d admitted and %d unknown, expected the load to reach the limit %d", k, allowed[k], unknown[k], perKey)
		}
	}
}

// A fourth node joined with floodgatectl gets replicas; a node drained
// with floodgatectl leave gives them up without any shard losing quorum.
func TestJoinAndLeaveWithCtl(t *testing.T) {
	t.Parallel()
	c := startCluster(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	n4, err := c.NewNode("n4")
	if err != nil {
		t.Fatal(err)
	}
	if err := n4.Start(); err != nil {
		t.Fatal(err)
	}
	if err := n4.WaitServing(ctx); err != nil {
		t.Fatal(err)
	}
	if out, err := c.Ctl(ctx, c.Nodes[0].GRPC, "join", n4.GRPC); err != nil || !strings.Contains(out, "node n4 joined cluster") {
		t.Fatalf("join: %q %v", out, err)
	}
	if err := c.WaitSettled(ctx); err != nil {
		t.Fatal(err)
	}
	// Joined again (a retry): nothing changes, and the tool says so.
	if out, err := c.Ctl(ctx, c.Nodes[1].GRPC, "join", n4.GRPC); err != nil || !strings.Contains(out, "node n4 was a member of cluster") {
		t.Fatalf("join of a member: %q %v", out, err)
	}
	out, err := c.Ctl(ctx, n4.GRPC, "status", "--json")
	if err != nil {
		t.Fatal(err)
	}
	var st struct {
		Nodes []struct {
			ID       string `json:"id"`
			Replicas int    `json:"replicas"`
		} `json:"nodes"`
		ShardStatus []struct {
			Leader string `json:"leader"`
		} `json:"shard_status"`
	}
	if err := json.Unmarshal([]byte(out), &st); err != nil {
		t.Fatalf("status --json: %v\n%s", err, out)
	}
	var n4Replicas int
	for _, n := range st.Nodes {
		if n.ID == "n4" {
			n4Replicas = n.Replicas
		}
	}
	if n4Replicas == 0 {
		t.Fatalf("n4 got no replicas:\n%s", out)
	}
	for i, s := range st.ShardStatus {
		if s.Leader == "" {
			t.Fatalf("shard %d has no leader:\n%s", i, out)
		}
	}

	// While n2 drains, probe every shard through n1: each probe must be
	// answered, or some shard lost its quorum.
	full, err := c.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	keys := oneKeyPerShard(full, "probe")
	probeErrs := make(chan error, 1000)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var probes atomic.Int64
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			for _, k := range keys {
				select {
				case <-stop:
					return
				default:
				}
				pctx, pcancel := context.WithTimeout(ctx, 5*time.Second)
				_, err := c.Nodes[0].Limiter().Allow(pctx, &pb.AllowRequest{Key: k, Limit: slidingLog(1000, time.Second), Cost: cost(0)})
				pcancel()
				probes.Add(1)
				if err != nil {
					probeErrs <- err
				}
			}
		}
	}()
	if _, err := c.Ctl(ctx, c.Nodes[0].GRPC, "leave", "n2"); err != nil {
		t.Fatal(err)
	}
	select {
	case <-c.Nodes[1].Exited():
	case <-time.After(30 * time.Second):
		t.Error("n2 did not exit after leaving")
	}
	close(stop)
	wg.Wait()
	close(probeErrs)
	for err := range probeErrs {
		t.Errorf("probe during leave: %v", err)
	}
	c.Nodes[1].Kill()
	if err := c.WaitSettled(ctx); err != nil {
		t.Fatal(err)
	}
	final, err := c.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range final.Nodes {
		if n.Id == "n2" {
			t.Fatalf("n2 still a member: %v", n)
		}
	}
	for _, s := range final.ShardStatus {
		for _, r := range s.Replicas {
			if r.NodeId == "n2" {
				t.Fatalf("shard %d still has n2", s.Id)
			}
		}
	}
	t.Logf("%d probes answered while n2 drained", probes.Load())
}

// Stopping every node (kill -9) and starting them again on their data
// keeps every count inside its window.
func TestFullRestartKeepsCounts(t *testing.T) {
	t.Parallel()
	c := startCluster(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	st, err := c.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	keys := keysInShard(st, "restart", 0, 6)
	keys = append(append(keys, keysInShard(st, "restart", 1, 5)...), keysInShard(st, "restart", 2, 5)...)
	lims := []*pb.Limit{
		slidingLog(10, time.Hour),
		{Algorithm: pb.Algorithm_SLIDING_COUNTER, Limit: 10, WindowMs: time.Hour.Milliseconds()},
	}
	for i, k := range keys {
		for _, lim := range lims {
			resp, err := c.Nodes[i%3].Limiter().Allow(ctx, &pb.AllowRequest{Key: k, Limit: lim, Cost: cost(7)})
			if err != nil || !resp.Allowed {
				t.Fatalf("%s: %v %v", k, resp, err)
			}
		}
	}
	for _, n := range c.Nodes {
		n.Kill()
	}
	for _, n := range c.Nodes {
		if err := n.Start(); err != nil {
			t.Fatal(err)
		}
	}
	for _, n := range c.Nodes {
		if err := n.WaitServing(ctx); err != nil {
			t.Fatal(err)
		}
	}
	for i, k := range keys {
		for _, lim := range lims {
			resp, err := c.Nodes[(i+1)%3].Limiter().Allow(ctx, &pb.AllowRequest{Key: k, Limit: lim, Cost: cost(0)})
			if err != nil {
				t.Fatalf("%s after restart: %v", k, err)
			}
			if resp.Remaining != 3 {
				t.Errorf("%s %s: %d remaining after restart, want 3 (7 of 10 used before)", k, lim.Algorithm, resp.Remaining)
			}
		}
	}
}

// A node that made a cluster of its own (a first start without --join)
// and is restarted with --join to another cluster refuses to start, naming
// both clusters, instead of resuming its own silently: two limiters where
// the operator meant one. Restarted without --join, it resumes.
func TestJoinRefusedForALoneClustersDataDir(t *testing.T) {
	t.Parallel()
	c := startCluster(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	lone, err := NewNode(c.Bin, t.TempDir(), "lone")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(lone.Close)
	if err := lone.Start(); err != nil {
		t.Fatal(err)
	}
	if err := lone.WaitServing(ctx); err != nil {
		t.Fatal(err)
	}
	lone.Stop()
	if err := lone.Start(c.Nodes[0].GRPC); err != nil {
		t.Fatal(err)
	}
	select {
	case <-lone.Exited():
	case <-ctx.Done():
		t.Fatalf("still running with --join to another cluster:\n%s", tail(lone.Log(), 20))
	}
	if log := lone.Log(); !strings.Contains(log, "join: "+c.Nodes[0].GRPC+" belongs to cluster") || !strings.Contains(log, "of this node alone") {
		t.Fatalf("no error naming both clusters:\n%s", tail(log, 10))
	}
	if st, err := c.Status(ctx); err != nil || len(st.Nodes) != 3 {
		t.Fatalf("the other cluster changed: %v %v", st, err)
	}
	lone.Stop() // reaps the exited process
	if err := lone.Start(); err != nil {
		t.Fatal(err)
	}
	if err := lone.WaitServing(ctx); err != nil {
		t.Fatalf("without --join it does not resume: %v", err)
	}
}

// A second process started with a live member's --node-id (and a fresh
// data dir) is refused by name, and the member keeps its addresses: it
// would otherwise take the member's Raft traffic. The refusal is retried
// (a member whose old process just died is taken once gossip says so).
func TestJoinWithALiveMembersIDIsRefused(t *testing.T) {
	t.Parallel()
	c := startCluster(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	twin, err := NewNode(c.Bin, t.TempDir(), c.Nodes[1].ID)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(twin.Close)
	if err := twin.Start(c.Nodes[0].GRPC); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ctx, "the twin's refusal", func() error {
		if !strings.Contains(twin.Log(), "node.id: "+twin.ID+" is a live member at "+c.Nodes[1].Gossip) {
			return fmt.Errorf("no error naming the live member yet:\n%s", tail(twin.Log(), 5))
		}
		// A member answered: the wait is for the live member to go, not
		// for an answer.
		if !strings.Contains(twin.Log(), "a live member has this --node-id; waiting for it to stop") || strings.Contains(twin.Log(), "no member answered") {
			return fmt.Errorf("the wait is not said to be for the live member:\n%s", tail(twin.Log(), 5))
		}
		return nil
	})
	st, err := c.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range st.Nodes {
		if m.Id == twin.ID && (m.RaftAddr != c.Nodes[1].Raft || m.GrpcAddr != c.Nodes[1].GRPC) {
			t.Fatalf("the member's addresses moved: %v", m)
		}
	}
}
