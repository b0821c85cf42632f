package metrics

import (
	"testing"
	"time"

	gometrics "github.com/armon/go-metrics"
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
