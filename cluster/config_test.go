package cluster

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// A negative duration, or one far too large, is refused by its flag's
// name: it would otherwise start a node that moves replicas at once,
// never flushes fast counts, or never elects a leader.
func TestConfigRefusesNegativeDurations(t *testing.T) {
	good := func() Config {
		return Config{NodeID: "n1", DataDir: t.TempDir(), GRPCAddr: "127.0.0.1:1", RaftAddr: "127.0.0.1:2", GossipAddr: "127.0.0.1:3"}
	}
	if err := good().WithDefaults().Validate(); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		edit func(c *Config)
		want string
	}{
		{func(c *Config) { c.DeadAfter = -time.Second }, "dead-after: must not be negative, got -1s"},
		{func(c *Config) { c.FastFlushInterval = -time.Millisecond }, "fast-flush-interval: must not be negative, got -1ms"},
		{func(c *Config) { c.ReconcileInterval = -1 }, "reconcile interval: must not be negative"},
		{func(c *Config) { c.GossipInterval = -1 }, "gossip interval: must not be negative"},
		{func(c *Config) { c.CommitTimeout = -1 }, "commit timeout: must not be negative"},
		{func(c *Config) { c.MaxSyncDuration = -time.Second }, "max-sync-duration: must not be negative, got -1s"},
		// Flushes of a healthy disk under load take over a second now and then.
		{func(c *Config) { c.MaxSyncDuration = 500 * time.Millisecond }, "max-sync-duration: must be 0 (not watched) or at least 1s, got 500ms"},
		// Typos on the other side: a node that never elects a leader, or
		// pending sums that overflow.
		{func(c *Config) {
			c.HeartbeatTimeout, c.ElectionTimeout, c.LeaderLeaseTimeout = time.Hour, time.Hour, time.Hour
		}, "raft-heartbeat-timeout: must be between 5ms (raft's least) and 1m0s, got 1h0m0s"},
		{func(c *Config) { c.ElectionTimeout = 2 * time.Minute }, "raft-election-timeout: must be between 5ms (raft's least) and 1m0s, got 2m0s"},
		{func(c *Config) { c.FastFlushInterval = 100000 * time.Hour }, "fast-flush-interval: must be at most 1m0s, got 100000h0m0s"},
		{func(c *Config) { c.DeadAfter = 100000 * time.Hour }, "dead-after: must be at most 24h0m0s, got 100000h0m0s"},
		{func(c *Config) { c.FastMaxPending = 1<<63 - 1 }, "fast-max-pending: must be between 1 and 1000000000, got 9223372036854775807"},
	} {
		c := good()
		tc.edit(&c)
		err := c.WithDefaults().Validate()
		if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("got %v, want %q", err, tc.want)
		}
	}
}

// A region is a label like a node id: no spaces or control characters,
// which would reach logs, status and gossip as they are.
func TestConfigRefusesAnUnprintableRegion(t *testing.T) {
	c := Config{NodeID: "n1", DataDir: t.TempDir(), GRPCAddr: "127.0.0.1:1", RaftAddr: "127.0.0.1:2", GossipAddr: "127.0.0.1:3"}
	for region, ok := range map[string]bool{"": true, "eu-west-1": true, "eu\x01west": false, "eu west": false} {
		c.Region = region
		err := c.WithDefaults().Validate()
		if ok != (err == nil) || (err != nil && !strings.HasPrefix(strings.TrimPrefix(err.Error(), ErrConfig.Error()+": "), "region:")) {
			t.Errorf("region %q: %v", region, err)
		}
	}
}

// Raft's own rules on its timeouts are refused by the flags' names, by
// Validate (so --check-config as well), not by raft when the first group
// starts, in raft's field names.
func TestConfigRefusesRaftTimeoutsRaftWouldRefuse(t *testing.T) {
	for _, tc := range []struct {
		heartbeat, election, lease time.Duration
		want                       string
	}{
		{time.Second, 500 * time.Millisecond, 500 * time.Millisecond, "raft-election-timeout: must be at least --raft-heartbeat-timeout (1s), got 500ms"},
		{500 * time.Millisecond, 500 * time.Millisecond, time.Second, "raft-lease-timeout: must not exceed --raft-heartbeat-timeout (500ms), got 1s"},
	} {
		c := Config{NodeID: "n1", DataDir: t.TempDir(), GRPCAddr: "127.0.0.1:1", RaftAddr: "127.0.0.1:2", GossipAddr: "127.0.0.1:3",
			HeartbeatTimeout: tc.heartbeat, ElectionTimeout: tc.election, LeaderLeaseTimeout: tc.lease}
		err := c.WithDefaults().Validate()
		if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("heartbeat %s, election %s, lease %s: got %v, want %q", tc.heartbeat, tc.election, tc.lease, err, tc.want)
		}
	}
	ok := Config{NodeID: "n1", DataDir: t.TempDir(), GRPCAddr: "127.0.0.1:1", RaftAddr: "127.0.0.1:2", GossipAddr: "127.0.0.1:3",
		HeartbeatTimeout: time.Second, ElectionTimeout: time.Second, LeaderLeaseTimeout: time.Second}
	if err := ok.WithDefaults().Validate(); err != nil {
		t.Errorf("equal timeouts: %v", err)
	}
}
