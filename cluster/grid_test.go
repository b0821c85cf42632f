package cluster

import (
	"errors"
	"strings"
	"testing"
	"testing/synctest"
	"time"
)

// tick's channel closes at the next instant of the grid, the same one for
// everybody who asks before it; asked at an instant, it is the next one.
func TestGridTicksOnItsInstants(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const every = 200 * time.Millisecond
		g := newGrid(every)
		for _, off := range []time.Duration{0, time.Millisecond, 73 * time.Millisecond, every - time.Nanosecond} {
			sleepPastInstant(every, off)
			start := time.Now()
			a := g.tick()
			time.Sleep(min(every-off, every) / 2)
			if b := g.tick(); b != a {
				t.Fatalf("%s past an instant: a second caller waits for another instant", off)
			}
			<-a
			want := every - off
			if took := time.Since(start); took != want {
				t.Fatalf("%s past an instant: the tick came after %s, want %s", off, took, want)
			}
			if time.Now().UnixNano()%int64(every) != 0 {
				t.Fatalf("%s past an instant: the tick came off the grid", off)
			}
			if c := g.tick(); c == a {
				t.Fatal("asked at an instant, tick gave the instant that passed")
			}
		}
	})
}

// sleepPastInstant sleeps until off past an instant of a grid of period
// every.
func sleepPastInstant(every, off time.Duration) {
	time.Sleep((off - time.Duration(time.Now().UnixNano()%int64(every)) + every) % every)
}

// Raft timeouts below raft's least are refused at start, naming the flag:
// the grid's period derives from them and must not be zero.
func TestRaftTimeoutsBelowRaftsLeastAreRefused(t *testing.T) {
	base := Config{NodeID: "n1", DataDir: t.TempDir(), GRPCAddr: "127.0.0.1:7700", RaftAddr: "127.0.0.1:7702",
		GossipAddr: "127.0.0.1:7703"}.WithDefaults()
	if err := base.Validate(); err != nil {
		t.Fatalf("the base config: %v", err)
	}
	for flag, set := range map[string]func(*Config){
		"raft-heartbeat-timeout": func(c *Config) { c.HeartbeatTimeout = time.Millisecond },
		"raft-election-timeout":  func(c *Config) { c.ElectionTimeout = -time.Second },
		"raft-lease-timeout":     func(c *Config) { c.LeaderLeaseTimeout = 4 * time.Millisecond },
	} {
		c := base
		set(&c)
		if err := c.Validate(); !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), flag) {
			t.Errorf("%s below 5ms: %v, want a config error naming it", flag, err)
		}
	}
}
