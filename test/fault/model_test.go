package fault

import (
	"strings"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
)

// The checkers themselves, on hand-made histories: they must reject what
// a broken limiter does and accept every behaviour a correct one may show.

func op(call, ret int, cost int64, out Outcome, remaining int64) Op {
	return Op{Key: "k", Cost: cost, Call: time.Duration(call) * time.Millisecond, Ret: time.Duration(ret) * time.Millisecond, Outcome: out, Remaining: remaining}
}

func TestCounterModel(t *testing.T) {
	cases := []struct {
		name string
		ops  []Op
		want porcupine.CheckResult
	}{
		{"serial", []Op{op(0, 1, 3, Allowed, 2), op(2, 3, 2, Allowed, 0), op(4, 5, 1, Denied, 0), op(6, 7, 0, Denied, 0)}, porcupine.Ok},
		{"concurrent either order", []Op{op(0, 10, 3, Allowed, 0), op(1, 9, 2, Allowed, 3)}, porcupine.Ok},
		{"over-admission", []Op{op(0, 1, 3, Allowed, 2), op(2, 3, 3, Allowed, 0)}, porcupine.Illegal},
		{"lost count", []Op{op(0, 1, 3, Allowed, 2), op(2, 3, 0, Allowed, 5)}, porcupine.Illegal},
		{"peek does not count", []Op{op(0, 1, 0, Allowed, 5), op(2, 3, 0, Allowed, 5)}, porcupine.Ok},
		{"denied shows what is left", []Op{op(0, 1, 4, Allowed, 1), op(2, 3, 3, Denied, 1)}, porcupine.Ok},
		{"failed call that counted", []Op{op(0, 1, 2, Unknown, 0), op(2, 3, 0, Allowed, 3)}, porcupine.Ok},
		{"failed call that did not", []Op{op(0, 1, 2, Unknown, 0), op(2, 3, 0, Allowed, 5)}, porcupine.Ok},
		{"failed call counted late", []Op{op(0, 1, 2, Unknown, 0), op(2, 3, 0, Allowed, 5), op(4, 5, 0, Allowed, 3)}, porcupine.Ok},
		{"failed call cannot uncount", []Op{op(0, 1, 2, Unknown, 0), op(2, 3, 0, Allowed, 3), op(4, 5, 0, Allowed, 5)}, porcupine.Illegal},
	}
	for _, c := range cases {
		if got := CheckLinearizable("k", c.ops, 5, 10*time.Second, "").Result; got != c.want {
			t.Errorf("%s: %s, want %s", c.name, got, c.want)
		}
	}
}

func TestCheckFinalCount(t *testing.T) {
	shard := func(string) int { return 0 }
	ops := []Op{op(0, 1, 2, Allowed, 3), op(2, 3, 3, Unknown, 0), op(4, 5, 1, Unknown, 0)}
	spec := Spec{Limit: 5, LinTimeout: 10 * time.Second}
	for final, ok := range map[int64]bool{2: true, 3: true, 5: true, 4: false, 1: false} {
		r := Check("t", ops, nil, spec, shard, 0, map[string]int64{"k": final})
		if got := len(r.Violations) == 0; got != ok {
			t.Errorf("final %d: violations %v, want ok=%v", final, r.Violations, ok)
		}
	}
	over := []Op{op(0, 1, 3, Allowed, 2), op(2, 3, 3, Allowed, 0)}
	r := Check("t", over, nil, spec, shard, 0, map[string]int64{"k": 5})
	if len(r.Violations) == 0 || !strings.Contains(r.Violations[0], "admitted 6, limit 5") {
		t.Errorf("over-admission not reported: %v", r.Violations)
	}
	spec.Slack = 2 // fast mode after one failover, bound 2
	if r := Check("t", over, nil, spec, shard, 0, map[string]int64{"k": 5}); len(r.Violations) != 0 {
		t.Errorf("6 of 5 with slack 2: %v, want none", r.Violations)
	}
	if r := Check("t", over, nil, spec, shard, 0, map[string]int64{"k": 2}); len(r.Violations) != 1 {
		t.Errorf("6 admitted, 2 counted, slack 2: %v, want the lost counts reported", r.Violations)
	}
}

func TestFailovers(t *testing.T) {
	ops := []Op{op(0, 10, 1, Allowed, 0), op(150, 900, 1, Unknown, 0), op(200, 1300, 1, Allowed, 0), op(1000, 1100, 1, Denied, 0)}
	faults := []Fault{{At: 100 * time.Millisecond}}
	fo, gap, end := failovers(ops, faults, func(string) int { return 0 }, 0, 0)
	if fo[0] != time.Second || gap != 1090*time.Millisecond || end != 1100*time.Millisecond {
		t.Errorf("failover %s, gap %s ending at %s; want 1s (the call invoked at 1s answered at 1.1s) and 1.09s ending at 1.1s", fo[0], gap, end)
	}
	// A final read 1.7 s later: the longest gap of all, but after the load.
	ops = append(ops, op(2000, 3000, 1, Allowed, 0))
	if _, gap, _ := failovers(ops, faults, func(string) int { return 0 }, 0, 0); gap != 1700*time.Millisecond {
		t.Errorf("every answer: gap %s, want 1.7s", gap)
	}
	if _, gap, end := failovers(ops, faults, func(string) int { return 0 }, 0, 1500*time.Millisecond); gap != 1090*time.Millisecond || end != 1100*time.Millisecond {
		t.Errorf("the load's answers (up to 1.5s): gap %s ending at %s; want 1.09s ending at 1.1s", gap, end)
	}
}

// Fast mode's bound is per shard: the keys of one shard may together be
// admitted at most Slack above their limits, however the excess falls
// among them, and a shard past it is reported, naming the bound.
func TestSlackBoundsAShardsExcess(t *testing.T) {
	spec := Spec{Limit: 5, Slack: 2, LinTimeout: 10 * time.Second}
	keyed := func(key string, o Op) Op { o.Key = key; return o }
	cases := []struct {
		name  string
		ops   []Op
		shard func(string) int
		final map[string]int64
		want  string // "" for no violation
	}{
		{"one key at its bound", []Op{op(0, 1, 7, Allowed, 0)}, func(string) int { return 0 }, map[string]int64{"k": 7}, ""},
		{"one key past its bound", []Op{op(0, 1, 8, Allowed, 0)}, func(string) int { return 0 }, map[string]int64{"k": 7}, "admitted 3 above their limits, bound 2"},
		{"two keys of one shard, each within, together past", []Op{
			keyed("a", op(0, 1, 7, Allowed, 0)), keyed("b", op(0, 1, 7, Allowed, 0)),
		}, func(string) int { return 0 }, map[string]int64{"a": 7, "b": 7}, "admitted 4 above their limits, bound 2"},
		{"two keys of two shards, each within", []Op{
			keyed("a", op(0, 1, 7, Allowed, 0)), keyed("b", op(0, 1, 7, Allowed, 0)),
		}, func(k string) int { return int(k[0] - 'a') }, map[string]int64{"a": 7, "b": 7}, ""},
	}
	for _, c := range cases {
		r := Check("t", c.ops, nil, spec, c.shard, 0, c.final)
		got := strings.Join(r.Violations, "; ")
		switch {
		case c.want == "" && got != "":
			t.Errorf("%s: violations %q, want none", c.name, got)
		case c.want != "" && !strings.Contains(got, c.want):
			t.Errorf("%s: violations %q, want %q", c.name, got, c.want)
		}
	}
}

// A scenario whose load never reached the cluster, or whose shard
// answered again only after the load (the final reads), fails: the
// checker passed a history of final peeks alone, with failovers of 28 s.
func TestCheckWantsLoadAndRecovery(t *testing.T) {
	shard := func(string) int { return 0 }
	spec := Spec{Limit: 5, LinTimeout: 10 * time.Second, LoadEnd: 20 * time.Second, Recovery: 10 * time.Second, MinAnswered: 2}
	kill := []Fault{{Kind: "kill -9", Target: "n2", At: time.Second}}
	peeks := []Op{op(28_000, 28_001, 0, Allowed, 5)} // the final read, after the load
	r := Check("t", peeks, kill, spec, shard, 0, map[string]int64{"k": 0})
	got := strings.Join(r.Violations, "; ")
	for _, want := range []string{"never answered again after kill -9 n2", "0 calls answered during the load, want 2"} {
		if !strings.Contains(got, want) {
			t.Errorf("final peeks alone: violations %q, want %q", got, want)
		}
	}
	slow := []Op{op(0, 1, 1, Allowed, 4), op(500, 501, 1, Allowed, 3), op(1500, 12_000, 1, Allowed, 2)}
	r = Check("t", slow, kill, spec, shard, 0, map[string]int64{"k": 3})
	if got := strings.Join(r.Violations, "; "); !strings.Contains(got, "answered again only 11s after kill -9 n2") {
		t.Errorf("answered 11s after a kill: violations %q, want the recovery bound", got)
	}
	spec.RunOut = []string{"k"}
	if r := Check("t", slow, nil, spec, shard, 0, map[string]int64{"k": 3}); !strings.Contains(strings.Join(r.Violations, "; "), "k: never denied") {
		t.Errorf("a key meant to run out, never denied: violations %v", r.Violations)
	}
	spec.RunOut = nil
	spec.Keys, spec.RunOut = []string{"k", "other"}, []string{"other"}
	if r := Check("t", nil, nil, spec, shard, 0, nil); !strings.Contains(strings.Join(r.Violations, "; "), "other: no call recorded") {
		t.Errorf("an empty history: violations %v, want its keys named", r.Violations)
	}
	spec.Keys, spec.RunOut = nil, nil
	kill[0].Within = 20 * time.Second // a fault's own bound wins
	if r := Check("t", slow, kill, spec, shard, 0, map[string]int64{"k": 3}); len(r.Violations) != 0 {
		t.Errorf("within the fault's own bound: %v", r.Violations)
	}
}

// A failover held to its own bound gets splitVoteAllowance more only when
// its first new leader came after more than one election, and the report
// names the split vote when even that is exceeded.
func TestSplitVoteAllowance(t *testing.T) {
	shard := func(string) int { return 0 }
	spec := Spec{Limit: 5, LinTimeout: 10 * time.Second, LoadEnd: 20 * time.Second, Recovery: 10 * time.Second, MinAnswered: 2}
	history := func(answerAt int) []Op {
		return []Op{op(0, 1, 1, Allowed, 4), op(500, 501, 1, Allowed, 3), op(1100, answerAt, 1, Allowed, 2)}
	}
	for _, tc := range []struct {
		elections int
		answerAt  int // ms; the fault is at 1 s, bound 1.5 s
		want      string
	}{
		{0, 2400, ""},
		{1, 2400, ""},
		{1, 3200, "answered again only 2.2s after SIGSTOP n1 at 1s, want within 1.5s"},
		{0, 3200, "want within 1.5s"},
		{2, 3200, ""},
		{2, 3600, "want within 2.5s (2 elections: a split vote)"},
	} {
		f := []Fault{{Kind: "SIGSTOP", Target: "n1", At: time.Second, Within: 1500 * time.Millisecond, Elections: tc.elections}}
		got := strings.Join(Check("t", history(tc.answerAt), f, spec, shard, 0, map[string]int64{"k": 3}).Violations, "; ")
		if (tc.want == "") != (got == "") || !strings.Contains(got, tc.want) {
			t.Errorf("%d elections, answered at %dms: violations %q, want %q", tc.elections, tc.answerAt, got, tc.want)
		}
	}
}
