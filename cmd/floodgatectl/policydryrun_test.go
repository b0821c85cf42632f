package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	pb "github.com/floodgate/floodgate/proto/floodgate/v1"
	"github.com/floodgate/floodgate/rpc/validate"
)

// cappedAdmin is the Admin service of a node started with
// --max-log-length 100, holding policies: it checks as the node does
// (package validate), and records what it is asked.
type cappedAdmin struct {
	pb.UnimplementedAdminServer
	mu        sync.Mutex
	policies  map[string]*pb.Policy
	validated [][]string // the names of each ValidatePolicies call
	sets      int
}

func (a *cappedAdmin) ListPolicies(context.Context, *pb.ListPoliciesRequest) (*pb.ListPoliciesResponse, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	resp := &pb.ListPoliciesResponse{}
	for _, p := range a.policies {
		resp.Policies = append(resp.Policies, p)
	}
	return resp, nil
}

func (a *cappedAdmin) ValidatePolicies(_ context.Context, req *pb.ValidatePoliciesRequest) (*pb.ValidatePoliciesResponse, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	var names []string
	for _, p := range req.Policies {
		names = append(names, p.Name)
	}
	a.validated = append(a.validated, names)
	if _, err := validate.Policies(req.Policies, 100); err != nil {
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	return &pb.ValidatePoliciesResponse{Names: names}, nil
}

func (a *cappedAdmin) SetPolicies(_ context.Context, req *pb.SetPoliciesRequest) (*pb.SetPoliciesResponse, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.sets++
	if _, err := validate.Policies(req.Policies, 100); err != nil {
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	for _, p := range req.Policies {
		a.policies[p.Name] = p
	}
	return &pb.SetPoliciesResponse{}, nil
}

// A dry run has the node check what apply would send, and reports what
// the node would refuse as apply would, naming the field as the file
// does; it never writes. A node that predates the check leaves the file
// to the offline checks, and a note says so.
func TestPolicyApplyDryRunAsksTheCluster(t *testing.T) {
	const stored = "  - name: api\n    limits: [{algorithm: token_bucket, limit: 5, window: 1h}]\n"
	write := func(name, doc string) string {
		file := filepath.Join(t.TempDir(), name)
		if err := os.WriteFile(file, []byte("policies:\n"+doc), 0o644); err != nil {
			t.Fatal(err)
		}
		return file
	}
	long := write("long.yaml", stored+"  - name: logp\n    limits: [{algorithm: sliding_log, limit: 500, window: 1m}]\n")
	short := write("short.yaml", stored+"  - name: logp\n    limits: [{algorithm: sliding_log, limit: 50, window: 1m}]\n")
	longer := write("longer.yaml", stored+"  - name: logp\n    limits: [{algorithm: sliding_log, limit: 20000, window: 1m}]\n")
	// The node's refusal names the file's policies[1], which apply sends
	// as the plan's policies[0].
	const refused = "policies[1].limits[0].limit: a sliding_log keeps one timestamp per request and is capped at 100"
	for _, tc := range []struct {
		name      string
		oldNode   bool // a node without ValidatePolicies
		args      []string
		err, out  string // substrings of the error ("" for none) and of the output
		note      bool   // the offline-check note on stderr
		validated bool   // the node was asked to check logp
		sets      int    // SetPolicies calls
	}{
		{"refused", false, []string{"-f", long, "--dry-run"}, "InvalidArgument: the cluster would refuse this file, and change nothing: invalid request: " + refused, "+ logp\n= api\n", false, true, 0},
		{"refused, JSON", false, []string{"-f", long, "--dry-run", "--json"}, refused, "failed logp: invalid request: " + refused, false, true, 0},
		{"valid", false, []string{"-f", short, "--dry-run"}, "", "+ logp\n= api\ndry run: nothing changed\n", false, true, 0},
		{"applied", false, []string{"-f", long}, "the cluster refused this file, and changed nothing: invalid request: " + refused, "+ logp\n", false, false, 1},
		{"old node", true, []string{"-f", long, "--dry-run"}, "", "dry run: nothing changed\n", true, false, 0},
		{"old node, offline refusal", true, []string{"-f", longer, "--dry-run"}, "policies[1].limits[0].limit: a sliding_log keeps one timestamp per request and is capped at 10000", "+ logp\n", true, false, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := &cappedAdmin{policies: map[string]*pb.Policy{"api": {Name: "api", Limits: []*pb.PolicyLimit{
				{Limit: &pb.Limit{Algorithm: pb.Algorithm_TOKEN_BUCKET, Limit: 5, WindowMs: 3_600_000}}}}}}
			addr := serveAdmin(t, a)
			if tc.oldNode {
				addr = serveAdmin(t, &pruneAdmin{policies: a.policies})
			}
			var out, stderr bytes.Buffer
			root := newRoot(&out)
			root.SetErr(&stderr)
			root.SetArgs(append([]string{"--addr", addr, "policy", "apply"}, tc.args...))
			err := root.Execute()
			if msg := errText(err); tc.err == "" && err != nil || tc.err != "" && !strings.Contains(msg, tc.err) {
				t.Fatalf("error %q, want one containing %q", msg, tc.err)
			}
			printed := out.String()
			if tc.args[len(tc.args)-1] == "--json" {
				var res applyResult
				if err := json.Unmarshal(out.Bytes(), &res); err != nil || !res.DryRun || res.Applied || len(res.Failed) != 1 {
					t.Fatalf("printed %q (%v), want a dry run's result with one failure", printed, err)
				}
				printed = "failed " + res.Failed[0].Name + ": " + res.Failed[0].Error
			}
			if !strings.Contains(printed, tc.out) {
				t.Errorf("printed %q, want %q in it", printed, tc.out)
			}
			if got := strings.Contains(stderr.String(), "checked offline"); got != tc.note {
				t.Errorf("stderr %q: a note of the offline check is %v, want %v", stderr.String(), got, tc.note)
			}
			if got := len(a.validated) == 1 && strings.Join(a.validated[0], ",") == "logp"; got != tc.validated || a.sets != tc.sets {
				t.Errorf("the node checked %v and was written to %d times", a.validated, a.sets)
			}
			if _, ok := a.policies["logp"]; ok && tc.err != "" {
				t.Error("a refused file was stored")
			}
		})
	}
}

// errText is err as main prints it: a status error as its code and message.
func errText(err error) string {
	if err == nil {
		return ""
	}
	if s, ok := status.FromError(err); ok {
		return s.Code().String() + ": " + s.Message()
	}
	return err.Error()
}
