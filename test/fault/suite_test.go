package fault

import (
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/floodgate/floodgate/cluster/hashing"
	pb "github.com/floodgate/floodgate/proto/floodgate/v1"
	"github.com/floodgate/floodgate/rpc/client"
	"github.com/floodgate/floodgate/test/e2e"
)

// The cluster and the load every scenario shares.
const (
	nodes       = 3
	slots       = 64   // a small table: join and leave move whole slots in a few rounds
	limit       = 1000 // per key, over an hour: nothing expires during a run
	maxPending  = 50   // --fast-max-pending: fast mode's bound is twice this per failover
	callTimeout = 4 * time.Second
	fastPolicy  = "fast"
)

// bin is the build under test; next is the same code stamped as a newer
// release, for the rolling upgrade; skewed is a test build whose clock
// FLOODGATE_TEST_CLOCK_SKEW moves (wallclock), for the clock skew.
var bin, next, skewed e2e.Binaries

func TestMain(m *testing.M) {
	flag.Parse()
	if testing.Short() {
		fmt.Println("fault: skipped in -short mode")
		os.Exit(0)
	}
	dir, err := os.MkdirTemp("", "floodgate-fault-bin")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if bin, err = e2e.Build(dir); err == nil {
		next, err = e2e.BuildVersion(filepath.Join(dir, "next"), nextVersion)
	}
	if err == nil {
		skewed, err = e2e.BuildTagged(filepath.Join(dir, "skewed"), "clockskew")
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// scenario is one subtest of TestFault.
type scenario struct {
	name string
	fast bool // checks under the fast-consistency policy, else strict inline
	// netns places every node in its own network namespace; disks mounts a
	// tmpfs on every data dir; stalls mounts a StallFS on every data dir.
	// All need root.
	netns, disks, stalls bool
	load                 time.Duration // planned length of the load
	nemesis              func(context.Context, *env) error
	// exact: no over-admission at all and linearizable; otherwise fast
	// mode's bound per failover of the hot shard applies.
	exact bool
	// hotKeys, if set, is the number of keys on the hot shard (default 3).
	hotKeys int
	// args are extra node flags.
	args []string
}

// spend is each key's share of the load, as multiples of its limit over
// the run: the first hot key runs out early (every later admission would
// be an over-admission), the second near the end, the others never; the
// control key, on another shard, near the end.
func (s scenario) spend() []float64 {
	out := []float64{2.5, 1.25, 0.8}
	for len(out) < max(s.hotKeys, 3) {
		out = append(out, 0.8)
	}
	return append(out[:max(s.hotKeys, 3)], 1.25)
}

// env is a running scenario.
type env struct {
	t     *testing.T
	c     *e2e.Cluster
	h     *History
	n     *Nemesis
	net   *Net
	disk  map[string]*Disk // by node id
	stall map[string]*StallFS
	keys  []string // hot keys first, then the control key
	hot   int      // the hot keys' group
	table []uint32 // slot → group when the scenario began
	// found are violations the nemesis saw itself (a node that failed
	// unclearly, a store it refused after a fault).
	found []string
}

// warmLeader lets the load run on a healthy cluster (warmup), then returns
// the hot shard's leader, the target of most faults.
func (e *env) warmLeader(ctx context.Context) (*e2e.Node, error) {
	if err := pause(ctx, warmup); err != nil {
		return nil, err
	}
	return e.n.Leader(ctx)
}

// recoveryBound is how soon the hot shard must answer a load call again
// after any fault with no bound of its own: the slowest, a restart of
// every node, takes about 3.7 s here.
const recoveryBound = 10 * time.Second

// minAnswered is how many load calls each key must have answered: about
// 500 to 1,700 are, in 20-40 s of load.
const minAnswered = 50

// violate records a violation seen by the nemesis.
func (e *env) violate(format string, args ...any) {
	e.found = append(e.found, fmt.Sprintf(format, args...))
}

func nodeArgs() []string {
	return []string{"--slots", fmt.Sprint(slots), "--fast-max-pending", fmt.Sprint(maxPending)}
}

// start brings up the scenario's cluster, placed as it asks.
func start(ctx context.Context, t *testing.T, s scenario) *env {
	e := &env{t: t, h: NewHistory(), disk: map[string]*Disk{}, stall: map[string]*StallFS{}}
	dir := t.TempDir()
	e.c = &e2e.Cluster{Bin: bin, Dir: dir, Args: append(nodeArgs(), s.args...)}
	t.Cleanup(func() {
		for _, n := range e.c.Nodes {
			_ = n.Signal(syscall.SIGCONT) // a paused node must not stall Close
		}
		for _, s := range e.stall {
			s.Release() // a node waiting on its disk must not stall Close
		}
		if t.Failed() {
			t.Log(e.c.Logs(25))
		}
		e.c.Close()
		for _, d := range e.disk {
			_ = d.Unmount()
		}
		for _, s := range e.stall {
			_ = s.Unmount()
		}
		if e.net != nil {
			e.net.Close()
		}
	})
	if s.netns {
		var err error
		if e.net, err = NewNet(nodes); err != nil {
			t.Fatal(err)
		}
	}
	for i := 0; i < nodes; i++ {
		node, err := e.newNode(fmt.Sprintf("n%d", i+1), i, s)
		if err != nil {
			t.Fatal(err)
		}
		var join []string
		if i > 0 {
			join = []string{e.c.Nodes[0].GRPC}
		}
		if err := node.Start(join...); err != nil {
			t.Fatal(err)
		}
		if err := node.WaitServing(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if err := e.c.WaitSettled(ctx); err != nil {
		t.Fatal(err)
	}
	// --slots only counts when a cluster is created; a node restarting
	// without it (default 4096) must still use the cluster's 64.
	for _, n := range e.c.Nodes {
		n.Args = withoutSlots(n.Args)
	}
	st, err := e.c.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	e.pickKeys(st, len(s.spend())-1)
	e.n = &Nemesis{C: e.c, H: e.h, Shard: e.hot, Rand: rand.New(rand.NewPCG(uint64(len(s.name)), 42))}
	if s.fast {
		_, err := e.c.Nodes[0].Admin().SetPolicies(ctx, &pb.SetPoliciesRequest{Policies: []*pb.Policy{{
			Name:        fastPolicy,
			Consistency: pb.Consistency_CONSISTENCY_FAST,
			Limits:      []*pb.PolicyLimit{{Name: "hour", Limit: hourLimit()}},
		}}})
		if err != nil {
			t.Fatal(err)
		}
	}
	return e
}

// newNode prepares node id (index i): on loopback, or in namespace i.
func (e *env) newNode(id string, i int, s scenario) (*e2e.Node, error) {
	var node *e2e.Node
	if e.net != nil {
		wrap, err := e.net.Wrapper(e.c.Dir, bin.Floodgate, i)
		if err != nil {
			return nil, err
		}
		if node, err = e2e.NewNodeAt(e2e.Binaries{Floodgate: wrap, Ctl: bin.Ctl}, e.c.Dir, id, e.net.Addr(i), 7700, e.c.Args...); err != nil {
			return nil, err
		}
		e.c.Nodes = append(e.c.Nodes, node)
	} else {
		var err error
		if node, err = e.c.NewNode(id); err != nil {
			return nil, err
		}
	}
	if s.disks {
		d, err := MountDisk(node.Dir, "128m")
		if err != nil {
			return nil, err
		}
		e.disk[id] = d
	}
	if s.stalls {
		st, err := MountStallFS(node.Dir)
		if err != nil {
			return nil, err
		}
		e.stall[id] = st
	}
	return node, nil
}

// pickKeys makes the group led by the second node hot (not the node the
// others joined through) and adds a control key on a group led elsewhere.
func (e *env) pickKeys(st *pb.StatusResponse, hot int) {
	e.hot, e.keys = -1, nil
	e.table = make([]uint32, slots)
	if int(st.Slots) != slots {
		e.t.Fatalf("the cluster has %d slots, not %d", st.Slots, slots)
	}
	for _, r := range st.SlotTable {
		for s := r.First; s < r.First+r.Count; s++ {
			e.table[s] = uint32(r.Group)
		}
	}
	control := -1
	for _, s := range st.ShardStatus {
		switch {
		case e.hot < 0 && s.Leader == e.c.Nodes[1].ID:
			e.hot = int(s.Id)
		case control < 0 && s.Leader != e.c.Nodes[1].ID:
			control = int(s.Id)
		}
	}
	if e.hot < 0 || control < 0 {
		e.t.Fatalf("no group led by %s, or none led by another node: %v", e.c.Nodes[1].ID, st.ShardStatus)
	}
	for i := 0; len(e.keys) < hot+1; i++ {
		k := fmt.Sprintf("hot-%d", i)
		if hashing.ShardOf(k, slots) == 0 {
			// Slot 0 is where a node that lost track of the slot count
			// would put every key: keys there would hide that bug.
			continue
		}
		sh := e.groupOf(k)
		if (sh == e.hot && len(e.keys) < hot) || (sh == control && len(e.keys) == hot) {
			e.keys = append(e.keys, k)
		}
	}
}

// groupOf is the group a key's slot belonged to when the scenario began
// (slots move only in the join-leave and kill-mid-move scenarios).
func (e *env) groupOf(k string) int {
	return int(e.table[hashing.ShardOf(k, slots)])
}

func withoutSlots(args []string) []string {
	var out []string
	for i := 0; i < len(args); i++ {
		if args[i] == "--slots" {
			i++
			continue
		}
		out = append(out, args[i])
	}
	return out
}

func hourLimit() *pb.Limit {
	return &pb.Limit{Algorithm: pb.Algorithm_SLIDING_LOG, Limit: limit, WindowMs: time.Hour.Milliseconds()}
}

// request builds the scenario's check.
func (s scenario) request(key string, cost int64) *pb.AllowRequest {
	if s.fast {
		return &pb.AllowRequest{Key: key, Policy: fastPolicy, Cost: &cost}
	}
	return &pb.AllowRequest{Key: key, Limit: hourLimit(), Cost: &cost}
}

// pinned is a raw RateLimiter client of one node.
func pinned(n *e2e.Node) Caller {
	return Caller{Via: n.ID, Allow: func(ctx context.Context, r *pb.AllowRequest) (*pb.AllowResponse, error) {
		return n.Limiter().Allow(ctx, r)
	}, Up: n.Running}
}

var (
	reportsMu sync.Mutex
	reports   []Report
)

// needNet skips a test that needs namespaces and mounts where they cannot
// be had, and fails it in CI, which runs as root with iproute2 (.ci/run
// installs it): there a test it cannot run is a broken setup, not a skip.
func needNet(t *testing.T) {
	t.Helper()
	if why := NetAvailable(); why != "" {
		if os.Getenv("CI") != "" {
			t.Fatalf("needs namespaces and mounts: %s", why)
		}
		t.Skipf("needs namespaces and mounts (root and iproute2): %s", why)
	}
}

// run starts the scenario's cluster, runs the load and the nemesis
// together, heals, reads the final counts, checks and reports.
func run(t *testing.T, s scenario) {
	if s.netns || s.disks || s.stalls {
		needNet(t)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	e := start(ctx, t, s)
	sdk, err := client.New(ctx, client.Options{Addrs: addrs(e.c.Nodes), RefreshInterval: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer sdk.Close()
	callers := []Caller{{Via: "sdk", Allow: func(ctx context.Context, r *pb.AllowRequest) (*pb.AllowResponse, error) {
		return sdk.Allow(ctx, r)
	}}}
	for _, n := range e.c.Nodes {
		callers = append(callers, pinned(n))
	}
	const workers = 2
	spend := s.spend()
	load := &Load{H: e.h, Callers: callers, Workers: workers, Keys: e.keys, Spend: spend, Request: s.request,
		Interval: Pace(s.load, workers*len(callers), limit, spend), Timeout: callTimeout, Seed: 7}
	t.Logf("hot shard %d (leader %s), keys %v, one call per %s per worker", e.hot, e.c.Nodes[1].ID, e.keys, load.Interval.Round(time.Millisecond))

	stop := make(chan struct{})
	loadDone := make(chan struct{})
	begun := time.Now()
	e.h.Restart() // times count from the start of the load
	go func() {
		defer close(loadDone)
		load.Run(ctx, stop, 3*s.load) // bounded even if the nemesis overruns
	}()
	if err := s.nemesis(ctx, e); err != nil {
		t.Errorf("nemesis: %v", err) // a harness failure: the checks still run
	}
	// Keep the load going for the planned time, and a little after the
	// last fault so recovery is observed.
	_ = pause(ctx, max(time.Until(begun.Add(s.load)), 3*time.Second))
	close(stop)
	<-loadDone
	loadEnd := e.h.Since()

	for _, n := range e.c.Nodes {
		if !n.Running() {
			if err := n.Start(); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := e.n.Settle(ctx, 60*time.Second); err != nil {
		t.Errorf("after the scenario: %v", err)
	}
	final := e.finalCounts(ctx, s)
	spec := Spec{Limit: limit, Linearizable: s.exact, LinTimeout: 60 * time.Second, VisualDir: t.TempDir(), LoadEnd: loadEnd,
		Recovery: recoveryBound, MinAnswered: minAnswered, RunOut: e.keys[:1], Keys: e.keys}
	if !s.exact {
		for _, f := range e.h.Faults() {
			if f.LeaderLost {
				spec.Slack += 2 * (maxPending + maxCost)
			}
		}
	}
	r := Check(s.name, e.h.Ops(), e.h.Faults(), spec, e.groupOf, e.hot, final)
	r.NotSent, r.Refused = e.h.NotSent(), e.h.Refused()
	r.Violations = append(r.Violations, e.found...)
	t.Log("\n" + r.Detail())
	for _, v := range r.Violations {
		t.Error(v)
	}
	reportsMu.Lock()
	reports = append(reports, r)
	reportsMu.Unlock()
}

// finalCounts peeks every key through every node (recorded: they are part
// of the history) and returns limit − remaining of the last answer.
func (e *env) finalCounts(ctx context.Context, s scenario) map[string]int64 {
	final := map[string]int64{}
	for _, key := range e.keys {
		for i, n := range e.c.Running() {
			_, err := waitFor(ctx, "a final peek of "+key, func(ctx context.Context) (Op, error) {
				op := e.h.Do(ctx, 1000+i, pinned(n), s.request(key, 0), callTimeout)
				if op.Outcome == Unknown {
					return op, fmt.Errorf("%s", op.Err)
				}
				final[key] = limit - op.Remaining
				return op, nil
			})
			if err != nil {
				e.t.Errorf("%s via %s: %v", key, n.ID, err)
			}
		}
	}
	return final
}

// TestFault runs every scenario, one after the other, and prints the
// summary table.
func TestFault(t *testing.T) {
	for _, s := range scenarios() {
		t.Run(s.name, func(t *testing.T) { run(t, s) })
	}
	reportsMu.Lock()
	defer reportsMu.Unlock()
	if len(reports) > 0 {
		t.Log("\n" + Table(reports))
	}
}

func addrs(ns []*e2e.Node) []string {
	out := make([]string, len(ns))
	for i, n := range ns {
		out[i] = n.GRPC
	}
	return out
}

// names lists node ids for fault records.
func names(ns ...*e2e.Node) string {
	ids := make([]string, len(ns))
	for i, n := range ns {
		ids[i] = n.ID
	}
	return strings.Join(ids, ",")
}
