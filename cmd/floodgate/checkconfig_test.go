package main

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// --check-config checks what a start would, files included, and opens
// nothing: a good configuration passes, and each bad one fails naming
// the setting, whether the flag parser or the files catch it.
func TestCheckConfig(t *testing.T) {
	dir := t.TempDir()
	short := filepath.Join(dir, "short.token")
	if err := os.WriteFile(short, []byte("abc"), 0o600); err != nil {
		t.Fatal(err)
	}
	data := filepath.Join(dir, "data")
	check := func(args ...string) error {
		o, err := parseOptions(append([]string{"--check-config", "--data-dir", data}, args...), noEnv, io.Discard)
		if err != nil {
			return err
		}
		if !o.checkOnly {
			t.Fatalf("%v: --check-config not set", args)
		}
		return checkConfig(o)
	}
	if err := check(); err != nil {
		t.Fatalf("the defaults: %v", err)
	}
	if err := check("--gossip-key", "RD/MfEpCdLGl7JZSd7VYXSVeS5CSpLnrU4Zox8XKsX8=", "--slots", "1024", "--replicas", "5"); err != nil {
		t.Fatalf("a good configuration: %v", err)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--replicas", "99"}, "replicas: must be between 1 and"},
		{[]string{"--raft-heartbeat-timeout", "1ms"}, "raft-heartbeat-timeout:"},
		{[]string{"--max-clock-offset", "500us"}, "max-clock-offset: must be 0 (not checked) or at least 50ms"},
		{[]string{"--max-key-states", "-1"}, "max-key-states: must be 0 (no bound) or more"},
		{[]string{"--tls-cert", filepath.Join(dir, "none.crt"), "--tls-key", filepath.Join(dir, "none.key")}, "tls-cert:"},
		{[]string{"--peer-token-file", short}, "peer-token-file:"},
		{[]string{"--gossip-key", "c2hvcnQ="}, "gossip-key:"},
	} {
		if err := check(tc.args...); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: %v, want an error naming %q", tc.args, err, tc.want)
		}
	}
	if _, err := os.Stat(data); !os.IsNotExist(err) {
		t.Fatalf("--check-config touched the data dir: %v", err)
	}
}
