package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	pb "github.com/floodgate/floodgate/proto/floodgate/v1"
)

func writeFile(t *testing.T, name, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func policyNames(t *testing.T, ctx context.Context, n *Node) []string {
	t.Helper()
	resp, err := n.Admin().ListPolicies(ctx, &pb.ListPoliciesRequest{})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, p := range resp.Policies {
		names = append(names, p.Name)
	}
	slices.Sort(names)
	return names
}

// Declarative policies, as GitOps and a ConfigMap use them: --policies
// seeds a new cluster (and only a new one), `policy apply` shows a plan,
// changes nothing with --dry-run and nothing when applied twice, and
// prunes on request; `policy validate` needs no cluster and names the
// field at fault.
func TestDeclarativePolicies(t *testing.T) {
	t.Parallel()
	seed := writeFile(t, "seed.yaml", `
policies:
  - name: login
    key_by: [user]
    limits:
      - {name: per-minute, algorithm: sliding_log, limit: 3, window: 1m}
  - name: search
    limits:
      - {name: per-minute, algorithm: sliding_counter, limit: 60, window: 1m}
`)
	c := startCluster(t, 1, "--policies", seed)
	n := c.Nodes[0]
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	waitFor(t, ctx, "the seeded policies", func() error {
		if got := policyNames(t, ctx, n); !slices.Equal(got, []string{"login", "search"}) {
			return fmt.Errorf("policies %v", got)
		}
		return nil
	})

	next := writeFile(t, "next.yaml", `
policies:
  - name: login
    key_by: [user]
    limits:
      - {name: per-minute, algorithm: sliding_log, limit: 5, window: 1m}
  - name: export
    limits:
      - {name: per-hour, algorithm: fixed_window, limit: 2, window: 1h}
`)
	out, err := c.Ctl(ctx, n.GRPC, "policy", "apply", "-f", next, "--prune", "--dry-run")
	if err != nil {
		t.Fatal(err)
	}
	if out != "+ export\n~ login\n- search\ndry run: nothing changed\n" {
		t.Fatalf("dry run printed %q", out)
	}
	out, err = c.Ctl(ctx, n.GRPC, "policy", "apply", "-f", next, "--prune", "--dry-run", "--json")
	var plan struct {
		Create, Replace, Delete, Unchanged []string
		DryRun                             bool `json:"dry_run"`
		Applied                            bool
	}
	if err != nil || json.Unmarshal([]byte(out), &plan) != nil || !slices.Equal(plan.Create, []string{"export"}) ||
		!slices.Equal(plan.Replace, []string{"login"}) || !slices.Equal(plan.Delete, []string{"search"}) || !plan.DryRun || plan.Applied {
		t.Fatalf("dry run --json printed %q (%+v) %v", out, plan, err)
	}
	if got := policyNames(t, ctx, n); !slices.Equal(got, []string{"login", "search"}) {
		t.Fatalf("the dry run changed the policies: %v", got)
	}
	if out, err = c.Ctl(ctx, n.GRPC, "policy", "apply", "-f", next); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "applied: 1 created, 1 replaced, 0 deleted") {
		t.Fatalf("apply printed %q", out)
	}
	if got := policyNames(t, ctx, n); !slices.Equal(got, []string{"export", "login", "search"}) {
		t.Fatalf("without --prune: %v", got)
	}
	if out, err = c.Ctl(ctx, n.GRPC, "policy", "apply", "-f", next); err != nil || !strings.HasSuffix(out, "no changes\n") {
		t.Fatalf("applied again: %q %v", out, err)
	}
	if out, err = c.Ctl(ctx, n.GRPC, "policy", "apply", "-f", next, "--prune"); err != nil || !strings.Contains(out, "- search") {
		t.Fatalf("prune: %q %v", out, err)
	}
	if got := policyNames(t, ctx, n); !slices.Equal(got, []string{"export", "login"}) {
		t.Fatalf("after --prune: %v", got)
	}
	p, err := n.Admin().GetPolicy(ctx, &pb.GetPolicyRequest{Name: "login"})
	if err != nil || p.Limits[0].Limit.Limit != 5 {
		t.Fatalf("login after apply: %v %v", p, err)
	}

	// validate: offline, exit status and the field.
	bad := writeFile(t, "bad.yaml", "policies:\n  - name: x\n    limits: [{algorithm: gcra, limit: -1, window: 1s}]\n")
	if out, err := c.Ctl(ctx, "127.0.0.1:1", "policy", "validate", "-f", bad); err == nil || !strings.Contains(err.Error(), "policies[0].limits[0]") {
		t.Fatalf("validate of a bad file: %q %v", out, err)
	}
	if out, err := c.Ctl(ctx, "127.0.0.1:1", "policy", "validate", "-f", next); err != nil || !strings.Contains(out, "2 policies, valid") {
		t.Fatalf("validate of a good file: %q %v", out, err)
	}
	var valid struct {
		Policies int
		Valid    bool
	}
	if out, err := c.Ctl(ctx, "127.0.0.1:1", "policy", "validate", "-f", next, "--json"); err != nil || json.Unmarshal([]byte(out), &valid) != nil || valid.Policies != 2 || !valid.Valid {
		t.Fatalf("validate --json of a good file: %q %v", out, err)
	}
	if out, err := c.Ctl(ctx, n.GRPC, "policy", "apply", "-f", bad); err == nil {
		t.Fatalf("a bad file applied: %q", out)
	}

	// A restart with --policies leaves a cluster that has policies alone.
	n.Stop()
	if err := n.Start(); err != nil {
		t.Fatal(err)
	}
	if err := n.WaitServing(ctx); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ctx, "the restarted node to look at its --policies", func() error {
		if !strings.Contains(n.Log(), "the cluster has policies already") {
			return fmt.Errorf("no word on --policies yet")
		}
		return nil
	})
	if got := policyNames(t, ctx, n); !slices.Equal(got, []string{"export", "login"}) {
		t.Fatalf("a restart with --policies overwrote the cluster's policies: %v", got)
	}

	// A bad --policies file stops the node before it starts.
	other, err := c.NewNode("n9")
	if err != nil {
		t.Fatal(err)
	}
	other.Args = append(other.Args, "--policies", bad)
	if err := other.Start(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-other.Exited():
		if log := other.Log(); !strings.Contains(log, "policies: "+bad+": ") || !strings.Contains(log, "policies[0].limits[0].limit") {
			t.Fatalf("the node's error does not name the file and field:\n%s", other.Log())
		}
	case <-time.After(20 * time.Second):
		t.Fatal("a node with a bad --policies file started")
	}
}
