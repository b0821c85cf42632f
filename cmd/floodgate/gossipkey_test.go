package main

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
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
	fromFlag, _ := (&securityFlags{gossipKey: key}).key()
	if len(s.gossipKey) != 32 || string(s.gossipKey) != string(fromFlag) {
		t.Fatalf("the key from the file differs from the same key as a flag")
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--gossip-key-file", filepath.Join(dir, "missing")}, "gossip-key-file: open "},
		{[]string{"--gossip-key-file", write("empty", "\n")}, "gossip-key-file: "},
		{[]string{"--gossip-key-file", write("bad", "not base64!")}, "gossip-key-file: not base64"},
		{[]string{"--gossip-key-file", write("short", "c2hvcnQ=")}, "gossip-key-file: 5 bytes"},
		{[]string{"--gossip-key-file", good, "--gossip-key", key}, "gossip-key-file: give --gossip-key or --gossip-key-file, not both"},
	} {
		if _, err := parseOptions(tc.args, noEnv, io.Discard); err == nil || !strings.HasPrefix(err.Error(), tc.want) {
			t.Errorf("%v: %v, want %q", tc.args, err, tc.want)
		}
	}
}
