package main

// The suite's own network: one namespace per server, each with a veth link to a bridge in the
// root namespace, where the suite and its clients run. Partitions are iptables DROP rules inside
// the servers' namespaces, so the packets between two cut servers are really lost (a connect
// hangs, an established connection stops hearing from its peer), as with Jepsen's partitions;
// the clients in the root namespace still reach every server, so a server cut off from the
// quorum must itself refuse or close its clients. Loopback ports would need a proxy per link and
// could only refuse, not lose, packets.

import (
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"syscall"
)

type network struct {
	tag     string   // short, unique per run: prefixes the bridge, veths and namespaces
	subnet  string   // e.g. "10.213.7"; server i has subnet.i, the bridge subnet.254
	names   []string // namespace of each server
	created []string // namespaces created, for teardown
	bridge  bool
}

func command(name string, args ...string) error {
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s %s: %v: %s", name, strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

func (n *network) inNamespace(i int, name string, args ...string) error {
	return command("ip", append([]string{"netns", "exec", n.names[i], name}, args...)...)
}

// newNetwork creates the bridge and `servers` namespaces. On failure it removes what it made.
func newNetwork(servers int) (*network, error) {
	for _, tool := range []string{"ip", "iptables"} {
		if _, err := exec.LookPath(tool); err != nil {
			return nil, fmt.Errorf("%s not found: the fault suite needs iproute2 and iptables (apt-get install iproute2 iptables) and root", tool)
		}
	}
	removeStale()
	pid := os.Getpid()
	subnet, err := freeSubnet(pid)
	if err != nil {
		return nil, err
	}
	n := &network{tag: fmt.Sprintf("wf%x", pid), subnet: subnet}
	if err := n.build(servers); err != nil {
		n.teardown()
		return nil, err
	}
	return n, nil
}

func (n *network) build(servers int) error {
	bridge := n.tag + "b"
	if err := command("ip", "link", "add", bridge, "type", "bridge"); err != nil {
		return err
	}
	n.bridge = true
	if err := command("ip", "addr", "add", n.subnet+".254/24", "dev", bridge); err != nil {
		return err
	}
	if err := command("ip", "link", "set", bridge, "up"); err != nil {
		return err
	}
	for i := 0; i < servers; i++ {
		ns := fmt.Sprintf("%sn%d", n.tag, i+1)
		if err := command("ip", "netns", "add", ns); err != nil {
			return err
		}
		n.names = append(n.names, ns)
		n.created = append(n.created, ns)
		host := fmt.Sprintf("%sv%d", n.tag, i+1)
		steps := [][]string{
			{"ip", "link", "add", host, "type", "veth", "peer", "name", "eth0", "netns", ns},
			{"ip", "link", "set", host, "master", bridge, "up"},
			{"ip", "netns", "exec", ns, "ip", "addr", "add", n.address(i) + "/24", "dev", "eth0"},
			{"ip", "netns", "exec", ns, "ip", "link", "set", "eth0", "up"},
			{"ip", "netns", "exec", ns, "ip", "link", "set", "lo", "up"},
		}
		for _, step := range steps {
			if err := command(step[0], step[1:]...); err != nil {
				return err
			}
		}
	}
	return nil
}

// staleTag matches the namespaces and bridges of a run ("wf<hex pid>n<i>", "wf<hex pid>b").
var staleTag = regexp.MustCompile(`^wf([0-9a-f]+)(n[0-9]+|b)$`)

// removeStale removes what earlier runs that were killed (SIGKILL, a CI timeout) left behind:
// their namespaces, with the servers still running inside them (killed by PID, as `ip netns
// pids` lists them), and their bridges. Only those of runs whose process is gone: a run going
// on at the same time keeps its own.
func removeStale() {
	gone := func(hexPid string) bool {
		pid, err := strconv.ParseInt(hexPid, 16, 64)
		if err != nil || int(pid) == os.Getpid() {
			return false
		}
		_, err = os.Stat(fmt.Sprintf("/proc/%d", pid))
		return os.IsNotExist(err)
	}
	if out, err := exec.Command("ip", "netns", "list").Output(); err == nil {
		for _, line := range strings.Split(string(out), "\n") {
			fields := strings.Fields(line)
			if len(fields) == 0 {
				continue
			}
			ns := fields[0]
			m := staleTag.FindStringSubmatch(ns)
			if m == nil || m[2] == "b" || !gone(m[1]) {
				continue
			}
			if pids, err := exec.Command("ip", "netns", "pids", ns).Output(); err == nil {
				for _, p := range strings.Fields(string(pids)) {
					if pid, err := strconv.Atoi(p); err == nil {
						_ = syscall.Kill(pid, syscall.SIGKILL)
					}
				}
			}
			if err := command("ip", "netns", "del", ns); err != nil {
				fmt.Fprintf(os.Stderr, "faults: stale namespace: %v\n", err)
			} else {
				fmt.Printf("faults: removed namespace %s of an earlier run that was killed\n", ns)
			}
		}
	}
	if out, err := exec.Command("ip", "-o", "link", "show", "type", "bridge").Output(); err == nil {
		for _, line := range strings.Split(string(out), "\n") {
			// "12: wf1a2bb: <BROADCAST,...> ..."
			fields := strings.Fields(line)
			if len(fields) < 2 {
				continue
			}
			name := strings.TrimSuffix(fields[1], ":")
			m := staleTag.FindStringSubmatch(name)
			if m == nil || m[2] != "b" || !gone(m[1]) {
				continue
			}
			if err := command("ip", "link", "del", name); err != nil {
				fmt.Fprintf(os.Stderr, "faults: stale bridge: %v\n", err)
			} else {
				fmt.Printf("faults: removed bridge %s of an earlier run that was killed\n", name)
			}
		}
	}
}

// freeSubnet picks a 10.213.x.0/24 that no interface of the root namespace uses (another run
// of the suite, say), starting from one derived from the PID.
func freeSubnet(pid int) (string, error) {
	out, err := exec.Command("ip", "-o", "-4", "addr", "show").Output()
	if err != nil {
		return "", fmt.Errorf("ip addr show: %v", err)
	}
	for k := 0; k < 250; k++ {
		subnet := fmt.Sprintf("10.213.%d", (pid+k)%250)
		if !strings.Contains(string(out), " "+subnet+".") {
			return subnet, nil
		}
	}
	return "", fmt.Errorf("every 10.213.x.0/24 is in use")
}

// address is server i's IP address (0-based i).
func (n *network) address(i int) string { return fmt.Sprintf("%s.%d", n.subnet, i+1) }

// cut drops every packet between servers a and b, both ways.
func (n *network) cut(a, b int) error {
	for _, pair := range [][2]int{{a, b}, {b, a}} {
		peer := n.address(pair[1])
		if err := n.inNamespace(pair[0], "iptables", "-A", "INPUT", "-s", peer, "-j", "DROP"); err != nil {
			return err
		}
		if err := n.inNamespace(pair[0], "iptables", "-A", "OUTPUT", "-d", peer, "-j", "DROP"); err != nil {
			return err
		}
	}
	return nil
}

// heal removes every rule of every server's namespace.
func (n *network) heal() error {
	var first error
	for i := range n.names {
		if err := n.inNamespace(i, "iptables", "-F"); err != nil && first == nil {
			first = err
		}
	}
	return first
}

// teardown removes the namespaces (their veth ends go with them) and the bridge. It reports
// what it could not remove on stderr and carries on.
func (n *network) teardown() {
	for _, ns := range n.created {
		if err := command("ip", "netns", "del", ns); err != nil {
			fmt.Fprintf(os.Stderr, "faults: %v\n", err)
		}
	}
	n.created = nil
	if n.bridge {
		if err := command("ip", "link", "del", n.tag+"b"); err != nil {
			fmt.Fprintf(os.Stderr, "faults: %v\n", err)
		}
		n.bridge = false
	}
}
