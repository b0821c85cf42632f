package main

import (
	"fmt"

	"github.com/spf13/cobra"

	pb "github.com/floodgate/floodgate/proto/floodgate/v1"
)

func resetCmd(g *globals) *cobra.Command {
	var (
		lf limitFlags
		tf targetFlags
	)
	cmd := &cobra.Command{
		Use:   "reset [KEY]",
		Short: "Forget every count of KEY under a named policy or an inline limit",
		Long: "Forget every count of a key, through Raft, so its next request starts afresh.\n" +
			"Give the key, or the descriptors it is built from, and the policy (or the\n" +
			"inline limit flags, which must match the limit the key was counted under).",
		Example: "  floodgatectl reset user:42 --policy api\n" +
			"  floodgatectl reset --policy api --descriptor user=42 --descriptor ip=10.0.0.1\n" +
			"  floodgatectl reset user:42 --limit 10 --window 1m",
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			req := &pb.ResetKeyRequest{}
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
			resp, err := admin(conn).ResetKey(ctx, req)
			if err != nil {
				return err
			}
			if g.json {
				return g.printJSON(resp)
			}
			fmt.Fprintf(g.out, "reset %s: %d %s\n", resp.Key, resp.States, plural(int(resp.States), "state", "states"))
			return nil
		},
	}
	tf.register(cmd, "reset")
	lf.register(cmd)
	return cmd
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
