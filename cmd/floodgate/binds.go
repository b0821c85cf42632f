package main

import (
	"context"
	"fmt"
	"net"
	"slices"
	"time"
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
	// localhost:7700 and 127.0.0.1:7700 are one port: compare addresses.
	ips := resolve(ha)
	for _, ip := range resolve(hb) {
		if slices.Contains(ips, ip) {
			return true
		}
	}
	return false
}

// resolve is host's addresses: an IP itself, a name's by the system's
// resolver (within a second; a name that does not resolve fails its bind
// at start, with its own error).
func resolve(host string) []string {
	if ip := net.ParseIP(host); ip != nil {
		return []string{ip.String()}
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	addrs, err := net.DefaultResolver.LookupHost(ctx, host)
	if err != nil {
		return nil
	}
	out := make([]string, 0, len(addrs))
	for _, a := range addrs {
		if ip := net.ParseIP(a); ip != nil {
			out = append(out, ip.String())
		}
	}
	return out
}
