package main

import (
	"strings"
	"testing"
)

// Two listeners on one port are refused before anything starts, whatever
// the host spells the address as; port 0 and different ports never clash.
func TestDistinctBinds(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		want bool
	}{
		{"127.0.0.1:7700", "127.0.0.1:7700", true},
		{"127.0.0.1:7700", "127.0.0.1:7701", false},
		{"0.0.0.0:7700", "127.0.0.1:7700", true},
		{":7700", "10.0.0.1:7700", true},
		{"[::]:7700", "127.0.0.1:7700", true},
		{"127.0.0.1:0", "127.0.0.1:0", false},
		{"127.0.0.2:7700", "127.0.0.1:7700", false},
		// One port under two spellings: bound second, it failed at start
		// after --check-config had said the setup was fine.
		{"localhost:7700", "127.0.0.1:7700", true},
		{"localhost:7700", "127.0.0.2:7700", false},
	} {
		err := distinctBinds(map[string]string{"grpc-addr": tc.a, "http-addr": tc.b, "health-addr": ""})
		if got := err != nil; got != tc.want {
			t.Errorf("%s and %s: %v, want a clash %v", tc.a, tc.b, err, tc.want)
		}
		if err != nil && !strings.Contains(err.Error(), "http-addr: "+tc.b+" is also --grpc-addr's") {
			t.Errorf("%s and %s: %q does not name both flags", tc.a, tc.b, err)
		}
	}
}
