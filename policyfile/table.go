package policyfile

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	pb "github.com/floodgate/floodgate/proto/floodgate/v1"
)

// Table prints policies as a table, one line each.
func Table(w io.Writer, policies []*pb.Policy) error {
	if len(policies) == 0 {
		_, err := fmt.Fprintln(w, "no policies")
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tMODE\tCONSISTENCY\tLIMITS\tREDUCED\tKEY_BY")
	for _, p := range policies {
		mode := ModeName(p.Mode)
		switch p.Mode {
		case pb.Mode_MODE_SOFT:
			mode += fmt.Sprintf(" +%d%%", p.SoftPercent)
		case pb.Mode_MODE_ELASTIC:
			mode += fmt.Sprintf(" %d%% under %d/s", p.GetElastic().GetCeilingPercent(), p.GetElastic().GetCapacity())
		}
		if p.CountDenied {
			mode += ", count denied"
		}
		if p.Colocate {
			mode += ", colocated"
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

func orNone(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
