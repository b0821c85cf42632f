package main

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strconv"

	"github.com/spf13/cobra"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/floodgate/floodgate/policyfile"
	pb "github.com/floodgate/floodgate/proto/floodgate/v1"
)

// validateOnCluster has the node check sent, the policies of file that
// apply would send, as it would check the write, storing nothing: the
// node's rules, its --max-log-length and the cluster's policies are its
// own to judge, not the CLI's. A node of a release before
// ValidatePolicies cannot: then the file is checked offline as dry runs
// did before, with the default --max-log-length, and a note says so.
func validateOnCluster(ctx context.Context, cmd *cobra.Command, conn *grpc.ClientConn, sent, file []*pb.Policy) error {
	const would = "the cluster would refuse this file, and change nothing"
	_, err := admin(conn).ValidatePolicies(ctx, &pb.ValidatePoliciesRequest{Policies: sent})
	if status.Code(err) != codes.Unimplemented {
		return inFile(err, would, sent, file)
	}
	fmt.Fprintln(cmd.ErrOrStderr(), "floodgatectl: note: the node cannot check a dry run (it predates ValidatePolicies): "+
		"the file was checked offline, with the default --max-log-length")
	if err := policyfile.Check(file, 0); err != nil {
		return refusalOf(codes.InvalidArgument, err.Error(), would, file, file)
	}
	return nil
}

// refusal is the cluster's refusal of a file's policies, its fields named
// as in the file: the policy it names first (empty when none), why, and
// what it means for the file (prefix).
type refusal struct {
	code              codes.Code
	name, why, prefix string
}

// Error says what the refusal means for the file, then why.
func (r *refusal) Error() string { return r.prefix + ": " + r.why }

// GRPCStatus keeps the cluster's code, which main prints.
func (r *refusal) GRPCStatus() *status.Status { return status.New(r.code, r.Error()) }

// inFile makes the cluster's refusal (InvalidArgument, or
// FailedPrecondition for a change its policies forbid) of sent, some of
// file's policies, a refusal of file; other errors (the node is
// unreachable, the caller unauthorized) stay as they are.
func inFile(err error, prefix string, sent, file []*pb.Policy) error {
	st, ok := status.FromError(err)
	if err == nil || !ok || st.Code() != codes.InvalidArgument && st.Code() != codes.FailedPrecondition {
		return err
	}
	return refusalOf(st.Code(), st.Message(), prefix, sent, file)
}

// policyIndex matches a policy an error names: policies[k].
var policyIndex = regexp.MustCompile(`policies\[(\d+)\]`)

// refusalOf is the refusal msg, whose policies[k] count among sent, with
// them renamed to where they are in file: policies[0] of a plan that
// sends only the file's fourth policy is the file's policies[3], as
// `policy validate` names it; their fields are spelt as in the file
// (policyfile.FileFields).
func refusalOf(code codes.Code, msg, prefix string, sent, file []*pb.Policy) *refusal {
	r := &refusal{code: code, prefix: prefix}
	r.why = policyIndex.ReplaceAllStringFunc(msg, func(m string) string {
		k, err := strconv.Atoi(policyIndex.FindStringSubmatch(m)[1])
		if err != nil || k >= len(sent) {
			return m
		}
		j := slices.Index(file, sent[k])
		if j < 0 {
			return m
		}
		if r.name == "" {
			r.name = sent[k].Name
		}
		return fmt.Sprintf("policies[%d]", j)
	})
	r.why = policyfile.FileFields(r.why)
	return r
}
