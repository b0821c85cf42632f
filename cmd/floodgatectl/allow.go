package main

import (
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	pb "github.com/floodgate/floodgate/proto/floodgate/v1"
)

func allowCmd(g *globals) *cobra.Command {
	var (
		limit, cost, burst int64
		window             time.Duration
		algorithm, cal     string
		buckets            int32
	)
	cmd := &cobra.Command{
		Use:   "allow KEY",
		Short: "Check (and count) one request for KEY against an inline limit",
		Example: "  floodgatectl allow user:42 --limit 10 --window 1m\n" +
			"  floodgatectl allow user:42 --limit 20000 --algorithm fixed_window --calendar month --cost 0",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			alg, ok := pb.Algorithm_value[strings.ToUpper(algorithm)]
			if !ok {
				return fmt.Errorf("--algorithm: unknown algorithm %q (sliding_log, sliding_counter, sliding_counter_weighted, fixed_window, token_bucket, gcra)", algorithm)
			}
			unit := pb.CalendarUnit_CALENDAR_UNIT_UNSPECIFIED
			if cal != "" {
				v, ok := pb.CalendarUnit_value["CALENDAR_UNIT_"+strings.ToUpper(cal)]
				if !ok {
					return fmt.Errorf("--calendar: unknown unit %q (minute, hour, day, week, month, year)", cal)
				}
				unit = pb.CalendarUnit(v)
			}
			req := &pb.AllowRequest{
				Key: args[0],
				Limit: &pb.Limit{
					Algorithm: pb.Algorithm(alg), Limit: limit, WindowMs: window.Milliseconds(),
					Buckets: buckets, Calendar: unit, Burst: burst,
				},
				Cost: &cost,
			}
			if unit != pb.CalendarUnit_CALENDAR_UNIT_UNSPECIFIED && !cmd.Flags().Changed("window") {
				req.Limit.WindowMs = 0
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
				return err
			}
			if g.json {
				return g.printJSON(resp)
			}
			verdict := "allowed"
			if !resp.Allowed {
				verdict = fmt.Sprintf("denied (retry after %s)", time.Duration(resp.RetryAfterMs)*time.Millisecond)
			}
			fmt.Fprintf(g.out, "%s: %s; %d of %d remaining; resets at %s\n", args[0], verdict, resp.Remaining, resp.Limit,
				time.UnixMilli(resp.ResetAtMs).UTC().Format(time.RFC3339Nano))
			return nil
		},
	}
	f := cmd.Flags()
	f.Int64Var(&limit, "limit", 10, "requests (cost) allowed per window")
	f.DurationVar(&window, "window", time.Minute, "window length")
	f.StringVar(&algorithm, "algorithm", "sliding_log", "sliding_log, sliding_counter, sliding_counter_weighted, fixed_window, token_bucket or gcra")
	f.Int32Var(&buckets, "buckets", 0, "buckets of a sliding counter (default 60)")
	f.StringVar(&cal, "calendar", "", "calendar period of a fixed window: minute, hour, day, week, month or year")
	f.Int64Var(&burst, "burst", 0, "token bucket size or GCRA burst")
	f.Int64Var(&cost, "cost", 1, "units to count; 0 only peeks")
	return cmd
}
