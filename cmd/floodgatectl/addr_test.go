package main

import (
	"bytes"
	"strings"
	"testing"
)

// A malformed --addr, or FLOODGATE_ADDR, is refused naming it, before any
// dial: gRPC's errors named neither ("produced zero addresses", "too many
// colons in address").
func TestBadAddrIsNamed(t *testing.T) {
	for _, tc := range []struct {
		env, flag string
		want      string
	}{
		{"", "foo", `--addr: "foo" is not host:port`},
		{"", "127.0.0.1:99999", `--addr: "127.0.0.1:99999": port must be a number from 1 to 65535`},
		{"", "http://127.0.0.1:7700", `--addr: "http://127.0.0.1:7700" is not host:port`},
		{"garbage", "", `FLOODGATE_ADDR: "garbage" is not host:port`},
		{"garbage", "bad", `--addr: "bad" is not host:port`},
	} {
		t.Setenv("FLOODGATE_ADDR", tc.env)
		var out bytes.Buffer
		root := newRoot(&out)
		args := []string{"status", "--timeout", "1s"}
		if tc.flag != "" {
			args = append(args, "--addr", tc.flag)
		}
		root.SetArgs(args)
		if err := root.Execute(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("env %q, --addr %q: %v, want %q", tc.env, tc.flag, err, tc.want)
		}
	}
}

// gRPC targets other than host:port, and IPv6 hosts with a zone, pass to
// gRPC as before.
func TestTargetsGRPCTakes(t *testing.T) {
	for _, addr := range []string{"dns:///floodgate.example:7700", "unix:///run/floodgate.sock", "passthrough:///10.0.0.1:7700",
		"[fe80::1%eth0]:7700", "[::1]:7700", "localhost:7700"} {
		if err := checkTarget("--addr", addr); err != nil {
			t.Errorf("%s: %v", addr, err)
		}
	}
}
