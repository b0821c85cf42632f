package policyfile

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"reflect"
	"slices"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	pb "github.com/floodgate/floodgate/proto/floodgate/v1"
)

// The policy file format, as `policy set -f` reads it and `policy get` and
// `policy list -o yaml` print it:
//
//	policies:
//	  - name: api
//	    mode: hard            # hard (default) | soft | shadow | elastic
//	    soft_percent: 10
//	    elastic: {ceiling_percent: 200, capacity: 1000}
//	    consistency: strict   # strict (default) | fast
//	    count_denied: false
//	    key_by: [user, ip]
//	    limits:
//	      - {name: per-minute, algorithm: sliding_log, limit: 10, window: 1m}
//	    reduced: {name: slow-lane, algorithm: sliding_log, limit: 10, window: 1m}
//
// A limit has name, algorithm, limit, window (a Go duration), buckets,
// calendar and burst. Only the spelling is checked here; the server
// validates the policies themselves.

// policyFile is a policy document.
type policyFile struct {
	Policies []yamlPolicy `yaml:"policies"`
}

type yamlPolicy struct {
	Name        string       `yaml:"name"`
	Mode        string       `yaml:"mode,omitempty"`
	SoftPercent int64        `yaml:"soft_percent,omitempty"`
	Elastic     *yamlElastic `yaml:"elastic,omitempty,flow"`
	Consistency string       `yaml:"consistency,omitempty"`
	CountDenied bool         `yaml:"count_denied,omitempty"`
	Colocate    bool         `yaml:"colocate,omitempty"`
	KeyBy       []string     `yaml:"key_by,omitempty,flow"`
	Limits      []yamlLimit  `yaml:"limits"`
	Reduced     *yamlLimit   `yaml:"reduced,omitempty"`
}

type yamlElastic struct {
	CeilingPercent int64 `yaml:"ceiling_percent"`
	Capacity       int64 `yaml:"capacity"`
}

type yamlLimit struct {
	Name      string `yaml:"name,omitempty"`
	Algorithm string `yaml:"algorithm"`
	Limit     int64  `yaml:"limit"`
	Window    string `yaml:"window,omitempty"`
	Buckets   int32  `yaml:"buckets,omitempty"`
	Calendar  string `yaml:"calendar,omitempty"`
	Burst     int64  `yaml:"burst,omitempty"`
}

// MarshalYAML prints a limit on one line, as a flow mapping.
func (l yamlLimit) MarshalYAML() (any, error) {
	type plain yamlLimit // no MarshalYAML: no recursion
	var n yaml.Node
	if err := n.Encode(plain(l)); err != nil {
		return nil, err
	}
	n.Style = yaml.FlowStyle
	return &n, nil
}

// Enum spellings, in the order they are listed in errors.
var (
	modeNames        = []string{"hard", "soft", "shadow", "elastic"}
	consistencyNames = []string{"strict", "fast"}
	algorithmNames   = []string{"sliding_log", "sliding_counter", "sliding_counter_weighted", "fixed_window", "token_bucket", "gcra"}
	calendarNames    = []string{"minute", "hour", "day", "week", "month", "year"}
)

// Parse reads a policy document and converts it to protos. Errors
// name the field at fault: "policies[0].limits[1].window: ...".
func Parse(r io.Reader) ([]*pb.Policy, error) {
	b, err := readText(r)
	if err != nil {
		return nil, err
	}
	dec := yaml.NewDecoder(bytes.NewReader(b))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, errors.New("empty document: want policies: [...]")
		}
		return nil, err
	}
	for {
		// A second document would be ignored: say so instead. An empty
		// one (a trailing ---, as generators and kustomize write) is
		// nothing, as in a node's --config file.
		var extra yaml.Node
		err := dec.Decode(&extra)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, err
		}
		if !emptyDocument(&extra) {
			return nil, fmt.Errorf("line %d: more than one YAML document; put every policy under one policies: list", extra.Line)
		}
	}
	// The document is decoded field by field rather than with the
	// decoder's KnownFields, whose errors give only a line and a Go type:
	// this way every error, unknown keys included, names its field path.
	var f policyFile
	if err := decodeStrict(&doc, reflect.ValueOf(&f).Elem(), ""); err != nil {
		return nil, err
	}
	if len(f.Policies) == 0 {
		return nil, errors.New("policies: no policies")
	}
	out := make([]*pb.Policy, len(f.Policies))
	for i := range f.Policies {
		p, err := f.Policies[i].toProto(fmt.Sprintf("policies[%d].", i))
		if err != nil {
			return nil, err
		}
		out[i] = p
	}
	return out, nil
}

// emptyDocument reports whether doc holds nothing: only a null written as
// nothing (what a "---" alone makes; a "~" is written, so a document).
func emptyDocument(doc *yaml.Node) bool {
	return len(doc.Content) == 1 && doc.Content[0].Kind == yaml.ScalarNode &&
		doc.Content[0].Tag == "!!null" && doc.Content[0].Value == ""
}

// toProto converts a policy; field prefixes errors ("policies[0].").
func (p *yamlPolicy) toProto(field string) (*pb.Policy, error) {
	pp := &pb.Policy{Name: p.Name, SoftPercent: p.SoftPercent, CountDenied: p.CountDenied, KeyBy: p.KeyBy, Colocate: p.Colocate}
	if p.Mode != "" {
		m, err := enumValue(p.Mode, modeNames, field+"mode", "mode")
		if err != nil {
			return nil, err
		}
		pp.Mode = pb.Mode(m)
	}
	if p.Consistency != "" {
		c, err := enumValue(p.Consistency, consistencyNames, field+"consistency", "consistency")
		if err != nil {
			return nil, err
		}
		pp.Consistency = pb.Consistency(c)
	}
	if p.Elastic != nil {
		pp.Elastic = &pb.Elastic{CeilingPercent: p.Elastic.CeilingPercent, Capacity: p.Elastic.Capacity}
	}
	for i := range p.Limits {
		l, err := p.Limits[i].toProto(fmt.Sprintf("%slimits[%d].", field, i))
		if err != nil {
			return nil, err
		}
		pp.Limits = append(pp.Limits, l)
	}
	if p.Reduced != nil {
		r, err := p.Reduced.toProto(field + "reduced.")
		if err != nil {
			return nil, err
		}
		pp.Reduced = r
	}
	return pp, nil
}

// toProto converts a limit; field prefixes errors ("policies[0].limits[1].").
func (l *yamlLimit) toProto(field string) (*pb.PolicyLimit, error) {
	if l.Algorithm == "" {
		return nil, fmt.Errorf("%salgorithm: missing (%s)", field, strings.Join(algorithmNames, ", "))
	}
	alg, err := enumValue(l.Algorithm, algorithmNames, field+"algorithm", "algorithm")
	if err != nil {
		return nil, err
	}
	pl := &pb.Limit{Algorithm: pb.Algorithm(alg + 1), Limit: l.Limit, Buckets: l.Buckets, Burst: l.Burst}
	if l.Calendar != "" {
		c, err := enumValue(l.Calendar, calendarNames, field+"calendar", "calendar unit")
		if err != nil {
			return nil, err
		}
		pl.Calendar = pb.CalendarUnit(c + 1)
	}
	if l.Window != "" {
		if pl.WindowMs, err = windowMS(l.Window); err != nil {
			return nil, fmt.Errorf("%swindow: %w", field, err)
		}
	}
	return &pb.PolicyLimit{Name: l.Name, Limit: pl}, nil
}

// enumValue returns the index of s (any case) in names.
func enumValue(s string, names []string, field, what string) (int32, error) {
	for i, n := range names {
		if strings.EqualFold(s, n) {
			return int32(i), nil
		}
	}
	return 0, fmt.Errorf("%s: unknown %s %q (%s)", field, what, s, strings.Join(names, ", "))
}

// windowMS converts a Go duration to whole milliseconds.
func windowMS(s string) (int64, error) {
	d, err := time.ParseDuration(s)
	switch {
	case err != nil:
		return 0, fmt.Errorf("invalid duration %q: want a Go duration such as 500ms, 1m or 24h", s)
	case d < 0:
		return 0, fmt.Errorf("%q is negative", s)
	case d%time.Millisecond != 0:
		return 0, fmt.Errorf("%q is not a whole number of milliseconds", s)
	}
	return d.Milliseconds(), nil
}

// formatWindow spells window_ms as a Go duration, without zero tails:
// 1m rather than 1m0s, 1h30m rather than 1h30m0s.
func formatWindow(ms int64) string {
	s := (time.Duration(ms) * time.Millisecond).String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// policyToYAML converts a policy for printing. Mode and consistency are
// always spelled out; other unset fields are left out.
func policyToYAML(pp *pb.Policy) yamlPolicy {
	p := yamlPolicy{
		Name:        pp.Name,
		Mode:        enumName(int32(pp.Mode), modeNames, 0),
		SoftPercent: pp.SoftPercent,
		Consistency: enumName(int32(pp.Consistency), consistencyNames, 0),
		CountDenied: pp.CountDenied,
		Colocate:    pp.Colocate,
		KeyBy:       pp.KeyBy,
	}
	if pp.Elastic != nil {
		p.Elastic = &yamlElastic{CeilingPercent: pp.Elastic.CeilingPercent, Capacity: pp.Elastic.Capacity}
	}
	for _, l := range pp.Limits {
		p.Limits = append(p.Limits, limitToYAML(l))
	}
	if pp.Reduced != nil {
		r := limitToYAML(pp.Reduced)
		p.Reduced = &r
	}
	return p
}

func limitToYAML(pl *pb.PolicyLimit) yamlLimit {
	l := pl.GetLimit()
	y := yamlLimit{
		Name:      pl.GetName(),
		Algorithm: enumName(int32(l.GetAlgorithm()), algorithmNames, 1),
		Limit:     l.GetLimit(),
		Buckets:   l.GetBuckets(),
		Burst:     l.GetBurst(),
	}
	if l.GetWindowMs() != 0 {
		y.Window = formatWindow(l.GetWindowMs())
	}
	if l.GetCalendar() != pb.CalendarUnit_CALENDAR_UNIT_UNSPECIFIED {
		y.Calendar = enumName(int32(l.GetCalendar()), calendarNames, 1)
	}
	return y
}

// enumName spells enum value v, names[0] being value first; an unknown
// value prints as its number.
func enumName(v int32, names []string, first int32) string {
	if i := v - first; i >= 0 && int(i) < len(names) {
		return names[i]
	}
	return fmt.Sprint(v)
}

// Write prints policies as one document that `policy set -f`
// reads back.
func Write(w io.Writer, policies []*pb.Policy) error {
	f := policyFile{Policies: make([]yamlPolicy, len(policies))}
	for i, p := range policies {
		f.Policies[i] = policyToYAML(p)
	}
	var b bytes.Buffer
	enc := yaml.NewEncoder(&b)
	enc.SetIndent(2)
	if err := enc.Encode(f); err != nil {
		return err
	}
	if err := enc.Close(); err != nil {
		return err
	}
	_, err := w.Write(b.Bytes())
	return err
}

// AlgorithmNames are the file's names of the algorithms, in proto order.
func AlgorithmNames() []string { return slices.Clone(algorithmNames) }

// CalendarNames are the file's names of the calendar units.
func CalendarNames() []string { return slices.Clone(calendarNames) }

// ModeName is the file's name of a policy mode.
func ModeName(m pb.Mode) string { return enumName(int32(m), modeNames, 0) }
