package cluster

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// A data dir is used by one process at a time: a second lock fails at once
// naming the holder, and the lock is free again once released.
func TestDataDirLockIsExclusive(t *testing.T) {
	dir := t.TempDir()
	first, err := lockDataDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	_, err = lockDataDir(dir)
	if !errors.Is(err, ErrDataDirInUse) {
		t.Fatalf("second lock: %v, want ErrDataDirInUse", err)
	}
	if !strings.Contains(err.Error(), dir) || !strings.Contains(err.Error(), "process "+strconv.Itoa(os.Getpid())) {
		t.Errorf("error %q should name the dir and the holding process", err)
	}
	first.release()
	again, err := lockDataDir(dir)
	if err != nil {
		t.Fatalf("lock after release: %v", err)
	}
	again.release()
}

// Opening a node on a data dir another node holds fails before touching
// anything: no "damaged log" advice that would destroy a live replica.
func TestOpenRefusesALockedDataDir(t *testing.T) {
	dir := t.TempDir()
	held, err := lockDataDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer held.release()
	cfg := Config{NodeID: "n1", DataDir: dir, RaftAddr: "127.0.0.1:0", GossipAddr: "127.0.0.1:0", GRPCAddr: "127.0.0.1:1"}
	_, err = Open(cfg, nil)
	if !errors.Is(err, ErrDataDirInUse) {
		t.Fatalf("Open: %v, want ErrDataDirInUse", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "node-id")); !os.IsNotExist(err) {
		t.Errorf("Open wrote into a data dir it does not hold (node-id: %v)", err)
	}
}

// A port taken fails Open before the data dir is claimed: a first start
// that failed so had written a generated node id, and a retry with the
// intended --node-id was refused as another node's. The data dir can
// then be opened as a node of another id.
func TestOpenOnATakenPortClaimsNothing(t *testing.T) {
	for _, flag := range []string{"raft-addr", "gossip-addr"} {
		t.Run(flag, func(t *testing.T) {
			dir := t.TempDir()
			taken, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			defer taken.Close()
			cfg := Config{NodeID: "node-generated", DataDir: dir, RaftAddr: loopback(t), GossipAddr: loopback(t), GRPCAddr: "127.0.0.1:1",
				Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
			if flag == "raft-addr" {
				cfg.RaftAddr = taken.Addr().String()
			} else {
				cfg.GossipAddr = taken.Addr().String()
			}
			if _, err := Open(cfg, nil); !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), flag) {
				t.Fatalf("Open with --%s taken: %v, want ErrConfig naming it", flag, err)
			}
			if _, err := os.Stat(filepath.Join(dir, "node-id")); !os.IsNotExist(err) {
				t.Errorf("a failed start claimed the data dir (node-id: %v)", err)
			}
			taken.Close()
			cfg.NodeID, cfg.RaftAddr, cfg.GossipAddr = "n2", loopback(t), loopback(t)
			n, err := Open(cfg, nil)
			if err != nil {
				t.Fatalf("Open again as n2: %v", err)
			}
			n.Close()
		})
	}
}

// startOne starts a single-node cluster of one shard, closed when t ends.
func startOne(t *testing.T) *Node { return startOneWith(t, nil) }

// startOneWith is startOne with its config changed by set first.
func startOneWith(t *testing.T, set func(*Config)) *Node {
	t.Helper()
	cfg := Config{
		NodeID: "n1", DataDir: t.TempDir(), GRPCAddr: loopback(t), RaftAddr: loopback(t), GossipAddr: loopback(t),
		Shards: 1, Replicas: 1, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	}
	if set != nil {
		set(&cfg)
	}
	n, err := Open(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := n.Start(ctx); err != nil {
		t.Fatal(err)
	}
	return n
}
