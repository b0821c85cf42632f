package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	peerv1 "github.com/floodgate/floodgate/proto/floodgate/peer/v1"
	pb "github.com/floodgate/floodgate/proto/floodgate/v1"
)

// badFixture is a running cluster with a policy and two counters whose
// state every bad input must leave as it was.
type badFixture struct {
	c      *Cluster
	shards int
	// watch are the counters peeked after every input, with what must
	// remain of each.
	watch []watched
}

// watched is a counter and the number it must still have left.
type watched struct {
	req  *pb.AllowRequest // a peek: cost 0
	left int64
}

// state is what a bad input must not change: every replica's last Raft
// log index (shards and meta), and the stored policies. term is each
// group's highest term: a group that held an election meanwhile (a loaded
// machine) has a new leader's first entry in its log, which is no write.
type state struct {
	last     map[string]uint64
	term     map[int]uint64
	policies *pb.ListPoliciesResponse
}

func (f *badFixture) peer(i int) peerv1.PeerClient { return peerv1.NewPeerClient(f.c.Nodes[i].Conn()) }

// capture reads the state once replication is quiet: every replica of a
// group at the same last index (a peek just made may still be on its way
// to followers, and must not count as a change).
func (f *badFixture) capture(t *testing.T) state {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for {
		st, quiet, err := f.read(ctx)
		if err == nil && quiet {
			return st
		}
		select {
		case <-ctx.Done():
			t.Fatalf("replication never went quiet: %v", err)
		case <-time.After(10 * time.Millisecond):
		}
	}
}

func (f *badFixture) read(ctx context.Context) (state, bool, error) {
	st := state{last: map[string]uint64{}, term: map[int]uint64{}}
	quiet := true
	for g := -1; g < f.shards; g++ {
		var first *uint64
		for i, n := range f.c.Nodes {
			req := &peerv1.ShardProgressRequest{Shard: uint32(max(g, 0)), Meta: g < 0}
			p, err := f.peer(i).ShardProgress(ctx, req)
			if err != nil {
				return st, false, err
			}
			if !p.Present {
				continue
			}
			st.last[groupKey(n.ID, g)] = p.LastIndex
			st.term[g] = max(st.term[g], p.Term)
			if first == nil {
				first = &p.LastIndex
			} else if *first != p.LastIndex {
				quiet = false
			}
		}
	}
	var err error
	st.policies, err = f.c.Nodes[0].Admin().ListPolicies(ctx, &pb.ListPoliciesRequest{})
	return st, quiet, err
}

func groupKey(node string, g int) string { return fmt.Sprintf("%s/group%d", node, g) }

// unchanged fails t if anything moved between before and after, or a
// watched counter no longer has what it had. A group that changed term
// meanwhile may have grown by one entry per term, its new leaders' first
// (a bad input that made it write more, or made a leader of a node whose
// log was behind, is caught), and the meta group by one entry more per
// new term of a shard group (its new leader's report).
func (f *badFixture) unchanged(t *testing.T, before, after state) {
	t.Helper()
	shardTerms := uint64(0) // each shard group's new term: a report to the meta group
	for g := 0; g < f.shards; g++ {
		shardTerms += after.term[g] - before.term[g]
	}
	for g := -1; g < f.shards; g++ {
		terms := after.term[g] - before.term[g]
		if g < 0 {
			terms += shardTerms
		}
		if terms != 0 {
			t.Logf("group %d held an election (term %d to %d)", g, before.term[g], after.term[g])
		}
		for _, n := range f.c.Nodes {
			k := groupKey(n.ID, g)
			if v, ok := before.last[k]; ok && (after.last[k] < v || after.last[k] > v+terms) {
				t.Errorf("raft log of %s moved from %d to %d, allowed %d entries for new terms", k, v, after.last[k], terms)
			}
		}
	}
	if !proto.Equal(before.policies, after.policies) {
		t.Errorf("policies changed:\nbefore %v\nafter  %v", before.policies, after.policies)
	}
	f.countersUnchanged(t)
}

// countersUnchanged peeks (cost 0) at every watched counter.
func (f *badFixture) countersUnchanged(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for _, w := range f.watch {
		resp, err := f.c.Nodes[1].Limiter().Allow(ctx, w.req)
		for err != nil && status.Code(err) == codes.Unavailable && ctx.Err() == nil {
			// An election on a loaded machine: a peek changes nothing,
			// so asking again is safe.
			time.Sleep(50 * time.Millisecond)
			resp, err = f.c.Nodes[1].Limiter().Allow(ctx, w.req)
		}
		if err != nil {
			t.Errorf("peek %s: %v", w.req.Key+fmt.Sprint(w.req.Descriptors), err)
			continue
		}
		if resp.Remaining != w.left {
			t.Errorf("counter %s: %d left, want %d", resp.Key, resp.Remaining, w.left)
		}
	}
}

// grpcCase is one bad gRPC input: the call, the code it must get, and
// the field its message must name.
type grpcCase struct {
	name  string
	call  func(ctx context.Context) error
	code  codes.Code
	field string
}

// runGRPCCases runs each case and checks its answer and that nothing
// changed. It returns how many inputs it sent.
func (f *badFixture) runGRPCCases(t *testing.T, cases []grpcCase) int {
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			before := f.capture(t)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			err := tc.call(ctx)
			cancel()
			s := status.Convert(err)
			if s.Code() != tc.code {
				t.Errorf("code %s (%v), want %s", s.Code(), err, tc.code)
			}
			if !strings.Contains(s.Message(), tc.field) {
				t.Errorf("message %q does not name %q", s.Message(), tc.field)
			}
			if len(s.Message()) > 500 {
				t.Errorf("a %d-byte message", len(s.Message()))
			}
			f.unchanged(t, before, f.capture(t))
		})
	}
	return len(cases)
}
