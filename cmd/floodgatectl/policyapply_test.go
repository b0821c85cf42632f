package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	pb "github.com/floodgate/floodgate/proto/floodgate/v1"
)

// pruneAdmin holds policies, and answers a delete of "stuck" Unavailable
// and of "gone" NotFound (deleted meanwhile by someone else).
type pruneAdmin struct {
	pb.UnimplementedAdminServer
	mu       sync.Mutex
	policies map[string]*pb.Policy
}

func (a *pruneAdmin) ListPolicies(context.Context, *pb.ListPoliciesRequest) (*pb.ListPoliciesResponse, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	resp := &pb.ListPoliciesResponse{}
	for _, p := range a.policies {
		resp.Policies = append(resp.Policies, p)
	}
	return resp, nil
}

func (a *pruneAdmin) SetPolicies(_ context.Context, req *pb.SetPoliciesRequest) (*pb.SetPoliciesResponse, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, p := range req.Policies {
		a.policies[p.Name] = p
	}
	return &pb.SetPoliciesResponse{}, nil
}

func (a *pruneAdmin) DeletePolicy(_ context.Context, req *pb.DeletePolicyRequest) (*pb.DeletePolicyResponse, error) {
	switch req.Name {
	case "stuck":
		return nil, status.Error(codes.Unavailable, "no leader")
	case "gone":
		return nil, status.Error(codes.NotFound, "unknown policy")
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	delete(a.policies, req.Name)
	return &pb.DeletePolicyResponse{}, nil
}

// serveAdmin serves a on loopback and returns its address.
func serveAdmin(t *testing.T, a pb.AdminServer) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := grpc.NewServer()
	pb.RegisterAdminServer(s, a)
	go func() { _ = s.Serve(lis) }()
	t.Cleanup(s.Stop)
	return lis.Addr().String()
}

// A prune whose deletes partly fail says what was done and what failed,
// as text and as JSON, and exits non-zero; a policy deleted meanwhile
// counts as deleted.
func TestPolicyApplyPartialPrune(t *testing.T) {
	file := filepath.Join(t.TempDir(), "policies.yaml")
	if err := os.WriteFile(file, []byte(`
policies:
  - name: fresh
    limits:
      - {name: per-minute, algorithm: sliding_log, limit: 3, window: 1m}
`), 0o644); err != nil {
		t.Fatal(err)
	}
	lim := []*pb.PolicyLimit{{Name: "per-minute", Limit: &pb.Limit{Algorithm: pb.Algorithm_SLIDING_LOG, Limit: 3, WindowMs: 60_000}}}
	for _, asJSON := range []bool{false, true} {
		a := &pruneAdmin{policies: map[string]*pb.Policy{
			"old": {Name: "old", Limits: lim}, "stuck": {Name: "stuck", Limits: lim}, "gone": {Name: "gone", Limits: lim}}}
		var out bytes.Buffer
		root := newRoot(&out)
		args := []string{"--addr", serveAdmin(t, a), "policy", "apply", "-f", file, "--prune"}
		if asJSON {
			args = append(args, "--json")
		}
		root.SetArgs(args)
		err := root.Execute()
		if err == nil || !strings.Contains(err.Error(), "delete stuck:") || strings.Contains(err.Error(), "gone") {
			t.Fatalf("json=%v: error %v, want one naming only the stuck delete", asJSON, err)
		}
		if _, ok := a.policies["fresh"]; !ok {
			t.Fatalf("json=%v: the file's policy was not set", asJSON)
		}
		if !asJSON {
			if !strings.Contains(out.String(), "applied: 1 created, 0 replaced, 2 of 3 deleted") {
				t.Fatalf("printed %q", out.String())
			}
			continue
		}
		var res applyResult
		if err := json.Unmarshal(out.Bytes(), &res); err != nil {
			t.Fatalf("printed %q: %v", out.String(), err)
		}
		if res.Applied || len(res.Failed) != 1 || res.Failed[0].Name != "stuck" || !strings.Contains(res.Failed[0].Error, "no leader") ||
			len(res.Create) != 1 || len(res.Delete) != 3 {
			t.Fatalf("result %+v", res)
		}
	}
}
