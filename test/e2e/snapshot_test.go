package e2e

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	pb "github.com/floodgate/floodgate/proto/floodgate/v1"
)

// A backup of one cluster restored into another, of another shape (three
// groups into one): the policies and every key's counts come back, a
// second restore changes nothing, and a damaged file is refused whole.
func TestSnapshotSaveRestore(t *testing.T) {
	t.Parallel()
	src := startCluster(t, 3)
	setPolicies(t, src, `
policies:
  - name: login
    key_by: [user]
    limits:
      - {name: per-minute, algorithm: sliding_log, limit: 3, window: 1m}
      - {name: per-hour, algorithm: sliding_counter, limit: 50, window: 1h}
`)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	inline := &pb.Limit{Algorithm: pb.Algorithm_TOKEN_BUCKET, Limit: 5, WindowMs: time.Hour.Milliseconds()}
	type use struct {
		req   *pb.AllowRequest
		times int
	}
	uses := []use{
		{&pb.AllowRequest{Policy: "login", Descriptors: map[string]string{"user": "1"}}, 2},
		{&pb.AllowRequest{Policy: "login", Descriptors: map[string]string{"user": "2"}}, 3},
		{&pb.AllowRequest{Key: "inline-k", Limit: inline}, 4},
	}
	for i := range 40 { // keys across every group
		uses = append(uses, use{&pb.AllowRequest{Key: "spread-" + strings.Repeat("x", i), Limit: inline}, 1 + i%3})
	}
	peek := func(c *Cluster, u use) int64 {
		t.Helper()
		req := proto.Clone(u.req).(*pb.AllowRequest)
		req.Cost = proto.Int64(0)
		resp, err := c.Nodes[0].Limiter().Allow(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		return resp.Remaining
	}
	for i, u := range uses {
		for range u.times {
			if _, err := src.Nodes[i%3].Limiter().Allow(ctx, u.req); err != nil {
				t.Fatal(err)
			}
		}
	}
	want := make([]int64, len(uses))
	for i, u := range uses {
		want[i] = peek(src, u)
	}

	file := filepath.Join(t.TempDir(), "backup.fgbk")
	out, err := src.Ctl(ctx, src.Nodes[1].GRPC, "snapshot", "save", file)
	if err != nil || !strings.Contains(out, "1 policy, 3 groups") {
		t.Fatalf("save: %q %v", out, err)
	}
	var saved struct {
		File                    string
		Bytes, Policies, Groups int
	}
	out, err = src.Ctl(ctx, src.Nodes[1].GRPC, "snapshot", "save", file+".json-run", "--json")
	if err != nil || json.Unmarshal([]byte(out), &saved) != nil || saved.File != file+".json-run" || saved.Bytes == 0 || saved.Policies != 1 || saved.Groups != 3 {
		t.Fatalf("save --json: %q %v", out, err)
	}

	dst := startCluster(t, 1)
	check := func(what string) {
		t.Helper()
		if _, err := dst.Nodes[0].Admin().GetPolicy(ctx, &pb.GetPolicyRequest{Name: "login"}); err != nil {
			t.Fatalf("%s: the policy: %v", what, err)
		}
		for i, u := range uses {
			if got := peek(dst, u); got != want[i] {
				t.Fatalf("%s: %v has %d remaining, the source had %d", what, u.req, got, want[i])
			}
		}
	}
	out, err = dst.Ctl(ctx, dst.Nodes[0].GRPC, "snapshot", "restore", file)
	if err != nil || !strings.Contains(out, "restored 1 policy and the counters of 43 keys") {
		t.Fatalf("restore: %q %v", out, err)
	}
	check("after the restore")
	if out, err = dst.Ctl(ctx, dst.Nodes[0].GRPC, "snapshot", "restore", file); err != nil {
		t.Fatalf("restore again: %q %v", out, err)
	}
	check("after a second restore")

	// A damaged file changes nothing.
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	data[len(data)/2] ^= 0xff
	bad := filepath.Join(t.TempDir(), "damaged.fgbk")
	if err := os.WriteFile(bad, data, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := dst.Nodes[0].Limiter().Allow(ctx, uses[2].req); err != nil {
		t.Fatal(err)
	}
	after := peek(dst, uses[2])
	if out, err := dst.Ctl(ctx, dst.Nodes[0].GRPC, "snapshot", "restore", bad); err == nil || !strings.Contains(err.Error(), "not a valid floodgate backup") {
		t.Fatalf("a damaged backup: %q %v", out, err)
	}
	if got := peek(dst, uses[2]); got != after {
		t.Fatalf("a refused restore changed a count: %d, was %d", got, after)
	}
}
