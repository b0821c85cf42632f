package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"

	"github.com/floodgate/floodgate/test/e2e"
)

// memoryBench is the sub-benchmarks of fsm's BenchmarkStateMemory the
// memory targets read: a fixed window, and a sliding log with 1 and with
// 10 timestamps.
const memoryBench = "StateMemory/(fixed_window|sliding_log_1_hit|sliding_log_10_full)$"

// goBenchmarks runs the Go benchmarks with `go test`, streaming their
// output: with all, every benchmark of window/ and fsm/ (BenchmarkStateMemory
// among them); else only the sub-benchmarks of memoryBench. It returns the
// metrics of every benchmark line, by name without the -GOMAXPROCS suffix.
func goBenchmarks(all bool) (map[string]map[string]float64, error) {
	args := []string{"test", "-run", "^$", "-benchtime", "1x", "-bench", memoryBench, "./fsm/"}
	if all {
		args = []string{"test", "-run", "^$", "-bench", ".", "-benchmem", "./window/", "./fsm/"}
	}
	root, err := e2e.ModuleRoot()
	if err != nil {
		return nil, err
	}
	fmt.Println("go " + strings.Join(args, " "))
	cmd := exec.Command("go", args...)
	cmd.Dir = root
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	metrics := parseBench(io.TeeReader(out, os.Stdout))
	if err := cmd.Wait(); err != nil {
		return metrics, fmt.Errorf("go test benchmarks: %w", err)
	}
	return metrics, nil
}

// benchLine is a benchmark result line: name-procs, iterations, then
// value/unit pairs.
var benchLine = regexp.MustCompile(`^(Benchmark\S+?)(-\d+)?\s+\d+\s+(.*)$`)

// parseBench reads `go test -bench` output.
func parseBench(r io.Reader) map[string]map[string]float64 {
	out := map[string]map[string]float64{}
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		m := benchLine.FindStringSubmatch(sc.Text())
		if m == nil {
			continue
		}
		f := strings.Fields(m[3])
		vals := map[string]float64{}
		for i := 0; i+1 < len(f); i += 2 {
			if v, err := strconv.ParseFloat(f[i], 64); err == nil {
				vals[f[i+1]] = v
			}
		}
		out[m[1]] = vals
	}
	return out
}

// memoryRows are the table rows of the memory targets.
func memoryRows(metrics map[string]map[string]float64) []row {
	const unit = "bytes/key-beyond-key"
	get := func(name string) (float64, bool) {
		v, ok := metrics["BenchmarkStateMemory/"+name][unit]
		return v, ok
	}
	var rows []row
	fixed, ok := get("fixed_window")
	r := row{workload: "memory per key, fixed window (1M keys in a shard)", client: "Go benchmark",
		target: fmt.Sprintf("≤ %.0f B, to the nearest byte", targetMemFixed)}
	if ok {
		r.figure = fmt.Sprintf("%.1f B beyond the key's bytes", fixed)
		r.verdict = judge(fixed <= targetMemFixed+0.5)
	} else {
		r.figure, r.verdict = "BenchmarkStateMemory/fixed_window not found", notMet
	}
	rows = append(rows, r)
	one, ok1 := get("sliding_log_1_hit")
	ten, ok10 := get("sliding_log_10_full")
	r = row{workload: "memory per logged timestamp, sliding log", client: "Go benchmark",
		target: fmt.Sprintf("+%.0f B per timestamp, to the nearest byte", targetMemPerStamp)}
	if ok1 && ok10 {
		per := (ten - one) / 9
		r.figure = fmt.Sprintf("%.1f B per timestamp (%.1f B at 1, %.1f B at 10)", per, one, ten)
		r.verdict = judge(per <= targetMemPerStamp+0.5)
	} else {
		r.figure, r.verdict = "BenchmarkStateMemory/sliding_log_* not found", notMet
	}
	return append(rows, r)
}
