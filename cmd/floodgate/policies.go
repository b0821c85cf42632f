package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/floodgate/floodgate/cluster"
	"github.com/floodgate/floodgate/fsm"
	"github.com/floodgate/floodgate/policy"
	"github.com/floodgate/floodgate/policyfile"
)

// readPolicyFile parses and validates --policies before anything starts.
func readPolicyFile(file string, maxLog int64) ([]*policy.Policy, error) {
	if file == "" {
		return nil, nil
	}
	f, err := os.Open(file)
	if err != nil {
		return nil, fmt.Errorf("policies: %w", err)
	}
	defer f.Close()
	pps, err := policyfile.Parse(f)
	if err != nil {
		return nil, fmt.Errorf("policies: %s: %w", file, err)
	}
	ps, err := policyfile.Validate(pps, maxLog)
	if err != nil {
		return nil, fmt.Errorf("policies: %s: %w", file, err)
	}
	return ps, nil
}

// seedNode is what seedPolicies needs of a node (a *cluster.Node).
type seedNode interface {
	CatchUpMeta(context.Context) error
	View() *fsm.MetaView
	SetPolicies(context.Context, []*policy.Policy) error
}

// seedPolicies stores ps once the node is a member, if the cluster has no
// policies yet: a new cluster starts with the file's policies (a
// ConfigMap), and a running one keeps what operators applied since. It
// judges "none yet" only on a meta state caught up with the meta leader's:
// a node restarted on its data starts from its last snapshot, and one
// that joins may not have applied the whole log yet, so its own state may
// not show policies the cluster has; seeding on it would put the file's
// back over an operator's apply. It retries while the meta group is busy
// electing, for up to a minute; a refusal of the policies themselves (the
// meta leader's --max-log-length is lower than this node's, say) is final
// and logged as such.
func seedPolicies(ctx context.Context, node seedNode, ps []*policy.Policy, log *slog.Logger) {
	if len(ps) == 0 {
		return
	}
	var err error
	for attempt := 0; attempt < 30; attempt++ {
		sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		err = node.CatchUpMeta(sctx)
		if err == nil {
			if n := len(node.View().Policies); n > 0 {
				cancel()
				log.Info("--policies: the cluster has policies already; left as they are", "policies", n)
				return
			}
			err = node.SetPolicies(sctx, ps)
		}
		cancel()
		if err == nil {
			log.Info("--policies: stored the file's policies in the new cluster", "policies", len(ps))
			return
		}
		if cluster.MetaRefused(err) {
			log.Error("--policies: the cluster refused the file's policies; none stored: fix the file and apply it with floodgatectl policy apply", "err", err)
			return
		}
		log.Warn("--policies: not stored yet; retrying", "err", err)
		select {
		case <-ctx.Done():
			return
		case <-time.After(2 * time.Second):
		}
	}
	log.Error("--policies: gave up storing the file's policies; apply the file with floodgatectl policy apply", "err", err)
}
