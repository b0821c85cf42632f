package main

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"time"
)

// profiler saves CPU profiles of one node (started with --pprof) covering
// the measured part of each workload; a nil profiler saves nothing.
type profiler struct {
	httpAddr string // the node's --http-addr
	dir      string
	warmup   time.Duration
	duration time.Duration
}

// start begins fetching the profile of workload name; the returned
// function waits for it to be written.
func (p *profiler) start(name string) func() {
	if p == nil {
		return func() {}
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		time.Sleep(p.warmup)
		url := fmt.Sprintf("http://%s/debug/pprof/profile?seconds=%d", p.httpAddr, max(1, int(p.duration.Seconds())))
		resp, err := http.Get(url)
		if err != nil {
			fmt.Fprintln(os.Stderr, "profile:", err)
			return
		}
		defer resp.Body.Close()
		f, err := os.Create(filepath.Join(p.dir, name+".pprof"))
		if err != nil {
			fmt.Fprintln(os.Stderr, "profile:", err)
			return
		}
		defer f.Close()
		_, _ = io.Copy(f, resp.Body)
	}()
	return func() { <-done }
}
