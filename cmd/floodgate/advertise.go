package main

import (
	"errors"
	"fmt"
	"net"
	"strings"
)

// advertise returns the address others reach a listener bound at bind by:
// bind itself, unless host (--advertise-host) is set or bind's host listens
// everywhere (0.0.0.0, ::, empty), which no peer can dial: then host, or
// failing that this machine's one non-loopback address.
func advertise(flag, bind, host string, ips func() ([]net.IP, error)) (string, error) {
	h, port, err := net.SplitHostPort(bind)
	if err != nil {
		return "", fmt.Errorf("%s: %q is not host:port", flag, bind)
	}
	switch {
	case host != "":
		if err := checkAdvertiseHost(host); err != nil {
			return "", err
		}
		h = host
	case h == "" || net.ParseIP(h) != nil && net.ParseIP(h).IsUnspecified():
		ip, err := ownIP(ips)
		if err != nil {
			return "", fmt.Errorf("advertise-host: %s listens on every address (%s), and %v: set --advertise-host (in Kubernetes, the pod IP)", flag, bind, err)
		}
		h = ip.String()
	}
	return net.JoinHostPort(h, port), nil
}

// gossipAdvertise returns the address gossip advertises for a listener
// bound at bind. memberlist takes an IP only, so it is host
// (--advertise-gossip-host, which must be an IP) when set, else
// advHost (--advertise-host) when that is an IP, else what advertise
// makes of bind alone. A name --advertise-host (a pod's stable DNS name,
// which Raft and gRPC re-resolve after a restart) thus leaves gossip on
// the pod IP: gossip learns the new IP from the node itself.
func gossipAdvertise(bind, host, advHost string, ips func() ([]net.IP, error)) (string, error) {
	if host != "" {
		ip := net.ParseIP(host)
		if ip == nil {
			return "", fmt.Errorf("advertise-gossip-host: %q is not an IP address (gossip advertises an IP; in Kubernetes, the pod IP)", host)
		}
		if ip.IsUnspecified() {
			return "", fmt.Errorf("advertise-gossip-host: %s means every address, which no peer can dial: give this node's own address", host)
		}
	} else if net.ParseIP(advHost) != nil {
		host = advHost
	}
	a, err := advertise("gossip-addr", bind, host, ips)
	if err != nil {
		return "", err
	}
	if h, _, _ := net.SplitHostPort(a); net.ParseIP(h) == nil {
		return "", fmt.Errorf("advertise-gossip-host: gossip advertises an IP address, and gossip-addr %s has host name %q: set --advertise-gossip-host (in Kubernetes, the pod IP)", bind, h)
	}
	return a, nil
}

// checkAdvertiseHost refuses a --advertise-host no peer could dial: one
// with a port or a space, or an address that means every address.
func checkAdvertiseHost(host string) error {
	if ip := net.ParseIP(host); ip != nil {
		if ip.IsUnspecified() {
			return fmt.Errorf("advertise-host: %s means every address, which no peer can dial: give this node's own address", host)
		}
		return nil
	}
	if strings.ContainsAny(host, ":/ \t") || len(host) > 253 {
		return fmt.Errorf("advertise-host: %q is not a host name or IP address (give the ports with the *-addr flags)", host)
	}
	return nil
}

// ownIP is the machine's only non-loopback unicast IPv4 address (a pod
// has one); with none or several, the operator must say.
func ownIP(ips func() ([]net.IP, error)) (net.IP, error) {
	all, err := ips()
	if err != nil {
		return nil, err
	}
	var found []net.IP
	for _, ip := range all {
		if ip4 := ip.To4(); ip4 != nil && !ip4.IsLoopback() && ip4.IsGlobalUnicast() {
			found = append(found, ip4)
		}
	}
	switch len(found) {
	case 1:
		return found[0], nil
	case 0:
		return nil, errors.New("this machine has no non-loopback IPv4 address")
	}
	return nil, fmt.Errorf("this machine has %d addresses (%v)", len(found), found)
}

// interfaceIPs lists the addresses of the machine's interfaces that are up.
func interfaceIPs() ([]net.IP, error) {
	ifaces, err := net.Interfaces()
	if err != nil {
		return nil, err
	}
	var ips []net.IP
	for _, i := range ifaces {
		if i.Flags&net.FlagUp == 0 {
			continue
		}
		addrs, err := i.Addrs()
		if err != nil {
			continue
		}
		for _, a := range addrs {
			if n, ok := a.(*net.IPNet); ok {
				ips = append(ips, n.IP)
			}
		}
	}
	return ips, nil
}
