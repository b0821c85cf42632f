package metrics

import (
	"encoding/json"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// names returns the metric names of our collectors.
func names() map[string]bool {
	ch := make(chan *prometheus.Desc, 100)
	go func() {
		for _, c := range ours() {
			c.Describe(ch)
		}
		close(ch)
	}()
	fq := regexp.MustCompile(`fqName: "([^"]+)"`)
	out := map[string]bool{}
	for d := range ch {
		if m := fq.FindStringSubmatch(d.String()); m != nil {
			out[m[1]] = true
		}
	}
	return out
}

// Every floodgate_ and grpc_server_ metric the Grafana dashboard queries is
// one this package exports: a renamed metric breaks this test, not a
// dashboard in production.
func TestDashboardQueriesExportedMetrics(t *testing.T) {
	b, err := os.ReadFile("../deploy/grafana/floodgate.json")
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Panels []struct {
			Title   string
			Targets []struct{ Expr string }
		}
	}
	if err := json.Unmarshal(b, &dash); err != nil {
		t.Fatal(err)
	}
	have := names()
	used := regexp.MustCompile(`\b(floodgate_[a-z_]+|grpc_server_[a-z_]+)`)
	seen := 0
	for _, p := range dash.Panels {
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, tg := range p.Targets {
			for _, m := range used.FindAllString(tg.Expr, -1) {
				base := m
				for _, suf := range []string{"_bucket", "_sum", "_count"} {
					base = strings.TrimSuffix(base, suf)
				}
				if !have[base] && !have[m] {
					t.Errorf("panel %q queries %s, which floodgate does not export", p.Title, m)
				}
				seen++
			}
		}
	}
	if seen < 10 {
		t.Errorf("the dashboard queries only %d floodgate metrics", seen)
	}
}

func TestOutcome(t *testing.T) {
	for _, c := range []struct {
		allowed, wouldDeny bool
		want               string
	}{{true, false, Allowed}, {false, false, Denied}, {true, true, ShadowDenied}} {
		if got := Outcome(c.allowed, c.wouldDeny); got != c.want {
			t.Errorf("Outcome(%v, %v) = %s", c.allowed, c.wouldDeny, got)
		}
	}
}

func TestNodeGaugesCollected(t *testing.T) {
	reg := prometheus.NewRegistry()
	reg.MustRegister(nodeCollector{func() NodeGauges {
		left := 65530
		return NodeGauges{Replicas: 3, Leading: 1, Keys: 42, KeyBytes: 4096, LogBytes: 8192, KeysRefused: 7, MetaLeader: true, Members: map[string]int{"alive": 2, "dead": 1},
			GroupIDsLeft: &left}
	}})
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, f := range fams {
		for _, m := range f.Metric {
			name := f.GetName()
			for _, l := range m.Label {
				name += "/" + l.GetValue()
			}
			got[name] = m.GetGauge().GetValue() + m.GetCounter().GetValue()
		}
	}
	for name, want := range map[string]float64{"floodgate_replicas": 3, "floodgate_groups_led": 1, "floodgate_keys": 42,
		"floodgate_meta_leader": 1, "floodgate_members/alive": 2, "floodgate_members/dead": 1, "floodgate_groups_leaderless": 0,
		"floodgate_key_states_refused_total": 7, "floodgate_key_state_bytes": 4096, "floodgate_raft_log_bytes": 8192,
		"floodgate_group_ids_left": 65530} {
		if got[name] != want {
			t.Errorf("%s = %v, want %v (all: %v)", name, got[name], want, got)
		}
	}
}
