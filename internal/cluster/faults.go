package cluster

import (
	"fmt"
	"net/netip"
	"os/exec"
	"strconv"
	"strings"
)

// Faults injected with nftables inside a network namespace the caller
// created (internal/netns; ns is its name). Each fault installs its own
// table, so they combine, and the matching end removes it. Loss at random
// is netns.Host.DropRandom; kill and stop are signals (Proc.Signal).
const (
	// BlackoutTable is the nftables table Blackout installs.
	BlackoutTable = "seqbus_blackout"
	// HoldTable is the nftables table HoldUnicast installs.
	HoldTable = "seqbus_hold"
)

// Blackout drops every datagram to UDP port arriving in ns (on the
// replication group's port, a standby then sees nothing from the primary;
// NAK repair cannot start because it sees no gap).
func Blackout(ns string, port uint16) error {
	return dropIn(ns, BlackoutTable, "udp", "dport", strconv.Itoa(int(port)), "counter", "drop")
}

// EndBlackout removes Blackout's rule.
func EndBlackout(ns string) error {
	return InNetns(ns, "nft", "delete", "table", "inet", BlackoutTable)
}

// HoldUnicast drops every datagram from src to UDP port arriving in ns
// (a standby's acks to its primary: a partition in one direction).
func HoldUnicast(ns string, src netip.Addr, port uint16) error {
	return dropIn(ns, HoldTable, "ip", "saddr", src.String(), "udp", "dport", strconv.Itoa(int(port)), "counter", "drop")
}

// ReleaseUnicast removes HoldUnicast's rule.
func ReleaseUnicast(ns string) error { return InNetns(ns, "nft", "delete", "table", "inet", HoldTable) }

// dropIn adds table with an input chain holding one rule.
func dropIn(ns, table string, rule ...string) error {
	if err := InNetns(ns, "nft", "add", "table", "inet", table); err != nil {
		return err
	}
	if err := InNetns(ns, "nft", "add", "chain", "inet", table, "input",
		"{ type filter hook input priority 0 ; policy accept ; }"); err != nil {
		return err
	}
	return InNetns(ns, "nft", append([]string{"add", "rule", "inet", table, "input"}, rule...)...)
}

// InNetns runs a tool inside namespace ns; a failure's error carries its
// output.
func InNetns(ns, name string, args ...string) error {
	out, err := exec.Command("ip", append([]string{"netns", "exec", ns, name}, args...)...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s %s in %s: %v\n%s", name, strings.Join(args, " "), ns, err, out)
	}
	return nil
}
