package main

import (
	"errors"
	"fmt"

	"github.com/spf13/cobra"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/floodgate/floodgate/policyfile"
	pb "github.com/floodgate/floodgate/proto/floodgate/v1"
	"github.com/floodgate/floodgate/window"
)

// policyApplyCmd makes the cluster's policies those of a file, printing
// what changes: the GitOps form of policy set.
func policyApplyCmd(g *globals) *cobra.Command {
	var file string
	var prune, dryRun bool
	cmd := &cobra.Command{
		Use:   "apply -f FILE",
		Short: "Make the cluster's policies those of a YAML file, showing the changes",
		Long: "Compare the file's policies with the cluster's and print the plan, one line\n" +
			"each: + created, ~ replaced, - deleted (only with --prune), = unchanged.\n" +
			"Then store the created and replaced ones together (all or none) and delete\n" +
			"the pruned ones. --dry-run changes nothing: the node checks what apply would\n" +
			"send as it checks the write (its --max-log-length, the cluster's policies)\n" +
			"and says what it would refuse. A file from git or a ConfigMap, applied\n" +
			"again, changes nothing.",
		Example: "  floodgatectl policy apply -f policies.yaml --dry-run\n" +
			"  floodgatectl policy apply -f policies.yaml --prune",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			// The cap on sliding logs is the node's --max-log-length: the
			// node judges it, for a dry run too.
			policies, err := readValidPolicies(cmd, file, window.MaxLogLength)
			if err != nil {
				return err
			}
			conn, err := g.dial()
			if err != nil {
				return err
			}
			defer conn.Close()
			ctx, cancel := g.ctx()
			defer cancel()
			current, err := admin(conn).ListPolicies(ctx, &pb.ListPoliciesRequest{})
			if err != nil {
				return err
			}
			plan := policyfile.Diff(current.Policies, policies, prune)
			result := applyResult{Create: orEmpty(plan.Create), Replace: orEmpty(plan.Update), Delete: orEmpty(plan.Delete),
				Unchanged: orEmpty(plan.Unchanged), DryRun: dryRun, Failed: []applyFailure{}}
			if !g.json {
				if err := plan.Print(g.out); err != nil {
					return err
				}
			}
			if len(plan.Refused) > 0 {
				// Refused by the cluster as well, dry run or not: the
				// plan cannot be applied as it is.
				errs := make([]error, len(plan.Refused))
				for i, r := range plan.Refused {
					errs[i] = r
					result.Failed = append(result.Failed, applyFailure{Name: r.Name, Error: r.Reason})
				}
				if g.json {
					if err := g.printResult(result); err != nil {
						return err
					}
				}
				return fmt.Errorf("the cluster would refuse this file, and change nothing: %w", errors.Join(errs...))
			}
			if dryRun && len(plan.Set) > 0 {
				// The cluster checks what apply would send, as it would
				// check the write, and stores nothing.
				if err := validateOnCluster(ctx, cmd, conn, plan.Set, policies); err != nil {
					var refused *refusal
					if g.json && errors.As(err, &refused) {
						result.Failed = append(result.Failed, applyFailure{Name: refused.name, Error: refused.why})
						if err := g.printResult(result); err != nil {
							return err
						}
					}
					return err
				}
			}
			switch {
			case plan.Empty() && g.json, dryRun && g.json:
				return g.printResult(result)
			case plan.Empty():
				_, err := fmt.Fprintln(g.out, "no changes")
				return err
			case dryRun:
				_, err := fmt.Fprintln(g.out, "dry run: nothing changed")
				return err
			}
			if len(plan.Set) > 0 {
				if _, err := admin(conn).SetPolicies(ctx, &pb.SetPoliciesRequest{Policies: plan.Set}); err != nil {
					return inFile(err, "the cluster refused this file, and changed nothing", plan.Set, policies)
				}
			}
			var errs []error
			for _, name := range plan.Delete {
				_, err := admin(conn).DeletePolicy(ctx, &pb.DeletePolicyRequest{Name: name})
				if status.Code(err) == codes.NotFound {
					err = nil // deleted meanwhile: gone, as the file asks
				}
				if err != nil {
					errs = append(errs, fmt.Errorf("delete %s: %w", name, err))
					result.Failed = append(result.Failed, applyFailure{Name: name, Error: err.Error()})
				}
			}
			// The policies set stay set when a delete fails: say what was
			// done as well as what failed, and exit non-zero.
			result.Applied = len(errs) == 0
			deleted := fmt.Sprint(len(plan.Delete))
			if len(errs) > 0 {
				deleted = fmt.Sprintf("%d of %d", len(plan.Delete)-len(errs), len(plan.Delete))
			}
			if g.json {
				if err := g.printResult(result); err != nil {
					return err
				}
			} else if _, err := fmt.Fprintf(g.out, "applied: %d created, %d replaced, %s deleted\n",
				len(plan.Create), len(plan.Update), deleted); err != nil {
				return err
			}
			return errors.Join(errs...)
		},
	}
	cmd.Flags().StringVarP(&file, "file", "f", "", "YAML file of policies; - reads stdin")
	cmd.Flags().BoolVar(&prune, "prune", false, "also delete the cluster's policies that the file does not list")
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "print the plan, have the cluster check what apply would send, and change nothing")
	_ = cmd.MarkFlagRequired("file")
	return cmd
}

// policyValidateCmd checks a policy file offline, with the server's rules.
func policyValidateCmd(g *globals) *cobra.Command {
	var file string
	cmd := &cobra.Command{
		Use:     "validate -f FILE",
		Short:   "Check a policy file without a cluster: exit 1 and name the field when it is wrong",
		Example: "  floodgatectl policy validate -f policies.yaml",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			policies, err := readValidPolicies(cmd, file, 0)
			if err != nil {
				return err
			}
			if g.json {
				return g.printResult(struct {
					File     string `json:"file"`
					Policies int    `json:"policies"`
					Valid    bool   `json:"valid"`
				}{file, len(policies), true})
			}
			_, err = fmt.Fprintf(g.out, "%s: %d %s, valid\n", file, len(policies), plural(len(policies), "policy", "policies"))
			return err
		},
	}
	cmd.Flags().StringVarP(&file, "file", "f", "", "YAML file of policies; - reads stdin")
	_ = cmd.MarkFlagRequired("file")
	return cmd
}

// applyResult is policy apply's plan and outcome under --json.
type applyResult struct {
	Create    []string `json:"create"`
	Replace   []string `json:"replace"`
	Delete    []string `json:"delete"`
	Unchanged []string `json:"unchanged"`
	DryRun    bool     `json:"dry_run"`
	Applied   bool     `json:"applied"` // the changes were made (false when there were none)
	// Failed lists the deletes that failed (the policies set stay set),
	// or the policies the cluster would refuse (then nothing was sent).
	Failed []applyFailure `json:"failed"`
}

// applyFailure is a policy whose delete failed, and why.
type applyFailure struct {
	Name  string `json:"name"`
	Error string `json:"error"`
}

// orEmpty makes a nil list an empty one, so JSON shows [] rather than null.
func orEmpty(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// readValidPolicies is readPolicies, then the server's checks, with
// sliding logs capped at maxLog (policyfile.Check).
func readValidPolicies(cmd *cobra.Command, file string, maxLog int64) ([]*pb.Policy, error) {
	policies, err := readPolicies(cmd, file)
	if err != nil {
		return nil, err
	}
	if err := policyfile.Check(policies, maxLog); err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	return policies, nil
}
