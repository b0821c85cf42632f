package main

import (
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	pb "github.com/floodgate/floodgate/proto/floodgate/v1"
)

// policyCmd groups the commands that manage named policies, stored in the
// meta Raft group.
func policyCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "policy",
		Short: "Manage named policies: set from a YAML file, get, list, delete",
	}
	cmd.AddCommand(policySetCmd(g), policyGetCmd(g), policyListCmd(g), policyDeleteCmd(g))
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
			var r io.Reader = cmd.InOrStdin()
			name := "stdin"
			if file != "-" {
				f, err := os.Open(file)
				if err != nil {
					return err
				}
				defer f.Close()
				r, name = f, file
			}
			policies, err := parsePolicies(r)
			if err != nil {
				return fmt.Errorf("%s: %w", name, err)
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
				return err
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
			return writePolicies(g.out, []*pb.Policy{p})
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
				return writePolicies(g.out, resp.Policies)
			}
			return printPolicies(g.out, resp.Policies)
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

// printPolicies prints policies as a table.
func printPolicies(w io.Writer, policies []*pb.Policy) error {
	if len(policies) == 0 {
		_, err := fmt.Fprintln(w, "no policies")
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tMODE\tCONSISTENCY\tLIMITS\tREDUCED\tKEY_BY")
	for _, p := range policies {
		mode := enumName(int32(p.Mode), modeNames, 0)
		switch p.Mode {
		case pb.Mode_MODE_SOFT:
			mode += fmt.Sprintf(" +%d%%", p.SoftPercent)
		case pb.Mode_MODE_ELASTIC:
			mode += fmt.Sprintf(" %d%% under %d/s", p.GetElastic().GetCeilingPercent(), p.GetElastic().GetCapacity())
		}
		if p.CountDenied {
			mode += ", count denied"
		}
		limits := make([]string, len(p.Limits))
		for i, l := range p.Limits {
			limits[i] = limitSummary(l)
		}
		reduced := "-"
		if p.Reduced != nil {
			reduced = limitSummary(p.Reduced)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", p.Name, mode, enumName(int32(p.Consistency), consistencyNames, 0),
			orNone(strings.Join(limits, ", ")), reduced, orNone(strings.Join(p.KeyBy, ",")))
	}
	return tw.Flush()
}

// limitSummary spells a limit briefly: "10/1m sliding_log",
// "20000/month fixed_window".
func limitSummary(pl *pb.PolicyLimit) string {
	y := limitToYAML(pl)
	per := y.Window
	if y.Calendar != "" {
		per = y.Calendar
	}
	return fmt.Sprintf("%d/%s %s", y.Limit, per, y.Algorithm)
}
