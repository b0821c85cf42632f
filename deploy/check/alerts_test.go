package check

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/histogram"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/rulefmt"
	"github.com/prometheus/prometheus/promql"
	"github.com/prometheus/prometheus/promql/parser"
	"github.com/prometheus/prometheus/storage"
	"github.com/prometheus/prometheus/template"
	"github.com/prometheus/prometheus/tsdb/chunkenc"
	"github.com/prometheus/prometheus/tsdb/chunks"
	"github.com/prometheus/prometheus/util/annotations"
)

const alertsFile = "../prometheus/alerts.yaml"

// promQL parses as Prometheus does by default.
var promQL = parser.NewParser(parser.Options{})

// step is both the scrape and the rule evaluation interval of the tests.
const step = 15 * time.Second

// loadAlerts parses alerts.yaml as Prometheus does when it loads a rule
// file: YAML with no unknown field, every expression and template valid.
func loadAlerts(t *testing.T) []rulefmt.Rule {
	t.Helper()
	groups, errs := rulefmt.ParseFile(alertsFile, false, model.UTF8Validation, promQL, slog.New(slog.DiscardHandler))
	for _, err := range errs {
		t.Error(err)
	}
	if len(errs) > 0 {
		t.FailNow()
	}
	var out []rulefmt.Rule
	for _, g := range groups.Groups {
		out = append(out, g.Rules...)
	}
	return out
}

// Every rule is an alert that waits before firing, says how bad it is and
// what to do.
func TestAlertsAreComplete(t *testing.T) {
	rules := loadAlerts(t)
	if len(rules) < 5 {
		t.Fatalf("only %d rules", len(rules))
	}
	seen := map[string]bool{}
	for _, r := range rules {
		switch {
		case r.Alert == "":
			t.Errorf("rule %q is not an alert", r.Record)
		case seen[r.Alert]:
			t.Errorf("%s: defined twice", r.Alert)
		case !strings.HasPrefix(r.Alert, "Floodgate"):
			t.Errorf("%s: not named Floodgate…", r.Alert)
		case r.For == 0:
			t.Errorf("%s: fires on one evaluation (no for:)", r.Alert)
		case r.Labels["severity"] != "critical" && r.Labels["severity"] != "warning":
			t.Errorf("%s: severity %q, want critical or warning", r.Alert, r.Labels["severity"])
		case r.Annotations["summary"] == "" || r.Annotations["description"] == "":
			t.Errorf("%s: needs a summary and a description", r.Alert)
		}
		seen[r.Alert] = true
	}
}

// Each alert fires on the fault it names, only after its for: has passed,
// with its summary rendered from the value; and on a healthy cluster under
// load (callers' own mistakes included) none fires at any time.
func TestAlertsFire(t *testing.T) {
	rules := loadAlerts(t)
	const from = 10 // the minute each fault begins
	cases := []struct {
		name   string
		fault  map[string]func(min float64) float64 // series → value at a minute, replacing the healthy one
		by     time.Duration                        // when the alert must be firing
		fires  string                               // "" for none at any time
		labels map[string]string                    // of the alert, beyond the rule's
		says   string                               // in its summary
	}{
		{name: "healthy"},
		{name: "a group without leader", fires: "FloodgateGroupLeaderless", by: 11 * time.Minute, says: "30s",
			fault: map[string]func(float64) float64{`floodgate_groups_leaderless{instance="n2"}`: after(from, 0, 1)}},
		{name: "no meta leader", fires: "FloodgateNoMetaLeader", by: 12 * time.Minute, says: "no meta leader",
			fault: map[string]func(float64) float64{`floodgate_meta_leader{instance="n1"}`: after(from, 1, 0)}},
		{name: "a member dead", fires: "FloodgateMemberDead", by: 13 * time.Minute, says: "dead for 2m",
			fault: map[string]func(float64) float64{`floodgate_members{instance="n1",state="dead"}`: after(from, 0, 1),
				`floodgate_members{instance="n2",state="dead"}`: after(from, 0, 1)}},
		{name: "a member never back", fires: "FloodgateMemberDead", by: 13 * time.Minute, says: "dead for 2m",
			fault: map[string]func(float64) float64{`floodgate_members{instance="n1",state="unknown"}`: after(from, 0, 1)}},
		{name: "every pod down", fires: "FloodgateNoMetaLeader", by: 17 * time.Minute, says: "no meta leader",
			fault: allDown(from)},
		{name: "a rolling restart", fault: rollingRestart(from)},
		{name: "group ids running out", fires: "FloodgateGroupIdsRunningOut", by: 23 * time.Minute, says: "more groups in this cluster",
			fault: map[string]func(float64) float64{`floodgate_group_ids_left{instance="n1"}`: after(from, 60000, 900)}},
		{name: "a clock off", fires: "FloodgateClockOffset", by: 13 * time.Minute, says: "300ms from the others",
			fault: map[string]func(float64) float64{`floodgate_clock_offset_seconds{instance="n3"}`: after(from, 0.004, -0.3)}},
		{name: "checks failing", fires: "FloodgateCheckErrors", by: 20 * time.Minute, says: "% of floodgate checks fail",
			fault: map[string]func(float64) float64{`floodgate_check_errors_total{code="Unavailable",instance="n1"}`: func(m float64) float64 {
				return 60 * (0.5*m + 60*max(0, m-from)) // 60/s more against 3,000 decisions/s
			}}},
		{name: "checks failing under a flood of invalid requests", fires: "FloodgateCheckErrors", by: 20 * time.Minute, says: "% of floodgate checks fail",
			fault: map[string]func(float64) float64{
				`floodgate_check_errors_total{code="Unavailable",instance="n1"}`: func(m float64) float64 {
					return 60 * (0.5*m + 60*max(0, m-from))
				},
				// A client's bad batches, each refused whole: they are no
				// checks the cluster failed, and must not dilute those.
				`floodgate_check_errors_total{code="InvalidArgument",instance="n2"}`: func(m float64) float64 {
					return 60 * (50*m + 1_000_000*max(0, m-from+5))
				}}},
		{name: "every check failing after a restart", fires: "FloodgateCheckErrors", by: 20 * time.Minute, says: "% of floodgate checks fail",
			fault: restartedFailing(from)},
		{name: "an idle cluster after a restart", fault: restartedIdle(from)},
		{name: "new keys refused", fires: "FloodgateKeyStatesFull", by: 20 * time.Minute, says: "refuses 200 checks of new keys a second",
			fault: map[string]func(float64) float64{`floodgate_key_states_refused_total{instance="n2"}`: func(m float64) float64 {
				return 60 * 200 * max(0, m-from)
			}}},
		{name: "a node shedding checks", fires: "FloodgateOverloaded", by: 20 * time.Minute,
			labels: map[string]string{"instance": "n3"}, says: "n3 is overloaded: it refuses 500 checks a second",
			fault: map[string]func(float64) float64{`floodgate_checks_shed_total{instance="n3"}`: func(m float64) float64 {
				return 60 * 500 * max(0, m-from)
			}}},
		{name: "leaders churning", fires: "FloodgateLeaderChurn", by: 25 * time.Minute, says: "changed",
			fault: map[string]func(float64) float64{`floodgate_leader_changes_total{group="shard",instance="n1"}`: func(m float64) float64 {
				return 2 + 5*max(0, m-from) // five a minute
			}}},
		{name: "a certificate near its end", fires: "FloodgateCertificateExpiring", by: 23 * time.Minute,
			labels: map[string]string{"instance": "n2", "cert": "peer-tls-cert"}, says: "peer-tls-cert certificate on n2 ends in 13d",
			fault: map[string]func(float64) float64{`floodgate_tls_certificate_expiration_timestamp_seconds{cert="peer-tls-cert",instance="n2"}`: func(float64) float64 {
				return 14*86400 + 12*60 // 14 days from minute 12: nobody renewed it
			}}},
		{name: "a node of another cluster at a member's address", fires: "FloodgateOtherClusterAtMemberAddress", by: 17 * time.Minute,
			labels: map[string]string{"instance": "n1"}, says: "n1 refuses a node of another floodgate cluster",
			fault: map[string]func(float64) float64{`floodgate_other_cluster_refusals_total{instance="n1"}`: func(m float64) float64 {
				return 6 * max(0, m-from) // a raftnet redial refused every 10 s
			}}},
		{name: "a slow disk", fires: "FloodgateSlowDisk", by: 25 * time.Minute, labels: map[string]string{"instance": "n2"}, says: "on n2",
			fault: slowFsyncs("n2", from)},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			q := healthy(30)
			for name, f := range c.fault {
				q.set(t, name, f)
			}
			for _, r := range rules {
				timeline := evalAlert(t, q, r, 30*time.Minute)
				if r.Alert != c.fires {
					for at, firing := range timeline {
						if len(firing) > 0 {
							t.Errorf("%s fires at %v: %v", r.Alert, time.Duration(at)*step, firing)
							break
						}
					}
					continue
				}
				// Not before the fault has lasted its for:, and by c.by.
				for i := range int((from*time.Minute + time.Duration(r.For)) / step) {
					if len(timeline[i]) > 0 {
						t.Errorf("%s fires at %v, before the fault has lasted its for: (%v)", r.Alert, time.Duration(i)*step, time.Duration(r.For))
						break
					}
				}
				i := int(c.by / step)
				if len(timeline[i]) != 1 {
					t.Fatalf("%s: %d alerts at %v, want 1", r.Alert, len(timeline[i]), c.by)
				}
				a := timeline[i][0]
				for k, v := range c.labels {
					if a.labels.Get(k) != v {
						t.Errorf("%s: label %s=%q, want %q (%s)", r.Alert, k, a.labels.Get(k), v, a.labels)
					}
				}
				summary := expand(t, r.Alert, r.Annotations["summary"], a)
				description := expand(t, r.Alert, r.Annotations["description"], a)
				if !strings.Contains(summary, c.says) || strings.Contains(summary+description, "<") {
					t.Errorf("%s: summary %q (want %q in it), description %q", r.Alert, summary, c.says, description)
				}
			}
		})
	}
}

// allDown is every node gone from minute m on: no series has a sample
// after it, as when every pod is down and nothing is scraped.
func allDown(m float64) map[string]func(float64) float64 {
	out := map[string]func(float64) float64{}
	for name, f := range healthy(0).funcs {
		out[name] = func(at float64) float64 {
			if at >= m {
				return math.NaN()
			}
			return f(at)
		}
	}
	return out
}

// rollingRestart restarts n1, n2, n3 in turn, two minutes apart, from
// minute m, as a StatefulSet update does: each restarted node's counter
// starts again from 0, its home leadership goes to the next node on
// SIGTERM (+1 there) and comes back once it is up (+1 on it), and the
// meta leadership may move twice more. Each change counts once, on its
// new leader.
func rollingRestart(m float64) map[string]func(float64) float64 {
	nodes := []string{"n1", "n2", "n3"}
	out := map[string]func(float64) float64{}
	for i, n := range nodes {
		restart, prev := m+2*float64(i), m+2*float64((i+2)%3)
		out[`floodgate_leader_changes_total{group="shard",instance="`+n+`"}`] = func(at float64) float64 {
			v := 2.0
			if at >= restart { // a new process counts from 0, then takes its leaderships back
				v = 0
				if at >= restart+0.5 {
					v = 2
				}
			}
			if at >= prev && (prev >= restart || at < restart) { // took the node before it's as it stopped
				v += 2
			}
			return v
		}
	}
	return out
}

// restartedFailing is every node restarted at minute m into a cluster
// that answers no check: a new process has no floodgate_decisions_total
// series until its first decision, and its errors count from 0.
func restartedFailing(m float64) map[string]func(float64) float64 {
	out := map[string]func(float64) float64{}
	for _, n := range []string{"n1", "n2", "n3"} {
		out[`floodgate_decisions_total{instance="`+n+`",outcome="allowed"}`] = func(at float64) float64 {
			if at >= m {
				return math.NaN()
			}
			return 60 * 1000 * at
		}
		out[`floodgate_check_errors_total{code="Unavailable",instance="`+n+`"}`] = func(at float64) float64 {
			if at >= m {
				return 60 * 100 * (at - m)
			}
			return 60 * 0.5 * at
		}
	}
	return out
}

// restartedIdle is every node restarted at minute m and asked nothing
// since: no decisions series, errors served as 0 (0/0 is no alert).
func restartedIdle(m float64) map[string]func(float64) float64 {
	out := map[string]func(float64) float64{}
	for _, n := range []string{"n1", "n2", "n3"} {
		out[`floodgate_decisions_total{instance="`+n+`",outcome="allowed"}`] = func(at float64) float64 {
			if at >= m {
				return math.NaN()
			}
			return 60 * 1000 * at
		}
		for _, code := range []string{"Unavailable", "InvalidArgument"} {
			out[`floodgate_check_errors_total{code="`+code+`",instance="`+n+`"}`] = func(at float64) float64 {
				if at >= m {
					return 0
				}
				return 60 * 0.5 * at
			}
		}
	}
	return out
}

// after is healthy until minute m, then v.
func after(m, healthy, v float64) func(float64) float64 {
	return func(at float64) float64 {
		if at >= m {
			return v
		}
		return healthy
	}
}

// alert is one alert an evaluation found active: its labels and value.
type alert struct {
	labels labels.Labels
	value  float64
}

// evalAlert evaluates r's expression every step over span and returns, at
// each step, the alerts firing then: active at every evaluation of the
// last r.For, as Prometheus's rule manager counts them.
func evalAlert(t *testing.T, q *memStorage, r rulefmt.Rule, span time.Duration) [][]alert {
	t.Helper()
	engine := promql.NewEngine(promql.EngineOpts{MaxSamples: 1e6, Timeout: time.Minute, LookbackDelta: 5 * time.Minute, Parser: promQL})
	steps := int(span/step) + 1
	active := make([]map[string]alert, steps)
	for i := range steps {
		qr, err := engine.NewInstantQuery(context.Background(), q, nil, r.Expr, time.Unix(0, 0).Add(time.Duration(i)*step))
		if err != nil {
			t.Fatalf("%s: %v", r.Alert, err)
		}
		res := qr.Exec(context.Background())
		if res.Err != nil {
			t.Fatalf("%s: %v", r.Alert, res.Err)
		}
		vec, err := res.Vector()
		if err != nil {
			t.Fatalf("%s: %v", r.Alert, err)
		}
		active[i] = map[string]alert{}
		for _, s := range vec {
			active[i][s.Metric.String()] = alert{labels: s.Metric, value: s.F}
		}
		qr.Close()
	}
	need := int(time.Duration(r.For) / step)
	out := make([][]alert, steps)
	for i := range steps {
		if i < need {
			continue
		}
		for key, a := range active[i] {
			held := true
			for j := i - need; j < i; j++ {
				_, ok := active[j][key]
				held = held && ok
			}
			if held {
				out[i] = append(out[i], a)
			}
		}
	}
	return out
}

// expand renders an annotation of an alert as Prometheus does.
func expand(t *testing.T, name, text string, a alert) string {
	t.Helper()
	defs := "{{$labels := .Labels}}{{$externalLabels := .ExternalLabels}}{{$externalURL := .ExternalURL}}{{$value := .Value}}"
	data := template.AlertTemplateData(a.labels.Map(), nil, "", promql.Sample{Metric: a.labels, F: a.value})
	out, err := template.NewTemplateExpander(context.Background(), defs+text, "__alert_"+name, data, 0, nil, nil, nil).Expand()
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return out
}

// healthy is three nodes under load for minutes: every gauge in its
// healthy state, counters growing at a steady rate (with callers' own
// mistakes among the errors), fsyncs of a millisecond.
func healthy(minutes int) *memStorage {
	q := &memStorage{minutes: minutes}
	for _, n := range []string{"n1", "n2", "n3"} {
		inst := `instance="` + n + `"`
		meta := 0.0
		if n == "n1" {
			meta = 1
		}
		q.add(`floodgate_groups_leaderless{`+inst+`}`, func(float64) float64 { return 0 })
		q.add(`floodgate_meta_leader{`+inst+`}`, func(float64) float64 { return meta })
		q.add(`floodgate_members{`+inst+`,state="alive"}`, func(float64) float64 { return 3 })
		q.add(`floodgate_members{`+inst+`,state="dead"}`, func(float64) float64 { return 0 })
		q.add(`floodgate_members{`+inst+`,state="unknown"}`, func(float64) float64 { return 0 })
		q.add(`floodgate_clock_offset_seconds{`+inst+`}`, func(float64) float64 { return 0.004 })
		q.add(`floodgate_decisions_total{`+inst+`,outcome="allowed"}`, func(m float64) float64 { return 60 * 1000 * m })
		q.add(`floodgate_check_errors_total{`+inst+`,code="InvalidArgument"}`, func(m float64) float64 { return 60 * 50 * m })
		q.add(`floodgate_check_errors_total{`+inst+`,code="Unavailable"}`, func(m float64) float64 { return 60 * 0.5 * m })
		q.add(`floodgate_check_errors_total{`+inst+`,code="ResourceExhausted"}`, func(float64) float64 { return 0 })
		q.add(`floodgate_key_states_refused_total{`+inst+`}`, func(float64) float64 { return 0 })
		q.add(`floodgate_other_cluster_refusals_total{`+inst+`}`, func(float64) float64 { return 0 })
		q.add(`floodgate_checks_shed_total{`+inst+`}`, func(float64) float64 { return 0 })
		q.add(`floodgate_leader_changes_total{`+inst+`,group="shard"}`, func(float64) float64 { return 2 })
		q.add(`floodgate_group_ids_left{`+inst+`}`, func(float64) float64 { return 65530 })
		for _, cert := range []string{"tls-cert", "peer-tls-cert"} {
			q.add(`floodgate_tls_certificate_expiration_timestamp_seconds{`+inst+`,cert="`+cert+`"}`, func(float64) float64 { return 60 * 86400 })
		}
		for le, share := range map[string]float64{"0.0008": 0.4, "0.0016": 0.99, "0.0032": 1, "0.0512": 1, "0.1024": 1, "+Inf": 1} {
			q.add(`floodgate_raftlog_fsync_duration_seconds_bucket{`+inst+`,le="`+le+`"}`, func(m float64) float64 { return 60 * 500 * m * share })
		}
	}
	return q
}

// slowFsyncs makes node's fsyncs take 50–100 ms from minute m on.
func slowFsyncs(node string, m float64) map[string]func(float64) float64 {
	out := map[string]func(float64) float64{}
	for le, share := range map[string]float64{"0.0008": 0.4, "0.0016": 0.99, "0.0032": 1, "0.0512": 1, "0.1024": 1, "+Inf": 1} {
		slow := 0.0
		if le == "0.1024" || le == "+Inf" {
			slow = 1
		}
		out[`floodgate_raftlog_fsync_duration_seconds_bucket{instance="`+node+`",le="`+le+`"}`] = func(at float64) float64 {
			return 60*500*min(at, m)*share + 60*100*max(0, at-m)*slow
		}
	}
	return out
}

// memStorage is a Prometheus storage of float series sampled every step,
// each from a function of the minute: enough for an engine to evaluate
// the alerts' expressions on, without a TSDB.
type memStorage struct {
	minutes int
	series  map[string]storage.Series
	funcs   map[string]func(float64) float64 // each series' function, by the name it was added under
}

func (q *memStorage) add(name string, f func(min float64) float64) {
	ls, err := promQL.ParseMetric(name)
	if err != nil {
		panic(fmt.Sprintf("%s: %v", name, err))
	}
	var samples []chunks.Sample
	for i := 0; time.Duration(i)*step <= time.Duration(q.minutes)*time.Minute; i++ {
		at := time.Duration(i) * step
		if v := f(at.Minutes()); !math.IsNaN(v) {
			samples = append(samples, fsample{t: at.Milliseconds(), f: v})
		}
	}
	if q.series == nil {
		q.series, q.funcs = map[string]storage.Series{}, map[string]func(float64) float64{}
	}
	q.series[ls.String()] = storage.NewListSeries(ls, samples)
	q.funcs[name] = f
}

// set replaces a healthy series (it must be one) by f.
func (q *memStorage) set(t *testing.T, name string, f func(float64) float64) {
	t.Helper()
	ls, err := promQL.ParseMetric(name)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := q.series[ls.String()]; !ok {
		t.Fatalf("%s is not a healthy series", name)
	}
	q.add(name, f)
}

func (q *memStorage) Querier(int64, int64) (storage.Querier, error) { return q, nil }

func (q *memStorage) Select(_ context.Context, _ bool, _ *storage.SelectHints, ms ...*labels.Matcher) storage.SeriesSet {
	var out []storage.Series
	for _, s := range q.series {
		ok := true
		for _, m := range ms {
			ok = ok && m.Matches(s.Labels().Get(m.Name))
		}
		if ok {
			out = append(out, s)
		}
	}
	sort.Slice(out, func(i, j int) bool { return labels.Compare(out[i].Labels(), out[j].Labels()) < 0 })
	return &seriesSet{list: out, i: -1}
}

func (q *memStorage) LabelValues(context.Context, string, *storage.LabelHints, ...*labels.Matcher) ([]string, annotations.Annotations, error) {
	return nil, nil, nil
}

func (q *memStorage) LabelNames(context.Context, *storage.LabelHints, ...*labels.Matcher) ([]string, annotations.Annotations, error) {
	return nil, nil, nil
}

func (q *memStorage) Close() error { return nil }

type seriesSet struct {
	list []storage.Series
	i    int
}

func (s *seriesSet) Next() bool                        { s.i++; return s.i < len(s.list) }
func (s *seriesSet) At() storage.Series                { return s.list[s.i] }
func (s *seriesSet) Err() error                        { return nil }
func (s *seriesSet) Warnings() annotations.Annotations { return nil }

// fsample is one float sample.
type fsample struct {
	t int64
	f float64
}

func (s fsample) T() int64                      { return s.t }
func (s fsample) ST() int64                     { return 0 }
func (s fsample) F() float64                    { return s.f }
func (s fsample) H() *histogram.Histogram       { return nil }
func (s fsample) FH() *histogram.FloatHistogram { return nil }
func (s fsample) Type() chunkenc.ValueType      { return chunkenc.ValFloat }
func (s fsample) Copy() chunks.Sample           { return s }
