package main

import (
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/floodgate/floodgate/policyfile"
	pb "github.com/floodgate/floodgate/proto/floodgate/v1"
	"github.com/floodgate/floodgate/window"
)

// policyCmd groups the commands that manage named policies, stored in the
// meta Raft group.
func policyCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "policy",
		Short: "Manage named policies: set, apply or validate a YAML file; get, list, delete",
	}
	cmd.AddCommand(policySetCmd(g), policyApplyCmd(g), policyValidateCmd(g), policyGetCmd(g), policyListCmd(g), policyDeleteCmd(g))
	return cmd
}

func policySetCmd(g *globals) *cobra.Command {
	var file string
	cmd := &cobra.Command{
		Use:   "set -f FILE",
		Short: "Create or replace the policies of a YAML file, all or none",
		Long: "Create or replace every policy of a YAML document (policies: [...]), in one\n" +
			"call: the cluster stores all of them or, if any is invalid, none.\n" +
			"`policy get` and `policy list -o yaml` print the same format.",
		Example: "  floodgatectl policy set -f policies.yaml\n" +
			"  floodgatectl policy list -o yaml | floodgatectl policy set -f -",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			// Checked here first, so that a refusal names the file's
			// fields and its windows as durations; the cap on sliding logs
			// is the node's.
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
			resp, err := admin(conn).SetPolicies(ctx, &pb.SetPoliciesRequest{Policies: policies})
			if err != nil {
				return inFile(err, "the cluster refused this file, and changed nothing", policies, policies)
			}
			if g.json {
				return g.printJSON(resp)
			}
			names := resp.Names
			if len(names) == 0 {
				for _, p := range policies {
					names = append(names, p.Name)
				}
			}
			fmt.Fprintf(g.out, "set %d %s: %s\n", len(names), plural(len(names), "policy", "policies"), strings.Join(names, ", "))
			return nil
		},
	}
	cmd.Flags().StringVarP(&file, "file", "f", "", "YAML file of policies; - reads stdin")
	_ = cmd.MarkFlagRequired("file")
	return cmd
}

func policyGetCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "get NAME",
		Short: "Print a policy as YAML that policy set -f reads back",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			conn, err := g.dial()
			if err != nil {
				return err
			}
			defer conn.Close()
			ctx, cancel := g.ctx()
			defer cancel()
			p, err := admin(conn).GetPolicy(ctx, &pb.GetPolicyRequest{Name: args[0]})
			if err != nil {
				return err
			}
			if g.json {
				return g.printJSON(p)
			}
			return policyfile.Write(g.out, []*pb.Policy{p})
		},
	}
}

func policyListCmd(g *globals) *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:     "list",
		Aliases: []string{"ls"},
		Short:   "List the policies: a table, or -o yaml for a document policy set -f reads back",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if output != "table" && output != "yaml" && output != "json" {
				return fmt.Errorf("-o: unknown output %q (table, yaml, json)", output)
			}
			conn, err := g.dial()
			if err != nil {
				return err
			}
			defer conn.Close()
			ctx, cancel := g.ctx()
			defer cancel()
			resp, err := admin(conn).ListPolicies(ctx, &pb.ListPoliciesRequest{})
			if err != nil {
				return err
			}
			switch {
			case g.json || output == "json":
				return g.printJSON(resp)
			case output == "yaml":
				return policyfile.Write(g.out, resp.Policies)
			}
			return policyfile.Table(g.out, resp.Policies)
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "table", "table, yaml or json")
	return cmd
}

func policyDeleteCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:     "delete NAME",
		Aliases: []string{"rm"},
		Short:   "Delete a policy; its counters expire on their own",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			conn, err := g.dial()
			if err != nil {
				return err
			}
			defer conn.Close()
			ctx, cancel := g.ctx()
			defer cancel()
			resp, err := admin(conn).DeletePolicy(ctx, &pb.DeletePolicyRequest{Name: args[0]})
			if err != nil {
				return err
			}
			if g.json {
				return g.printJSON(resp)
			}
			fmt.Fprintf(g.out, "deleted policy %s\n", args[0])
			return nil
		},
	}
}

// readPolicies parses the policy file named by -f ("-": stdin); errors
// name the file and the field.
func readPolicies(cmd *cobra.Command, file string) ([]*pb.Policy, error) {
	var r io.Reader = cmd.InOrStdin()
	name := "stdin"
	if file != "-" {
		f, err := os.Open(file)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		r, name = f, file
	}
	policies, err := policyfile.Parse(r)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return policies, nil
}
