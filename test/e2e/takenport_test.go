package e2e

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// A start that fails on a port already taken writes nothing into the data
// dir: it had claimed the dir (node-id, incarnation) before binding, so a
// retry under the intended --node-id was refused as another node's.
func TestTakenPortClaimsNoDataDir(t *testing.T) {
	t.Parallel()
	for _, flag := range []string{"http-addr", "health-addr", "raft-addr", "gossip-addr"} {
		t.Run(flag, func(t *testing.T) {
			taken, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			defer taken.Close()
			n, err := NewNode(bin, t.TempDir(), "first", "--"+flag, taken.Addr().String())
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(n.Close)
			if err := n.Start(); err != nil {
				t.Fatal(err)
			}
			select {
			case <-n.Exited():
			case <-time.After(time.Minute):
				t.Fatalf("still running with --%s taken:\n%s", flag, tail(n.Log(), 10))
			}
			if log := n.Log(); !strings.Contains(log, flag) || !strings.Contains(log, "address already in use") {
				t.Fatalf("no error naming --%s:\n%s", flag, tail(log, 10))
			}
			if entries, _ := os.ReadDir(n.Dir); len(entries) > 0 {
				var names []string
				for _, e := range entries {
					names = append(names, e.Name())
				}
				if _, err := os.Stat(filepath.Join(n.Dir, "node-id")); err == nil {
					t.Errorf("a start that failed on --%s claimed its data dir: %v", flag, names)
				}
			}
			// The same dir serves a node of another id at once.
			taken.Close()
			again, err := NewNode(bin, filepath.Dir(n.Dir), "other")
			if err != nil {
				t.Fatal(err)
			}
			again.Dir = n.Dir
			t.Cleanup(again.Close)
			if err := again.Start(); err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			if err := again.WaitServing(ctx); err != nil {
				t.Fatalf("the data dir refused another node id after a failed start: %v\n%s", err, tail(again.Log(), 10))
			}
		})
	}
}
