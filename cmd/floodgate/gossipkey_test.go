package main

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
)

// The gossip key can come from a file, out of the process list that every
// local user can read (/proc/PID/cmdline); before, --gossip-key (or its
// environment variable) was the only way. Its errors name the flag.
func TestGossipKeyFile(t *testing.T) {
	dir := t.TempDir()
	const key = "RD/MfEpCdLGl7JZSd7VYXSVeS5CSpLnrU4Zox8XKsX8="
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	good := write("gossip.key", key+"\n")
	o, err := parseOptions([]string{"--gossip-key-file", good}, noEnv, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	s, err := newSecurity(o.security)
	if err != nil {
		t.Fatal(err)
	}
	fromFlag, _ := (&securityFlags{gossipKey: key}).keys()
	if len(s.gossipKeys) != 1 || len(s.gossipKeys[0]) != 32 || string(s.gossipKeys[0]) != string(fromFlag[0]) {
		t.Fatalf("the key from the file differs from the same key as a flag")
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--gossip-key-file", filepath.Join(dir, "missing")}, "gossip-key-file: open "},
		{[]string{"--gossip-key-file", write("empty", "\n")}, "gossip-key-file: "},
		{[]string{"--gossip-key-file", write("bad", "not base64!")}, "gossip-key-file: line 1 of " + dir + "/bad: not base64"},
		{[]string{"--gossip-key-file", write("short", key+"\n\nc2hvcnQ=")}, "gossip-key-file: line 3 of " + dir + "/short: 5 bytes"},
		{[]string{"--gossip-key", "c2hvcnQ="}, "gossip-key: 5 bytes"},
		{[]string{"--gossip-key-file", good, "--gossip-key", key}, "gossip-key-file: give --gossip-key or --gossip-key-file, not both"},
	} {
		if _, err := parseOptions(tc.args, noEnv, io.Discard); err == nil || !strings.HasPrefix(err.Error(), tc.want) {
			t.Errorf("%v: %v, want %q", tc.args, err, tc.want)
		}
	}
}

// A changed --gossip-key-file gives the running node its keys, in order;
// a file that does not load leaves the node's keys as they are; before
// the node runs, a reload does nothing (it starts with the keys read at
// start).
func TestGossipFileReload(t *testing.T) {
	const k1, k2 = "RD/MfEpCdLGl7JZSd7VYXSVeS5CSpLnrU4Zox8XKsX8=", "AAAAAAAAAAAAAAAAAAAAAA=="
	path := filepath.Join(t.TempDir(), "gossip.key")
	if err := os.WriteFile(path, []byte(k1+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	g := newGossipFile(path)
	if err := g.reload(); err != nil {
		t.Fatalf("before the node runs: %v", err)
	}
	var got [][][]byte
	g.apply = func(keys [][]byte) error { got = append(got, keys); return nil }
	if err := os.WriteFile(path, []byte(k2+"\n"+k1+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := g.reload(); err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || len(got[0]) != 2 || len(got[0][0]) != 16 || len(got[0][1]) != 32 {
		t.Fatalf("the node was given %v", got)
	}
	if err := os.WriteFile(path, []byte(k2+"\nnot a key\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := g.reload(); err == nil || !strings.Contains(err.Error(), "gossip-key-file: line 2 of") || len(got) != 1 {
		t.Fatalf("a broken file: %v; the node was given %d key lists", err, len(got))
	}
}

// Two reloads at once (the watch's and a SIGHUP's) leave the newer read's
// keys in use: the one that read the file first gives its keys to the node
// first. Before, the older read could be applied last, under the newer
// read's stamp, and the watch never looked again.
func TestGossipFileReloadsDoNotInterleave(t *testing.T) {
	const k1, k2 = "RD/MfEpCdLGl7JZSd7VYXSVeS5CSpLnrU4Zox8XKsX8=", "AAAAAAAAAAAAAAAAAAAAAA=="
	path := filepath.Join(t.TempDir(), "gossip.key")
	if err := os.WriteFile(path, []byte(k1+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	synctest.Test(t, func(t *testing.T) {
		g := newGossipFile(path)
		var last [][]byte
		read, release := make(chan struct{}), make(chan struct{})
		g.apply = func(keys [][]byte) error {
			if len(keys[0]) == 32 { // k1's read: its keys arrive late
				close(read)
				<-release
			}
			last = keys
			return nil
		}
		var wg sync.WaitGroup
		wg.Go(func() {
			if err := g.reload(); err != nil {
				t.Error(err)
			}
		})
		<-read
		if err := os.WriteFile(path, []byte(k2+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		wg.Go(func() {
			if err := g.reload(); err != nil {
				t.Error(err)
			}
		})
		synctest.Wait() // the second reload waits for the first, or has applied k2
		close(release)
		wg.Wait()
		if len(last) != 1 || len(last[0]) != 16 {
			t.Fatalf("keys in use after both reloads: %d keys, the first of %d bytes; want the newer file's 16-byte key", len(last), len(last[0]))
		}
	})
}
