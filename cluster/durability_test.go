package cluster

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/floodgate/floodgate/raftlog"
)

// TestMain lets the test binary serve as the child process that checks a
// Raft log, as the daemon does with --check-store.
func TestMain(m *testing.M) {
	if path := os.Getenv("FLOODGATE_TEST_CHECK_STORE"); path != "" {
		if err := CheckStore(path); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func checkInChild(path string) error {
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), "FLOODGATE_TEST_CHECK_STORE="+path)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("%v: %s", err, strings.SplitN(string(out), "\n", 2)[0])
	}
	return nil
}

// The shared log checks itself as it opens: a torn last write is cut off,
// damage before it stops the node with what to do, instead of Raft
// reading garbage.
func TestDamagedLogIsRefused(t *testing.T) {
	cfg := Config{
		NodeID: "n1", DataDir: t.TempDir(), GRPCAddr: loopback(t), RaftAddr: loopback(t), GossipAddr: loopback(t),
		Shards: 2, Replicas: 1, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		CheckStore: checkInChild,
	}
	start := func() (*Node, error) {
		n, err := Open(cfg, nil)
		if err != nil {
			return nil, err
		}
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		if err := n.Start(ctx); err != nil {
			n.Close()
			return nil, err
		}
		return n, nil
	}
	n, err := start()
	if err != nil {
		t.Fatal(err)
	}
	n.Close()
	mark := filepath.Join(cfg.DataDir, cleanMark)
	if _, err := os.Stat(mark); err != nil {
		t.Fatalf("no clean-stop mark after Close: %v", err)
	}
	// An unclean stop with a sound log: the node starts.
	os.Remove(mark)
	if n, err = start(); err != nil {
		t.Fatalf("sound log after an unclean stop: %v", err)
	}
	n.Close()
	// Damage early in the log, with records after it: not a torn write.
	segs, err := filepath.Glob(filepath.Join(cfg.DataDir, walDir, "*.seg"))
	if err != nil || len(segs) == 0 {
		t.Fatalf("no log segment (%v)", err)
	}
	f, err := os.OpenFile(segs[0], os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte{0xA5, 0xA5, 0xA5, 0xA5}, 24); err != nil {
		t.Fatal(err)
	}
	f.Close()
	_, err = Open(cfg, nil)
	if !errors.Is(err, ErrDamaged) || !strings.Contains(err.Error(), cfg.DataDir) || !strings.Contains(err.Error(), "--join") {
		t.Fatalf("damaged log: %v", err)
	}
}

// A member whose Raft log was deleted, the rest of its dir kept, is
// refused at start, before any group opens: its incarnation would let it
// back in as the voter it was, without its votes and entries.
func TestLostLogIsRefused(t *testing.T) {
	n, cfg, _ := startedNode(t, t.TempDir())
	n.Close()
	if err := os.RemoveAll(filepath.Join(cfg.DataDir, walDir)); err != nil {
		t.Fatal(err)
	}
	_, err := Open(cfg, nil)
	if !errors.Is(err, ErrDamaged) || !strings.Contains(err.Error(), "floodgatectl leave n1") || !strings.Contains(err.Error(), cfg.DataDir) {
		t.Fatalf("lost log: %v, want ErrDamaged naming the dir and the leave", err)
	}
	// Refused before the log held anything: the next start is refused too.
	if _, err := Open(cfg, nil); !errors.Is(err, ErrDamaged) {
		t.Fatalf("second start: %v", err)
	}
}

// checkStateKept refuses only an accepted dir without a term: not a dir
// never taken, one whose join is under way, one holding a term, or one
// whose state is still in the older layout.
func TestCheckStateKept(t *testing.T) {
	for _, tc := range []struct {
		name                         string
		accepted, joining, term, old bool
		lost                         bool
	}{
		{name: "fresh"},
		{name: "accepted, no term", accepted: true, lost: true},
		{name: "accepted, term", accepted: true, term: true},
		{name: "accepted, join under way", accepted: true, joining: true},
		{name: "accepted, older layout", accepted: true, old: true},
		{name: "not accepted, term", term: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			wal, err := raftlog.Open(filepath.Join(dir, walDir), raftlog.Options{NoSync: true})
			if err != nil {
				t.Fatal(err)
			}
			defer wal.Close()
			var steps []error
			if tc.accepted {
				steps = append(steps, markAccepted(dir))
			}
			if tc.joining {
				steps = append(steps, markJoining(dir, []string{"127.0.0.1:7000"}))
			}
			if tc.term {
				steps = append(steps, wal.Group(metaName).SetUint64(keyCurrentTerm, 1))
			}
			if tc.old {
				steps = append(steps, os.MkdirAll(filepath.Join(dir, metaName), 0o755),
					os.WriteFile(filepath.Join(dir, metaName, boltFile), nil, 0o644))
			}
			if err := errors.Join(steps...); err != nil {
				t.Fatal(err)
			}
			err = checkStateKept(dir, wal)
			if tc.lost != errors.Is(err, ErrDamaged) || (!tc.lost && err != nil) {
				t.Fatalf("checkStateKept: %v, want lost=%v", err, tc.lost)
			}
		})
	}
}
