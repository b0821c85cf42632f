package validate

import (
	"fmt"

	"github.com/floodgate/floodgate/policy"
	pb "github.com/floodgate/floodgate/proto/floodgate/v1"
)

// MaxPolicies is the most policies one SetPolicies call may store: they
// are one meta log entry.
const MaxPolicies = 1000

// Policy validates a named policy from the API and converts it. field
// prefixes errors ("policies[2]."), which name the field in the API's
// spelling ("limits[1].limit.window_ms").
func Policy(pp *pb.Policy, field string, maxLog int64) (*policy.Policy, error) {
	if pp == nil {
		return nil, fmt.Errorf("%w: %s: missing", ErrInvalid, trimDot(field))
	}
	if pp.Name == "" {
		return nil, fmt.Errorf("%w: %sname: a policy needs a name", ErrInvalid, field)
	}
	p := &policy.Policy{
		Name:        pp.Name,
		CountDenied: pp.CountDenied,
		Colocate:    pp.Colocate,
		Mode:        policy.Mode(pp.Mode),
		SoftPercent: pp.SoftPercent,
		Consistency: policy.Consistency(pp.Consistency),
		KeyBy:       pp.KeyBy,
	}
	if pp.Mode < pb.Mode_MODE_HARD || pp.Mode > pb.Mode_MODE_ELASTIC {
		return nil, fmt.Errorf("%w: %smode: unknown mode %d", ErrInvalid, field, pp.Mode)
	}
	if pp.Consistency < pb.Consistency_CONSISTENCY_STRICT || pp.Consistency > pb.Consistency_CONSISTENCY_FAST {
		return nil, fmt.Errorf("%w: %sconsistency: unknown consistency %d", ErrInvalid, field, pp.Consistency)
	}
	if pp.Elastic != nil {
		p.ElasticCeilingPercent, p.ElasticCapacity = pp.Elastic.CeilingPercent, pp.Elastic.Capacity
	}
	for i, l := range pp.Limits {
		pl, err := policyLimit(l, fmt.Sprintf("%slimits[%d].", field, i), maxLog)
		if err != nil {
			return nil, err
		}
		p.Limits = append(p.Limits, pl)
	}
	if pp.Reduced != nil {
		r, err := policyLimit(pp.Reduced, field+"reduced.", maxLog)
		if err != nil {
			return nil, err
		}
		p.Reduced = &r
	}
	if err := p.Validate(maxLog); err != nil {
		return nil, AtField(field, err)
	}
	return p, nil
}

// Policies validates a set of policies stored together (SetPolicies, a
// policy file): 1 to MaxPolicies of them, each valid, no name twice.
// Errors name the field: "policies[2].name: ...".
func Policies(pps []*pb.Policy, maxLog int64) ([]*policy.Policy, error) {
	if len(pps) == 0 || len(pps) > MaxPolicies {
		return nil, fmt.Errorf("%w: policies: give 1 to %d, got %d", ErrInvalid, MaxPolicies, len(pps))
	}
	ps, err := PolicyList(pps, maxLog)
	if err != nil {
		return nil, err
	}
	for i, p := range ps {
		if err := distinctDeciders(p, fmt.Sprintf("policies[%d].", i)); err != nil {
			return nil, err
		}
	}
	return ps, nil
}

// distinctDeciders refuses a policy whose answers could not tell the
// reduced limit from one of its limits: decided_by (and the metrics'
// limit label, and the RateLimit headers) names the one that decided by
// its name, "reduced" for an unnamed reduced limit. It is checked when
// policies are stored, not in policy.Validate, which every log entry and
// backup is held to: a policy stored before the rule stays readable.
func distinctDeciders(p *policy.Policy, field string) error {
	if p.Reduced == nil {
		return nil
	}
	name := p.Reduced.Name
	for j, l := range p.Limits {
		switch {
		case name != "" && l.Name == name:
			return fmt.Errorf("%w: %sreduced.name: %q is also the name of limits[%d]: answers would not say which decided", ErrInvalid, field, name, j)
		case name == "" && l.Name == "reduced":
			return fmt.Errorf("%w: %slimits[%d].name: \"reduced\" is what answers call the unnamed reduced limit: name either otherwise", ErrInvalid, field, j)
		}
	}
	return nil
}

// PolicyList is Policies without the bound on their number: a backup
// holds every policy its cluster held, however many calls stored them,
// and is stored MaxPolicies at a time once all are valid.
func PolicyList(pps []*pb.Policy, maxLog int64) ([]*policy.Policy, error) {
	ps := make([]*policy.Policy, 0, len(pps))
	names := map[string]int{}
	for i, pp := range pps {
		field := fmt.Sprintf("policies[%d].", i)
		p, err := Policy(pp, field, maxLog)
		if err != nil {
			return nil, err
		}
		if j, dup := names[p.Name]; dup {
			return nil, fmt.Errorf("%w: %sname: %q is also policies[%d]", ErrInvalid, field, p.Name, j)
		}
		names[p.Name] = i
		ps = append(ps, p)
	}
	return ps, nil
}

// PolicyName checks the name of a policy to look up, as field. A name
// too long to be one is not echoed back.
func PolicyName(field, name string) error {
	switch {
	case name == "":
		return fmt.Errorf("%w: %s: required", ErrInvalid, field)
	case len(name) > policy.MaxNameLen:
		return fmt.Errorf("%w: %s: %d bytes is longer than %d", ErrInvalid, field, len(name), policy.MaxNameLen)
	case !policy.ValidName(name):
		return fmt.Errorf("%w: %s: %q must be letters, digits or _.:-", ErrInvalid, field, name)
	}
	return nil
}

func policyLimit(l *pb.PolicyLimit, field string, maxLog int64) (policy.Limit, error) {
	if l == nil {
		return policy.Limit{}, fmt.Errorf("%w: %s: missing", ErrInvalid, trimDot(field))
	}
	wl, err := Limit(l.Limit, field+"limit.", maxLog)
	if err != nil {
		return policy.Limit{}, err
	}
	return policy.Limit{Name: l.Name, Limit: wl}, nil
}

// PolicyToProto is the inverse of Policy.
func PolicyToProto(p *policy.Policy) *pb.Policy {
	pp := &pb.Policy{
		Name:        p.Name,
		CountDenied: p.CountDenied,
		Colocate:    p.Colocate,
		Mode:        pb.Mode(p.Mode),
		SoftPercent: p.SoftPercent,
		Consistency: pb.Consistency(p.Consistency),
		KeyBy:       p.KeyBy,
	}
	if p.Mode == policy.Elastic {
		pp.Elastic = &pb.Elastic{CeilingPercent: p.ElasticCeilingPercent, Capacity: p.ElasticCapacity}
	}
	for i := range p.Limits {
		pp.Limits = append(pp.Limits, &pb.PolicyLimit{Name: p.Limits[i].Name, Limit: LimitToProto(&p.Limits[i].Limit)})
	}
	if p.Reduced != nil {
		pp.Reduced = &pb.PolicyLimit{Name: p.Reduced.Name, Limit: LimitToProto(&p.Reduced.Limit)}
	}
	return pp
}
