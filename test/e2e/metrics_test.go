package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	pb "github.com/floodgate/floodgate/proto/floodgate/v1"
)

// scrape reads a node's /metrics.
func scrape(t *testing.T, n *Node) map[string]*dto.MetricFamily {
	t.Helper()
	resp, err := http.Get("http://" + n.HTTP + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("/metrics: %s", resp.Status)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return fams
}

// servedWithTLSOnly are metrics a node serves only with TLS on, which this
// test's cluster is not: TestSecuredCluster finds them in its scrape.
var servedWithTLSOnly = map[string]bool{"floodgate_tls_certificate_expiration_timestamp_seconds": true}

// value sums the samples of a family whose labels include want.
func value(fams map[string]*dto.MetricFamily, name string, want map[string]string) float64 {
	var sum float64
	for _, m := range seriesOf(fams, name, want) {
		switch {
		case m.Counter != nil:
			sum += m.Counter.GetValue()
		case m.Gauge != nil:
			sum += m.Gauge.GetValue()
		case m.Histogram != nil:
			sum += float64(m.Histogram.GetSampleCount())
		case m.Untyped != nil:
			sum += m.Untyped.GetValue()
		case m.Summary != nil:
			sum += float64(m.Summary.GetSampleCount())
		}
	}
	return sum
}

// A scrape of a real node's /metrics: the counters move with the checks
// it answers, and Raft's, memberlist's and gRPC's own metrics are there.
func TestMetricsMove(t *testing.T) {
	t.Parallel()
	c := startCluster(t, 3)
	n := c.Running()[0]
	before := scrape(t, n)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for range 3 { // 2 allowed, 1 denied
		if _, err := n.Limiter().Allow(ctx, &pb.AllowRequest{Key: "metrics:1", Limit: slidingLog(2, time.Minute)}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := n.Limiter().Allow(ctx, &pb.AllowRequest{Key: "metrics:2"}); err == nil {
		t.Fatal("a check with no limit was answered")
	}
	after := scrape(t, n)
	delta := func(name string, labels map[string]string) float64 {
		return value(after, name, labels) - value(before, name, labels)
	}
	inline := map[string]string{"policy": "inline", "consistency": "strict", "limit": "limits[0]"}
	for outcome, want := range map[string]float64{"allowed": 2, "denied": 1} {
		l := map[string]string{"outcome": outcome}
		for k, v := range inline {
			l[k] = v
		}
		if got := delta("floodgate_decisions_total", l); got != want {
			t.Errorf("floodgate_decisions_total %v moved by %v, want %v", l, got, want)
		}
	}
	if got := delta("grpc_server_handled_total", map[string]string{"grpc_method": "Allow", "grpc_code": "OK"}); got != 3 {
		t.Errorf("grpc_server_handled_total Allow OK moved by %v, want 3", got)
	}
	if got := delta("grpc_server_handled_total", map[string]string{"grpc_method": "Allow", "grpc_code": "InvalidArgument"}); got != 1 {
		t.Errorf("grpc_server_handled_total Allow InvalidArgument moved by %v, want 1", got)
	}
	if got := delta("grpc_server_handling_seconds", map[string]string{"grpc_method": "Allow"}); got != 4 {
		t.Errorf("grpc_server_handling_seconds Allow observed %v, want 4", got)
	}
	// Checks went to the key's leader, here or forwarded: one of the
	// cluster's nodes wrote them in a group commit.
	var commits float64
	var entries, timed uint64
	for _, m := range c.Running() {
		got := scrape(t, m)
		for _, h := range got["floodgate_group_commit_checks"].GetMetric() {
			commits += h.GetHistogram().GetSampleSum()
			entries += h.GetHistogram().GetSampleCount()
		}
		for _, h := range got["floodgate_group_commit_duration_seconds"].GetMetric() {
			timed += h.GetHistogram().GetSampleCount()
		}
	}
	if commits < 3 {
		t.Errorf("group commits counted %v checks over the cluster, want at least 3", commits)
	}
	// Each entry is timed once answered; one still in flight is not yet.
	if timed == 0 || timed > entries {
		t.Errorf("%d group commits timed for %d entries written", timed, entries)
	}
	if got := value(after, "floodgate_members", map[string]string{"state": "alive"}); got != 3 {
		t.Errorf("floodgate_members{state=alive} = %v, want 3", got)
	}
	if value(after, "floodgate_raftlog_fsync_duration_seconds", nil) == 0 {
		t.Error("no fsync observed")
	}
	var raftSeen, memberlistSeen bool
	for name := range after {
		raftSeen = raftSeen || strings.HasPrefix(name, "raft_")
		memberlistSeen = memberlistSeen || strings.HasPrefix(name, "memberlist_")
	}
	if !raftSeen || !memberlistSeen {
		t.Errorf("raft metrics %v, memberlist metrics %v: the go-metrics bridge is missing", raftSeen, memberlistSeen)
	}

	// Every metric the Grafana dashboard and the alerting rules name,
	// bridged ones included, is in a live scrape of the cluster.
	live := map[string]bool{}
	for _, m := range c.Running() {
		for name := range scrape(t, m) {
			live[name] = true
		}
	}
	for _, name := range append(dashboardMetrics(t), alertMetrics(t)...) {
		base := name
		for _, suf := range []string{"_bucket", "_sum", "_count"} {
			if b, ok := strings.CutSuffix(name, suf); ok && live[b] {
				base = b
			}
		}
		if !live[base] && !servedWithTLSOnly[base] {
			t.Errorf("the dashboard or an alert queries %s, which no node serves", name)
		}
	}

	// Every node reads the others' clocks (every 5 s; the gauge is absent
	// until then): on one machine they agree to well under a millisecond.
	cctx, ccancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer ccancel()
	for _, m := range c.Running() {
		waitFor(t, cctx, m.ID+"'s clock reading", func() error {
			fams := scrape(t, m)
			if fams["floodgate_clock_offset_seconds"] == nil {
				return fmt.Errorf("no floodgate_clock_offset_seconds yet")
			}
			if off := value(fams, "floodgate_clock_offset_seconds", nil); off > 0.01 || off < -0.01 {
				return fmt.Errorf("floodgate_clock_offset_seconds = %v", off)
			}
			return nil
		})
	}
}

// dashboardMetrics lists the metric names deploy/grafana/floodgate.json
// queries.
func dashboardMetrics(t *testing.T) []string {
	t.Helper()
	root, err := ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(root, "deploy", "grafana", "floodgate.json"))
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Panels []struct{ Targets []struct{ Expr string } }
	}
	if err := json.Unmarshal(b, &dash); err != nil {
		t.Fatal(err)
	}
	metric := regexp.MustCompile(`\b(?:floodgate|grpc_server|raft|memberlist)_[A-Za-z_]+`)
	var out []string
	for _, p := range dash.Panels {
		for _, tg := range p.Targets {
			out = append(out, metric.FindAllString(tg.Expr, -1)...)
		}
	}
	if len(out) < 10 {
		t.Fatalf("the dashboard queries only %d metrics: %v", len(out), out)
	}
	return out
}

// alertMetrics lists the metric names deploy/prometheus/alerts.yaml names,
// in its expressions and in its advice alike.
func alertMetrics(t *testing.T) []string {
	t.Helper()
	root, err := ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(root, "deploy", "prometheus", "alerts.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	out := regexp.MustCompile(`\b(?:floodgate|raft)_[A-Za-z_]+`).FindAllString(string(b), -1)
	if len(out) < 7 {
		t.Fatalf("the alerts name only %d metrics: %v", len(out), out)
	}
	return out
}

// A deleted policy's decision series leave the node's /metrics (within
// about a second), so that policies made and deleted by name (one per
// tenant) do not grow the scrape for the life of the process.
func TestMetricsOfADeletedPolicyGo(t *testing.T) {
	t.Parallel()
	c := startCluster(t, 1)
	n := c.Running()[0]
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	tenant := &pb.Policy{Name: "tenant-gone", Limits: []*pb.PolicyLimit{{Name: "minute", Limit: slidingLog(5, time.Minute)}}}
	if _, err := n.Admin().SetPolicies(ctx, &pb.SetPoliciesRequest{Policies: []*pb.Policy{tenant}}); err != nil {
		t.Fatal(err)
	}
	if _, err := n.Limiter().Allow(ctx, &pb.AllowRequest{Key: "tenant:1", Policy: "tenant-gone"}); err != nil {
		t.Fatal(err)
	}
	series := func() float64 {
		return float64(len(seriesOf(scrape(t, n), "floodgate_decisions_total", map[string]string{"policy": "tenant-gone"})))
	}
	if got := series(); got != 1 {
		t.Fatalf("%v series of the policy before its deletion, want 1", got)
	}
	if _, err := n.Admin().DeletePolicy(ctx, &pb.DeletePolicyRequest{Name: "tenant-gone"}); err != nil {
		t.Fatal(err)
	}
	for series() != 0 {
		if ctx.Err() != nil {
			t.Fatal("the deleted policy's decision series are still served")
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// seriesOf returns the samples of a family whose labels include want.
func seriesOf(fams map[string]*dto.MetricFamily, name string, want map[string]string) []*dto.Metric {
	var out []*dto.Metric
next:
	for _, m := range fams[name].GetMetric() {
		labels := map[string]string{}
		for _, l := range m.Label {
			labels[l.GetName()] = l.GetValue()
		}
		for k, v := range want {
			if labels[k] != v {
				continue next
			}
		}
		out = append(out, m)
	}
	return out
}
