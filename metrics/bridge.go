package metrics

import (
	"fmt"
	"time"

	gometrics "github.com/armon/go-metrics"
	gmprom "github.com/armon/go-metrics/prometheus"
)

// Bridge routes what hashicorp/raft and memberlist emit through go-metrics
// (raft_*, memberlist_*; they use armon/go-metrics through go-metrics'
// compat package) into Registry. Call it once, before the node starts.
func Bridge() error {
	sink, err := gmprom.NewPrometheusSinkFrom(gmprom.PrometheusOpts{
		Name:       "floodgate_gometrics",
		Registerer: Registry,
		// A series nobody updates for this long (a removed peer's) goes.
		Expiration: 5 * time.Minute,
	})
	if err != nil {
		return fmt.Errorf("metrics: go-metrics bridge: %w", err)
	}
	cfg := gometrics.DefaultConfig("")
	cfg.EnableHostname = false
	cfg.EnableHostnameLabel = false
	cfg.EnableRuntimeMetrics = false // the Go collector has them
	cfg.EnableTypePrefix = false
	if _, err := gometrics.NewGlobal(cfg, sink); err != nil {
		return fmt.Errorf("metrics: go-metrics bridge: %w", err)
	}
	return nil
}
