package e2e

import (
	"context"
	"strings"
	"testing"
	"time"
)

// A data dir is used by one process at a time: a second floodgate started
// on a live node's data dir exits at once, saying the dir is in use and by
// whom, and the first node keeps serving. Before, the second process took
// the live logs for damaged ones and advised deleting the data dir.
func TestSecondProcessOnALiveDataDirIsRefused(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	first, err := NewNode(bin, dir, "n1")
	if err != nil {
		t.Fatal(err)
	}
	defer first.Close()
	if err := first.Start(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := first.WaitServing(ctx); err != nil {
		t.Fatal(err)
	}
	second, err := NewNode(bin, dir, "n1") // same id, so the same data dir; other ports
	if err != nil {
		t.Fatal(err)
	}
	defer second.Close()
	if err := second.Start(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-second.Exited():
	case <-ctx.Done():
		t.Fatal("a second process on a live data dir kept running")
	}
	log := second.Log()
	if !strings.Contains(log, "in use by process") || strings.Contains(log, "damaged") {
		t.Fatalf("second process said:\n%s", log)
	}
	if err := first.WaitServing(ctx); err != nil {
		t.Fatalf("the first node stopped serving: %v", err)
	}
}
