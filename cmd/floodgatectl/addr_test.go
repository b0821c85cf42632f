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
