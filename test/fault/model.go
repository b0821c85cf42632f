package fault

import (
	"fmt"
	"os"
	"time"

	"github.com/anishathalye/porcupine"
)

// output is what a call answered; known is false when it failed and may
// or may not have counted.
type output struct {
	known     bool
	allowed   bool
	remaining int64
}

// CounterModel is the porcupine model of one key under an inline limit
// whose window outlasts the run: the state is the cost used so far. A
// check of cost c is allowed iff used+c ≤ limit (a peek, c = 0, iff one
// more unit fits), and answers remaining limit−used−c when it counts,
// limit−used otherwise. A failed call is accepted either way: it counts
// if it fits, like an allowed call; the case where it never happened is
// the linearization that puts it after everything else, which its return
// time (the end of the history) permits.
func CounterModel(limit int64) porcupine.Model {
	return porcupine.Model{
		Init: func() any { return int64(0) },
		Step: func(state, in, out any) (bool, any) {
			used, cost, o := state.(int64), in.(int64), out.(output)
			fits := used+max(cost, 1) <= limit
			next := used
			if fits {
				next = used + cost
			}
			if !o.known {
				return true, next
			}
			if o.allowed != fits || o.remaining != limit-next {
				return false, used
			}
			return true, next
		},
		Hash: func(state any) uint64 { return uint64(state.(int64)) },
		DescribeOperation: func(in, out any) string {
			o := out.(output)
			switch {
			case !o.known:
				return fmt.Sprintf("cost %d → unknown", in.(int64))
			case o.allowed:
				return fmt.Sprintf("cost %d → allowed, %d left", in.(int64), o.remaining)
			default:
				return fmt.Sprintf("cost %d → denied, %d left", in.(int64), o.remaining)
			}
		},
		DescribeState: func(state any) string { return fmt.Sprintf("used %d", state.(int64)) },
	}
}

// LinResult is the linearizability verdict on one key's history.
type LinResult struct {
	Key    string
	Result porcupine.CheckResult
	Ops    int
	// Visual is an HTML visualization of a failed check, when written.
	Visual string
}

// CheckLinearizable checks one key's ops against CounterModel. Failed
// calls get the end of the history as their return time. When the check
// fails and dir is not empty, a porcupine visualization is written there.
func CheckLinearizable(key string, ops []Op, limit int64, timeout time.Duration, dir string) LinResult {
	var end int64
	for _, o := range ops {
		end = max(end, int64(o.Ret))
	}
	end++
	hist := make([]porcupine.Operation, 0, len(ops))
	for _, o := range ops {
		if o.Outcome == Unknown && o.Cost == 0 {
			continue // a failed peek changes nothing and tells nothing
		}
		po := porcupine.Operation{ClientId: o.Client, Input: o.Cost, Call: int64(o.Call), Return: int64(o.Ret)}
		switch o.Outcome {
		case Unknown:
			po.Output, po.Return = output{}, end
		default:
			po.Output = output{known: true, allowed: o.Outcome == Allowed, remaining: o.Remaining}
		}
		hist = append(hist, po)
	}
	model := CounterModel(limit)
	res, info := porcupine.CheckOperationsVerbose(model, hist, timeout)
	lr := LinResult{Key: key, Result: res, Ops: len(hist)}
	if res == porcupine.Illegal && dir != "" {
		f, err := os.CreateTemp(dir, "porcupine-*.html")
		if err == nil {
			if porcupine.Visualize(model, info, f) == nil {
				lr.Visual = f.Name()
			}
			f.Close()
		}
	}
	return lr
}
