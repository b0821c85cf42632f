package raftnet

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

// warnCounter counts the warnings logged through it.
type warnCounter struct{ n atomic.Int64 }

func (w *warnCounter) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelWarn }
func (w *warnCounter) Handle(context.Context, slog.Record) error    { w.n.Add(1); return nil }
func (w *warnCounter) WithAttrs([]slog.Attr) slog.Handler           { return w }
func (w *warnCounter) WithGroup(string) slog.Handler                { return w }

// A dialer that names a new cluster at each hello (any peer that reaches
// the Raft port: the id is its to choose) is refused, and logged once a
// warnRefusalEvery as the README says, not once per hello; nor does each
// id it makes up stay in the node's memory for good.
func TestRefusalsOfMadeUpClustersAreLoggedOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		pn := newPipeNet()
		warns := &warnCounter{}
		b := New(Config{Layer: pn.listen("b"), Timeout: 5 * time.Second, Cluster: func() string { return "c1" },
			Admit: memberOf("c1", nil), Logger: slog.New(warns)})
		t.Cleanup(func() { b.Close() })
		dialer := pn.listen("x")
		const hellos = 500
		for i := range hellos {
			c, err := dialer.Dial("b", time.Second)
			if err != nil {
				t.Fatal(err)
			}
			id := fmt.Sprintf("made-up-%d", i)
			if _, err := c.Write(append(append(helloMagic[:], protocolVersion, useLink, byte(len(id))), id...)); err != nil {
				t.Fatal(err)
			}
			_, _ = io.ReadAll(c) // the refusal, then the close
			c.Close()
		}
		synctest.Wait()
		if got := warns.n.Load(); got > 1 {
			t.Errorf("%d hellos of made-up clusters from one peer logged %d warnings, want 1", hellos, got)
		}
		b.mu.Lock()
		kept := len(b.warned)
		b.mu.Unlock()
		if kept > 1 {
			t.Errorf("%d refusals of one peer kept in memory, want 1", kept)
		}
	})
}
