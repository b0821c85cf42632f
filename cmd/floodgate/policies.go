package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/floodgate/floodgate/cluster"
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

// seedPolicies stores ps once the node is a member, if the cluster has no
// policies yet: a new cluster starts with the file's policies (a
// ConfigMap), and a running one keeps what operators applied since. It
// retries while the meta group is busy electing, for up to a minute.
func seedPolicies(ctx context.Context, node *cluster.Node, ps []*policy.Policy, log *slog.Logger) {
	if len(ps) == 0 {
		return
	}
	for attempt := 0; attempt < 30; attempt++ {
		if len(node.View().Policies) > 0 {
			log.Info("--policies: the cluster has policies already; left as they are", "policies", len(node.View().Policies))
			return
		}
		sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		err := node.SetPolicies(sctx, ps)
		cancel()
		if err == nil {
			log.Info("--policies: stored the file's policies in the new cluster", "policies", len(ps))
			return
		}
		log.Warn("--policies: not stored yet; retrying", "err", err)
		select {
		case <-ctx.Done():
			return
		case <-time.After(2 * time.Second):
		}
	}
}
