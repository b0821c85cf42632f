package policyfile

import (
	"fmt"
	"io"
	"slices"

	"google.golang.org/protobuf/proto"

	pb "github.com/floodgate/floodgate/proto/floodgate/v1"
	"github.com/floodgate/floodgate/rpc/validate"
	"github.com/floodgate/floodgate/window"
)

// Plan is what applying a file changes: policies to create, to replace
// (they differ), to delete (in the cluster, not in the file; only with
// prune), and those left as they are. Names are sorted.
type Plan struct {
	Create, Update, Delete, Unchanged []string
	// Set are the policies to send (created and replaced), in file order.
	Set []*pb.Policy
	// Refused are the replacements the cluster would refuse, so the whole
	// set (it is stored all or none): a change of colocate, which would
	// restart the policy's counts.
	Refused []Refusal
}

// Refusal is a policy of a file that the cluster would refuse, and why.
type Refusal struct {
	// Name is the policy's; Reason says why, from its field in the file
	// ("policies[2].colocate: ..."), as the node's refusals do.
	Name, Reason string
}

func (r Refusal) Error() string { return r.Reason }

// Diff plans making current (the cluster's policies) into desired (a
// file's). Without prune, policies absent from the file are left alone,
// as kubectl apply does without --prune.
func Diff(current, desired []*pb.Policy, prune bool) Plan {
	have := map[string]*pb.Policy{}
	for _, p := range current {
		have[p.Name] = p
	}
	var plan Plan
	want := map[string]bool{}
	for i, p := range desired {
		want[p.Name] = true
		old, ok := have[p.Name]
		switch {
		case !ok:
			plan.Create = append(plan.Create, p.Name)
			plan.Set = append(plan.Set, p)
		case !proto.Equal(normalized(old), normalized(p)):
			plan.Update = append(plan.Update, p.Name)
			plan.Set = append(plan.Set, p)
			if old.Colocate != p.Colocate {
				plan.Refused = append(plan.Refused, Refusal{p.Name, fmt.Sprintf(
					"policies[%d].colocate: policy %s exists with colocate %v, and changing it would restart its counts: delete the policy and create it again",
					i, p.Name, old.Colocate)})
			}
		default:
			plan.Unchanged = append(plan.Unchanged, p.Name)
		}
	}
	if prune {
		for name := range have {
			if !want[name] {
				plan.Delete = append(plan.Delete, name)
			}
		}
	}
	for _, l := range [][]string{plan.Create, plan.Update, plan.Delete, plan.Unchanged} {
		slices.Sort(l)
	}
	return plan
}

// normalized is p as the server stores it, for comparison: a policy read
// back differs from the file's only in spelling the server fills in.
func normalized(p *pb.Policy) *pb.Policy {
	if pp, err := validate.Policy(p, "", window.MaxLogLength); err == nil {
		return validate.PolicyToProto(pp)
	}
	return p
}

// Empty reports whether the plan changes nothing.
func (p Plan) Empty() bool { return len(p.Create)+len(p.Update)+len(p.Delete) == 0 }

// Print writes the plan, one line per policy: "+ created", "~ replaced",
// "- deleted", "= unchanged".
func (p Plan) Print(w io.Writer) error {
	for _, l := range []struct {
		mark  string
		names []string
	}{{"+", p.Create}, {"~", p.Update}, {"-", p.Delete}, {"=", p.Unchanged}} {
		for _, n := range l.names {
			if _, err := fmt.Fprintf(w, "%s %s\n", l.mark, n); err != nil {
				return err
			}
		}
	}
	return nil
}
