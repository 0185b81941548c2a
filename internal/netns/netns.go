// Package netns builds throw-away Linux network namespaces for tests: a
// private loopback host, or a small LAN of hosts joined by veth pairs to a
// bridge that lives in its own namespace. Nothing is attached to the root
// namespace, so no test datagram can leave the machine.
//
// Usage contract:
//  1. Call Require(t) first: it skips when not root (and fails when CI=true).
//  2. Create hosts with New or NewLAN; both register teardown with t.Cleanup.
//  3. Create sockets inside a host with Host.Do; a socket keeps the namespace
//     it was created in, so it can be used from any goroutine afterwards.
//  4. Run tools (nft, ip) inside a host with Host.Run.
//
// Names carry a fixed prefix and the test process id, so concurrent test
// binaries never collide, and namespaces left by a killed process (whose pid
// no longer exists) are swept on the next run.
package netns

import (
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// namePrefix marks every namespace this package creates.
const namePrefix = "sbt-"

// hostsMax bounds a LAN: addresses are 10.77.0.2 .. 10.77.0.(hostsMax+1).
const hostsMax = 32

var (
	sequence  atomic.Uint64
	sweepOnce sync.Once
)

// Require skips the test unless it runs as root with `ip` available. When the
// environment variable CI is "true" it fails instead of skipping, because in
// CI a silently skipped multi-host test proves nothing.
func Require(t testing.TB) {
	t.Helper()
	reason := ""
	switch {
	case runtime.GOOS != "linux":
		reason = "network namespaces need Linux"
	case os.Geteuid() != 0:
		reason = "network namespaces need root (run as root, or in CI)"
	default:
		if _, err := exec.LookPath("ip"); err != nil {
			reason = "iproute2 `ip` not found (run scripts/setup)"
		}
	}
	if reason == "" {
		return
	}
	if os.Getenv("CI") == "true" {
		t.Fatalf("netns: cannot run in CI: %s", reason)
	}
	t.Skipf("netns: skipping: %s", reason)
}

// RequireTool is Require for an extra binary such as nft.
func RequireTool(t testing.TB, name string) {
	t.Helper()
	if _, err := exec.LookPath(name); err == nil {
		return
	}
	if os.Getenv("CI") == "true" {
		t.Fatalf("netns: %s not found in CI (run scripts/setup)", name)
	}
	t.Skipf("netns: skipping: %s not found (run scripts/setup)", name)
}

// Host is one network namespace.
type Host struct {
	// Name is the namespace name as `ip netns` knows it.
	Name string
	// Iface is the LAN interface inside the namespace ("eth0"), or "lo" for a
	// host made by New.
	Iface string
	// Addr is the host's IPv4 address on Iface (127.0.0.1 for New).
	Addr netip.Addr
}

// LAN is a set of hosts on one bridged segment, 10.77.0.0/24.
type LAN struct {
	Hosts  []*Host
	bridge *Host
}

// New creates one namespace with loopback up and multicast routed to lo.
func New(t testing.TB) *Host {
	t.Helper()
	h := &Host{Name: uniqueName("h"), Iface: "lo", Addr: netip.MustParseAddr("127.0.0.1")}
	create(t, h.Name)
	mustIP(t, "-n", h.Name, "link", "set", "lo", "multicast", "on")
	mustIP(t, "-n", h.Name, "route", "add", "224.0.0.0/4", "dev", "lo")
	return h
}

// NewLAN creates hosts namespaces, each with eth0 = 10.77.0.(i+2)/24 joined
// by a veth pair to a bridge (multicast snooping off, so every port sees every
// group) inside a separate bridge namespace. Each eth0 sends single
// datagrams, as a wire does (gso_max_segs 1).
func NewLAN(t testing.TB, hosts int) *LAN {
	t.Helper()
	if hosts < 1 || hosts > hostsMax {
		t.Fatalf("netns: NewLAN(%d): want 1..%d hosts", hosts, hostsMax)
	}
	lan := &LAN{bridge: &Host{Name: uniqueName("br")}}
	create(t, lan.bridge.Name)
	br := lan.bridge.Name
	mustIP(t, "-n", br, "link", "add", "br0", "type", "bridge", "mcast_snooping", "0")
	mustIP(t, "-n", br, "link", "set", "br0", "up")
	for i := 0; i < hosts; i++ {
		h := &Host{
			Name:  uniqueName("h" + strconv.Itoa(i)),
			Iface: "eth0",
			Addr:  netip.AddrFrom4([4]byte{10, 77, 0, byte(i + 2)}),
		}
		create(t, h.Name)
		port := "p" + strconv.Itoa(i)
		mustIP(t, "-n", br, "link", "add", port, "type", "veth", "peer", "name", "eth0", "netns", h.Name)
		mustIP(t, "-n", br, "link", "set", port, "master", "br0", "up")
		mustIP(t, "-n", h.Name, "addr", "add", h.Addr.String()+"/24", "dev", "eth0")
		// A wire carries datagrams: a UDP GSO message (bus sends runs of
		// equal-length datagrams as one) is cut into them before the veth,
		// as a NIC without segmentation offload has the stack do, so loss
		// injected on the way (DropRandom) hits datagrams, not messages.
		mustIP(t, "-n", h.Name, "link", "set", "dev", "eth0", "gso_max_segs", "1")
		mustIP(t, "-n", h.Name, "link", "set", "eth0", "up")
		lan.Hosts = append(lan.Hosts, h)
	}
	// A link set up is not yet passing frames (the veth's carrier, the
	// bridge port's state): a test that sends at once can lose its first
	// window and, pacing on what arrived, wait forever. Return once every
	// link says UP.
	for i, h := range lan.Hosts {
		waitUp(t, h.Name, "eth0")
		waitUp(t, br, "p"+strconv.Itoa(i))
	}
	waitUp(t, br, "br0")
	return lan
}

// linkUpWait bounds waitUp.
const linkUpWait = 10 * time.Second

// waitUp polls until link in namespace ns reports state UP (at most
// linkUpWait, then the test fails with the state it saw).
func waitUp(t testing.TB, ns, link string) {
	t.Helper()
	deadline := time.Now().Add(linkUpWait)
	for {
		out, err := exec.Command("ip", "-n", ns, "-o", "link", "show", link).CombinedOutput()
		if err == nil && strings.Contains(string(out), " state UP ") {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("netns: %s in %s not UP after %v: %v\n%s", link, ns, linkUpWait, err, out)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Run runs a command inside the host's namespace and returns its combined
// output; a non-zero exit fails the test.
func (h *Host) Run(t testing.TB, name string, args ...string) string {
	t.Helper()
	full := append([]string{"netns", "exec", h.Name, name}, args...)
	out, err := exec.Command("ip", full...).CombinedOutput()
	if err != nil {
		t.Fatalf("netns: %s %s in %s: %v\n%s", name, strings.Join(args, " "), h.Name, err, out)
	}
	return string(out)
}

func uniqueName(role string) string {
	return fmt.Sprintf("%s%d-%d-%s", namePrefix, os.Getpid(), sequence.Add(1), role)
}

func create(t testing.TB, name string) {
	t.Helper()
	sweepOnce.Do(sweepStale)
	mustIP(t, "netns", "add", name)
	t.Cleanup(func() {
		// Deleting the namespace destroys its interfaces, veth peers included.
		if out, err := exec.Command("ip", "netns", "del", name).CombinedOutput(); err != nil {
			t.Errorf("netns: delete %s: %v\n%s", name, err, out)
		}
	})
	mustIP(t, "-n", name, "link", "set", "lo", "up")
}

// sweepStale deletes namespaces of this package whose creating process is
// gone (a test binary killed by a timeout cannot run its cleanups).
func sweepStale() {
	out, err := exec.Command("ip", "netns", "list").Output()
	if err != nil {
		return
	}
	for _, line := range strings.Split(string(out), "\n") {
		name, _, _ := strings.Cut(strings.TrimSpace(line), " ")
		rest, ok := strings.CutPrefix(name, namePrefix)
		if !ok {
			continue
		}
		pidText, _, _ := strings.Cut(rest, "-")
		pid, err := strconv.Atoi(pidText)
		if err != nil || pid == os.Getpid() {
			continue
		}
		if _, err := os.Stat("/proc/" + pidText); err == nil {
			continue
		}
		_ = exec.Command("ip", "netns", "del", name).Run()
	}
}

func mustIP(t testing.TB, args ...string) {
	t.Helper()
	if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
		t.Fatalf("netns: ip %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// nftTable is the nftables table this package installs inside a host.
const nftTable = "seqbus_test"

// DropRandom installs an nftables rule in the host that drops, at random,
// one in mod of the UDP datagrams arriving for port, and counts them.
// Deleting the namespace removes the rule.
func (h *Host) DropRandom(t testing.TB, port uint16, mod int) {
	t.Helper()
	if mod < 2 {
		t.Fatalf("netns: DropRandom mod %d: want >= 2", mod)
	}
	h.Run(t, "nft", "add", "table", "inet", nftTable)
	h.Run(t, "nft", "add", "chain", "inet", nftTable, "input",
		"{ type filter hook input priority 0 ; policy accept ; }")
	h.Run(t, "nft", "add", "rule", "inet", nftTable, "input",
		"udp", "dport", strconv.Itoa(int(port)), "numgen", "random", "mod", strconv.Itoa(mod), "0", "counter", "drop")
}

// Dropped returns how many packets the DropRandom rule has dropped.
func (h *Host) Dropped(t testing.TB) uint64 {
	t.Helper()
	out := h.Run(t, "nft", "list", "chain", "inet", nftTable, "input")
	// The rule prints as "... counter packets N bytes M drop".
	fields := strings.Fields(out)
	for i := 0; i+1 < len(fields); i++ {
		if fields[i] == "packets" {
			n, err := strconv.ParseUint(fields[i+1], 10, 64)
			if err != nil {
				t.Fatalf("netns: parse nft counter %q: %v", fields[i+1], err)
			}
			return n
		}
	}
	t.Fatalf("netns: no counter in nft output:\n%s", out)
	return 0
}
