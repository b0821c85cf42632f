package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"time"
)

// ghzModule is the load tool the bench drives: a third-party gRPC client
// that knows nothing of shards or leaders, so every check it sends goes to
// the one node it is pointed at.
const ghzModule = "github.com/bojand/ghz/cmd/ghz@v0.93.0"

// ensureGhz returns the path of a runnable ghz: path itself if it is an
// executable file, else ghz installed there with `go install` (GOBIN is
// path's directory).
func ensureGhz(path string) (string, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return "", err
	}
	if st, err := os.Stat(abs); err == nil && !st.IsDir() && st.Mode()&0o111 != 0 {
		return abs, nil
	}
	if filepath.Base(abs) != "ghz" {
		return "", fmt.Errorf("%s: no such executable (only a path ending in /ghz is installed automatically)", path)
	}
	fmt.Printf("installing %s into %s\n", ghzModule, filepath.Dir(abs))
	cmd := exec.Command("go", "install", ghzModule)
	cmd.Env = append(os.Environ(), "GOBIN="+filepath.Dir(abs))
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go install %s: %v\n%s", ghzModule, err, out)
	}
	return abs, nil
}

// ghzRun is one ghz invocation against one node.
type ghzRun struct {
	call string // package.Service/Method
	data string // JSON request, a Go template ghz fills in per call
	// dataFile, when set, replaces data: a JSON array of requests ghz
	// sends in turn (parsed once, so ghz's own cost per call stays that
	// of the health check's static request, not a template's).
	dataFile string
	rps      int // held rate; 0: as fast as the callers get answers
	// decisions is the number of decisions one OK call makes (the batch
	// size; 1 for a single check).
	decisions int
}

// ghzReport is the part of ghz's JSON report the bench reads.
type ghzReport struct {
	Count          uint64         `json:"count"`
	Total          time.Duration  `json:"total"`
	ErrorDist      map[string]int `json:"errorDistribution"`
	StatusCodeDist map[string]int `json:"statusCodeDistribution"`
	Latency        []struct {
		Percentage int           `json:"percentage"`
		Latency    time.Duration `json:"latency"`
	} `json:"latencyDistribution"`
}

// ghzRunner runs ghz with the bench's common settings.
type ghzRunner struct {
	bin         string
	dir         string // scratch directory for reports
	concurrency int
	connections int
	seq         int
}

// run runs w against addr: first for warmup (its report discarded), then
// for duration, and returns what ghz measured.
func (g *ghzRunner) run(ctx context.Context, addr string, w ghzRun, duration, warmup time.Duration) (*result, error) {
	if warmup > 0 {
		if _, err := g.once(ctx, addr, w, warmup); err != nil {
			return nil, fmt.Errorf("warmup: %w", err)
		}
	}
	return g.once(ctx, addr, w, duration)
}

// once is one ghz process for duration.
func (g *ghzRunner) once(ctx context.Context, addr string, w ghzRun, duration time.Duration) (*result, error) {
	g.seq++
	out := filepath.Join(g.dir, fmt.Sprintf("ghz-%02d.json", g.seq))
	args := []string{
		"--insecure",
		"--call", w.call,
		"--concurrency", fmt.Sprint(g.concurrency),
		"--connections", fmt.Sprint(g.connections),
		"--duration", duration.String(),
		"--duration-stop", "ignore", // calls cut off at the end are not errors
		"--timeout", "10s",
		"--format", "json",
		"--output", out,
	}
	if w.dataFile != "" {
		args = append(args, "--data-file", w.dataFile)
	} else {
		args = append(args, "--data", w.data)
	}
	if w.rps > 0 {
		args = append(args, "--rps", fmt.Sprint(w.rps))
	}
	args = append(args, addr)
	cctx, cancel := context.WithTimeout(ctx, duration+time.Minute)
	defer cancel()
	cmd := exec.CommandContext(cctx, g.bin, args...)
	if msg, err := cmd.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("ghz %s: %v: %s", w.call, err, strings.TrimSpace(string(msg)))
	}
	defer os.Remove(out) // reports list every call: megabytes
	f, err := os.Open(out)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var rep ghzReport
	if err := json.NewDecoder(f).Decode(&rep); err != nil {
		return nil, fmt.Errorf("ghz report %s: %w", out, err)
	}
	return rep.result(w.decisions)
}

// result converts a ghz report: calls/s and decisions/s count OK calls
// only; the percentiles are of OK calls (ghz's default).
func (rep *ghzReport) result(decisions int) (*result, error) {
	if rep.Count == 0 || rep.Total <= 0 {
		return nil, errors.New("ghz made no calls")
	}
	ok := int64(rep.StatusCodeDist["OK"])
	r := &result{
		calls:     int64(rep.Count),
		errors:    int64(rep.Count) - ok,
		decisions: ok * int64(decisions),
		elapsed:   rep.Total,
	}
	for _, l := range rep.Latency {
		switch l.Percentage {
		case 50:
			r.p50 = l.Latency
		case 99:
			r.p99 = l.Latency
		}
	}
	if r.errors > 0 {
		r.firstErr = mostCommon(rep.ErrorDist)
		if r.firstErr == "" {
			r.firstErr = mostCommon(rep.StatusCodeDist)
		}
	}
	return r, nil
}

// mostCommon names the most frequent entry of a ghz distribution.
func mostCommon(dist map[string]int) string {
	var keys []string
	for k := range dist {
		if k != "OK" {
			keys = append(keys, k)
		}
	}
	sort.Slice(keys, func(i, j int) bool { return dist[keys[i]] > dist[keys[j]] })
	if len(keys) == 0 {
		return ""
	}
	return fmt.Sprintf("%dx %s", dist[keys[0]], keys[0])
}
