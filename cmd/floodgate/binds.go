package main

import (
	"fmt"
	"net"
	"slices"
)

// distinctBinds refuses two listeners of the node on one port: the second
// would fail to bind at start, after --check-config said the setup is
// fine. binds maps flag names to host:port ("" is off); a host of
// 0.0.0.0, :: or none takes the port on every address, so it clashes with
// any host; port 0 picks a free port and clashes with nothing.
func distinctBinds(binds map[string]string) error {
	names := make([]string, 0, len(binds))
	for name := range binds {
		names = append(names, name)
	}
	slices.Sort(names) // the same error every time
	for i, a := range names {
		for _, b := range names[i+1:] {
			if clash(binds[a], binds[b]) {
				return fmt.Errorf("%s: %s is also --%s's: give each listener its own port", b, binds[b], a)
			}
		}
	}
	return nil
}

func clash(a, b string) bool {
	ha, pa, errA := net.SplitHostPort(a)
	hb, pb, errB := net.SplitHostPort(b)
	if errA != nil || errB != nil || pa != pb || pa == "0" {
		return false // a malformed address is refused by its own check
	}
	everywhere := func(h string) bool { return h == "" || h == "0.0.0.0" || h == "::" }
	if ha == hb || everywhere(ha) || everywhere(hb) {
		return true
	}
	// localhost:7700 and 127.0.0.1:7700 are one port: compare the
	// addresses the listeners would take (a name binds one of its
	// addresses, as net.Listen picks it; one that does not resolve fails
	// its bind at start, with its own error).
	ta, errA := net.ResolveTCPAddr("tcp", a)
	tb, errB := net.ResolveTCPAddr("tcp", b)
	return errA == nil && errB == nil && ta.IP.Equal(tb.IP)
}
