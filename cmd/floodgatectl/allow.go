package main

import (
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/floodgate/floodgate/policyfile"
	pb "github.com/floodgate/floodgate/proto/floodgate/v1"
	"github.com/floodgate/floodgate/rpc/validate"
)

func allowCmd(g *globals) *cobra.Command {
	var (
		lf   limitFlags
		tf   targetFlags
		cost int64
	)
	cmd := &cobra.Command{
		Use:   "allow [KEY]",
		Short: "Check (and count) one request for KEY against a named policy or an inline limit",
		Example: "  floodgatectl allow user:42 --limit 10 --window 1m\n" +
			"  floodgatectl allow user:42 --limit 20000 --algorithm fixed_window --calendar month --cost 0\n" +
			"  floodgatectl allow --policy api --descriptor user=42 --descriptor ip=10.0.0.1",
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			req := &pb.AllowRequest{Cost: &cost}
			var err error
			if req.Key, req.Descriptors, err = tf.target(args); err != nil {
				return err
			}
			if req.Policy, req.Limit, err = lf.policyOrLimit(cmd, tf.policy); err != nil {
				return err
			}
			conn, err := g.dial()
			if err != nil {
				return err
			}
			defer conn.Close()
			ctx, cancel := g.ctx()
			defer cancel()
			resp, err := pb.NewRateLimiterClient(conn).Allow(ctx, req)
			if err != nil {
				return flagFields(err)
			}
			if g.json {
				return g.printJSON(resp)
			}
			key := resp.Key
			if key == "" {
				key = req.Key
			}
			verdict := "allowed"
			switch {
			case !resp.Allowed:
				verdict = fmt.Sprintf("denied (retry after %s)", time.Duration(resp.RetryAfterMs)*time.Millisecond)
			case resp.WouldDeny:
				verdict = "allowed (would have been denied: shadow)"
			}
			fmt.Fprintf(g.out, "%s: %s; %d of %d remaining; resets at %s", key, verdict, resp.Remaining, resp.Limit,
				time.UnixMilli(resp.ResetAtMs).UTC().Format(time.RFC3339Nano))
			if resp.DecidedBy != "" && req.Policy != "" { // an inline limit is always limits[0]
				fmt.Fprintf(g.out, "; decided by %s", resp.DecidedBy)
			}
			fmt.Fprintln(g.out)
			return nil
		},
	}
	tf.register(cmd, "check")
	lf.register(cmd)
	cmd.Flags().Int64Var(&cost, "cost", 1, "units to count; 0 only peeks")
	return cmd
}

// apiLimitField is a field of an inline limit, or the cost, as the API
// names them in a refusal.
var apiLimitField = regexp.MustCompile(`(^|: )(limit\.(?:window_ms|limit|algorithm|burst|buckets|calendar)|cost):`)

// flagFields renames, in a refusal of the check (InvalidArgument), the
// inline limit's fields and the cost to the flags that gave them: the
// API's limit.window_ms is --window.
func flagFields(err error) error {
	st, ok := status.FromError(err)
	if !ok || st.Code() != codes.InvalidArgument {
		return err
	}
	msg := apiLimitField.ReplaceAllStringFunc(st.Message(), func(m string) string {
		sub := apiLimitField.FindStringSubmatch(m)
		return sub[1] + "--" + validate.HandField(strings.TrimPrefix(sub[2], "limit.")) + ":"
	})
	return status.Error(codes.InvalidArgument, msg)
}

// targetFlags pick what a check or reset applies to: a named policy, and
// the key or the descriptors it is built from.
type targetFlags struct {
	policy      string
	descriptors []string
}

func (t *targetFlags) register(cmd *cobra.Command, verb string) {
	f := cmd.Flags()
	f.StringVar(&t.policy, "policy", "", "named policy to "+verb+" under (see policy list) instead of an inline limit")
	f.StringArrayVar(&t.descriptors, "descriptor", nil, "NAME=VALUE to build the key from instead of KEY (repeatable)")
}

// target returns the key (args[0]) or the descriptors: exactly one.
func (t *targetFlags) target(args []string) (string, map[string]string, error) {
	switch {
	case len(args) == 1 && len(t.descriptors) > 0:
		return "", nil, errors.New("give either KEY or --descriptor, not both")
	case len(args) == 1:
		return args[0], nil, nil
	case len(t.descriptors) == 0:
		return "", nil, errors.New("give a KEY or --descriptor NAME=VALUE")
	}
	d := make(map[string]string, len(t.descriptors))
	for _, s := range t.descriptors {
		name, value, ok := strings.Cut(s, "=")
		if !ok || name == "" {
			return "", nil, fmt.Errorf("--descriptor %q: want NAME=VALUE", s)
		}
		if _, dup := d[name]; dup {
			return "", nil, fmt.Errorf("--descriptor: %s given twice", name)
		}
		d[name] = value
	}
	return "", d, nil
}

// limitFlags describe an inline limit.
type limitFlags struct {
	limit, burst   int64
	window         time.Duration
	algorithm, cal string
	buckets        int32
}

// limitFlagNames are the flags of an inline limit, which --policy excludes.
var limitFlagNames = []string{"limit", "window", "algorithm", "buckets", "calendar", "burst"}

func (l *limitFlags) register(cmd *cobra.Command) {
	f := cmd.Flags()
	f.Int64Var(&l.limit, "limit", 10, "inline limit: requests (cost) allowed per window")
	f.DurationVar(&l.window, "window", time.Minute, "inline limit: window length")
	f.StringVar(&l.algorithm, "algorithm", "sliding_log", "inline limit: "+strings.Join(policyfile.AlgorithmNames(), ", "))
	f.Int32Var(&l.buckets, "buckets", 0, "inline limit: buckets of a sliding counter (default 60, or the most below that divide the window)")
	f.StringVar(&l.cal, "calendar", "", "inline limit: calendar period of a fixed window: "+strings.Join(policyfile.CalendarNames(), ", "))
	f.Int64Var(&l.burst, "burst", 0, "inline limit: token bucket size or GCRA burst")
}

// policyOrLimit returns the named policy, or else the inline limit of the
// flags; it refuses limit flags alongside --policy.
func (l *limitFlags) policyOrLimit(cmd *cobra.Command, policy string) (string, *pb.Limit, error) {
	if policy != "" {
		for _, name := range limitFlagNames {
			if cmd.Flags().Changed(name) {
				return "", nil, fmt.Errorf("--%s describes an inline limit: give either --policy or limit flags", name)
			}
		}
		return policy, nil, nil
	}
	lim, err := l.build(cmd)
	return "", lim, err
}

// build returns the inline limit the flags describe.
func (l *limitFlags) build(cmd *cobra.Command) (*pb.Limit, error) {
	alg, ok := pb.Algorithm_value[strings.ToUpper(l.algorithm)]
	if !ok {
		return nil, fmt.Errorf("--algorithm: unknown algorithm %q (%s)", l.algorithm, strings.Join(policyfile.AlgorithmNames(), ", "))
	}
	unit := pb.CalendarUnit_CALENDAR_UNIT_UNSPECIFIED
	if l.cal != "" {
		v, ok := pb.CalendarUnit_value["CALENDAR_UNIT_"+strings.ToUpper(l.cal)]
		if !ok {
			return nil, fmt.Errorf("--calendar: unknown unit %q (%s)", l.cal, strings.Join(policyfile.CalendarNames(), ", "))
		}
		unit = pb.CalendarUnit(v)
	}
	if l.window%time.Millisecond != 0 {
		return nil, fmt.Errorf("--window: %s is not a whole number of milliseconds", l.window)
	}
	lim := &pb.Limit{
		Algorithm: pb.Algorithm(alg), Limit: l.limit, WindowMs: l.window.Milliseconds(),
		Buckets: l.buckets, Calendar: unit, Burst: l.burst,
	}
	if unit != pb.CalendarUnit_CALENDAR_UNIT_UNSPECIFIED && !cmd.Flags().Changed("window") {
		lim.WindowMs = 0
	}
	return lim, nil
}
