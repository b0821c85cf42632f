package fault

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
)

// Net is a private network for a cluster: one network namespace per node,
// each with a veth pair whose host end is on a bridge in the test's
// namespace. The bridge has an address too, so the test's clients reach
// every node. Taking a node's host-side veth down is a real partition:
// every packet to and from the node (Raft, gossip over TCP and UDP, gRPC,
// clients) is dropped, while its process keeps running.
type Net struct {
	Bridge string
	Subnet string   // "10.a.b."
	NS     []string // per node
	Veth   []string // host ends, per node
}

// NetAvailable reports why namespaces cannot be used here ("" if they can):
// they need root (CAP_NET_ADMIN) and iproute2.
func NetAvailable() string {
	if os.Geteuid() != 0 {
		return "not root"
	}
	for _, cmd := range []string{"ip", "tc"} {
		if _, err := exec.LookPath(cmd); err != nil {
			return "no " + cmd + " command"
		}
	}
	return ""
}

// NewNet creates n namespaces on a fresh bridge. Names carry the test's
// pid so concurrent runs do not collide; Close removes everything.
func NewNet(n int) (*Net, error) {
	pid := os.Getpid()
	nt := &Net{Bridge: fmt.Sprintf("fgb%d", pid)}
	subnet, err := freeSubnet(pid)
	if err != nil {
		return nil, err
	}
	nt.Subnet = subnet
	if err := nt.run(
		[]string{"link", "add", nt.Bridge, "type", "bridge"},
		[]string{"addr", "add", subnet + "254/24", "dev", nt.Bridge},
		[]string{"link", "set", nt.Bridge, "up"},
	); err != nil {
		nt.Close()
		return nil, err
	}
	for i := 1; i <= n; i++ {
		ns, veth := fmt.Sprintf("fgn%d-%d", pid, i), fmt.Sprintf("fgv%d-%d", pid, i)
		nt.NS, nt.Veth = append(nt.NS, ns), append(nt.Veth, veth)
		if err := nt.run(
			[]string{"netns", "add", ns},
			[]string{"link", "add", veth, "type", "veth", "peer", "name", "eth0", "netns", ns},
			[]string{"link", "set", veth, "master", nt.Bridge},
			[]string{"link", "set", veth, "up"},
			[]string{"-n", ns, "addr", "add", nt.Addr(i-1) + "/24", "dev", "eth0"},
			[]string{"-n", ns, "link", "set", "eth0", "up"},
			[]string{"-n", ns, "link", "set", "lo", "up"},
		); err != nil {
			nt.Close()
			return nil, err
		}
	}
	return nt, nil
}

// freeSubnet picks a 10.x.y.0/24 that no interface of the host uses.
func freeSubnet(pid int) (string, error) {
	out, err := exec.Command("ip", "-4", "route", "show").CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("ip route: %v: %s", err, out)
	}
	for i := 0; i < 200; i++ {
		s := fmt.Sprintf("10.%d.%d.", 200+(pid+i)%50, (pid/50+i)%250)
		if !strings.Contains(string(out), s) {
			return s, nil
		}
	}
	return "", fmt.Errorf("no free 10.x.y.0/24 subnet")
}

// Addr is node i's address (0-based).
func (nt *Net) Addr(i int) string { return fmt.Sprintf("%s%d", nt.Subnet, i+1) }

// Wrapper writes a script into dir that runs floodgate inside node i's
// namespace. ip netns exec execs the program, so the process started by
// the harness is the node itself: signals reach it directly.
func (nt *Net) Wrapper(dir, floodgate string, i int) (string, error) {
	ip, err := exec.LookPath("ip")
	if err != nil {
		return "", err
	}
	path := filepath.Join(dir, fmt.Sprintf("floodgate-in-%s", nt.NS[i]))
	script := fmt.Sprintf("#!/bin/sh\nexec %s netns exec %s %s \"$@\"\n", ip, nt.NS[i], floodgate)
	return path, os.WriteFile(path, []byte(script), 0o755)
}

// Isolate partitions node i from every other node and from the clients.
func (nt *Net) Isolate(i int) error { return nt.run([]string{"link", "set", nt.Veth[i], "down"}) }

// Rejoin ends node i's partition.
func (nt *Net) Rejoin(i int) error { return nt.run([]string{"link", "set", nt.Veth[i], "up"}) }

// CutOut drops every packet node i sends, and CutIn every packet sent to
// it, until Uncut: one-way cuts, made on node i's eth0 for what it sends
// and on the bridge's end of its veth for what it receives. A drop the
// sender's kernel hears of (a qdisc that refuses the packet) is not what
// a cut does: TCP then retries every half second instead of backing
// off, which is the very thing a cut must show. So the packets go into a
// queue that takes them and lets almost nothing out (an htb class of 8
// bits a second into a pfifo_head_drop of one packet, which drops the
// older one and reports success); at most a packet or two of a cut gets
// through. This kernel's tc has neither netem nor the matchall and gact
// that would do it otherwise.
func (nt *Net) CutOut(i int) error { return nt.cut(nt.NS[i], "eth0") }

// CutIn: see CutOut.
func (nt *Net) CutIn(i int) error { return nt.cut("", nt.Veth[i]) }

// Uncut ends node i's one-way cuts, both directions.
func (nt *Net) Uncut(i int) error {
	err := nt.tc(nt.NS[i], "qdisc", "del", "dev", "eth0", "root")
	if err2 := nt.tc("", "qdisc", "del", "dev", nt.Veth[i], "root"); err == nil {
		err = err2
	}
	return err
}

func (nt *Net) cut(ns, dev string) error {
	for _, args := range [][]string{
		{"qdisc", "add", "dev", dev, "root", "handle", "1:", "htb", "default", "1"},
		{"class", "add", "dev", dev, "parent", "1:", "classid", "1:1", "htb", "rate", "8bit", "ceil", "8bit", "burst", "1", "cburst", "1"},
		{"qdisc", "add", "dev", dev, "parent", "1:1", "handle", "10:", "pfifo_head_drop", "limit", "1"},
	} {
		if err := nt.tc(ns, args...); err != nil {
			return err
		}
	}
	return nil
}

// tc runs tc in namespace ns ("" the test's own). Deleting a root qdisc
// that is not there is not an error: Uncut clears both directions.
func (nt *Net) tc(ns string, args ...string) error {
	if ns != "" {
		args = append([]string{"-n", ns}, args...)
	}
	out, err := exec.Command("tc", args...).CombinedOutput()
	if err != nil && !(slices.Contains(args, "del") && strings.Contains(string(out), "No such file")) &&
		!(slices.Contains(args, "del") && strings.Contains(string(out), "Cannot delete qdisc with handle of zero")) {
		return fmt.Errorf("tc %s: %v: %s", strings.Join(args, " "), err, out)
	}
	return nil
}

// Close deletes the veth pairs, the namespaces and the bridge. The pairs
// go first and by name: a namespace's deletion takes its devices with it
// only later, in the kernel's cleanup work, so the next scenario's NewNet
// (same pid, same names) found the old host end still there ("File
// exists") when the namespaces alone were deleted.
func (nt *Net) Close() {
	for _, veth := range nt.Veth {
		_ = exec.Command("ip", "link", "del", veth).Run()
	}
	for _, ns := range nt.NS {
		_ = exec.Command("ip", "netns", "del", ns).Run()
	}
	_ = exec.Command("ip", "link", "del", nt.Bridge).Run()
}

func (nt *Net) run(cmds ...[]string) error {
	for _, args := range cmds {
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			return fmt.Errorf("ip %s: %v: %s", strings.Join(args, " "), err, out)
		}
	}
	return nil
}
