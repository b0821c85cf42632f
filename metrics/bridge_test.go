package metrics

import (
	"testing"
	"testing/synctest"
	"time"

	gometrics "github.com/armon/go-metrics"
	"github.com/prometheus/client_golang/prometheus"
)

// The bridge passes what operators watch and drops raft's per-entry
// timings, which cost CPU on every check.
func TestBridgeFilter(t *testing.T) {
	sink := gometrics.NewInmemSink(time.Hour, time.Hour)
	m, err := gometrics.New(bridgeConfig(), sink)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	kept := [][]string{
		{"raft", "state", "leader"},
		{"raft", "transition", "heartbeat_timeout"},
		{"raft", "leader", "lastContact"},
		{"raft", "commitTime"},
		{"raft", "snapshot", "persist"},
		{"memberlist", "gossip"},
	}
	dropped := [][]string{
		{"raft", "net", "rpcDecode"},
		{"raft", "rpc", "appendEntries", "storeLogs"},
		{"raft", "fsm", "apply"},
		{"raft", "fsm", "applyBatchNum"},
		{"raft", "replication", "appendEntries", "rpc", "n2"},
		{"raft", "leader", "dispatchLog"},
		{"raft", "apply"},
		{"raft", "commitNumLogs"},
		{"raft", "replication", "heartbeat", "n2"}, // every heartbeat: most of an idle node's work
		{"raft", "peers"},                          // one series for all groups: the last writer's
		{"memberlist", "size", "local"},            // a misread of memberlist's own
	}
	for _, k := range append(append([][]string{}, kept...), dropped...) {
		m.MeasureSince(k, start)
		m.SetGauge(k, 1)
	}
	got := map[string]bool{}
	for _, iv := range sink.Data() {
		for name := range iv.Samples {
			got[name] = true
		}
	}
	for _, k := range kept {
		if name := join(k); !got[name] {
			t.Errorf("%s was dropped; got %v", name, got)
		}
	}
	for _, k := range dropped {
		if name := join(k); got[name] {
			t.Errorf("%s passed the bridge", name)
		}
	}
}

func join(k []string) string {
	s := k[0]
	for _, p := range k[1:] {
		s += "." + p
	}
	return s
}

// An election or a dead member shows in rate() however long the node was
// quiet before it: event counters are declared at zero and never expire,
// while other bridged series still go after Expiration (a removed peer's).
func TestBridgeEventsOutliveQuiet(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		reg := prometheus.NewRegistry()
		sink, err := bridgeSink(reg)
		if err != nil {
			t.Fatal(err)
		}
		m, err := gometrics.New(bridgeConfig(), sink)
		if err != nil {
			t.Fatal(err)
		}
		values := func() map[string]float64 {
			t.Helper()
			mfs, err := reg.Gather()
			if err != nil {
				t.Fatal(err)
			}
			got := map[string]float64{}
			for _, mf := range mfs {
				for _, mt := range mf.GetMetric() {
					got[mf.GetName()] = mt.GetCounter().GetValue() + mt.GetGauge().GetValue() + float64(mt.GetSummary().GetSampleCount())
				}
			}
			return got
		}
		before := values()
		for _, name := range []string{"raft_state_candidate", "memberlist_msg_dead", "memberlist_health_score"} {
			if v, ok := before[name]; !ok || v != 0 {
				t.Errorf("%s before any event: %v (present %v), want a series at 0", name, v, ok)
			}
		}
		m.IncrCounter([]string{"raft", "state", "candidate"}, 1)
		m.IncrCounterWithLabels([]string{"memberlist", "msg", "dead"}, 1, nil)
		m.SetGaugeWithLabels([]string{"memberlist", "health", "score"}, 2, nil)
		m.MeasureSince([]string{"raft", "commitTime"}, time.Now().Add(-time.Millisecond))
		if _, ok := values()["raft_commitTime"]; !ok {
			t.Fatal("raft_commitTime did not pass the bridge")
		}
		time.Sleep(6 * time.Minute)
		after := values()
		for name, want := range map[string]float64{"raft_state_candidate": 1, "memberlist_msg_dead": 1, "memberlist_health_score": 2} {
			if after[name] != want {
				t.Errorf("%s after 6 quiet minutes: %v, want %v", name, after[name], want)
			}
		}
		if _, ok := after["raft_commitTime"]; ok {
			t.Error("raft_commitTime, not an event, outlived Expiration")
		}
		m.IncrCounter([]string{"raft", "state", "candidate"}, 1)
		if v := values()["raft_state_candidate"]; v != 2 {
			t.Errorf("raft_state_candidate after a second election: %v, want 2", v)
		}
	})
}
