package chaos

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"syscall"
)

// Network faults. They need a network of the run's own: with one of them
// in Config.Faults, Run starts the whole run again (the same binary and
// arguments, Config.Args) in a network namespace of its own (unshare
// CLONE_NEWNET), whose loopback no other process on the machine uses, and
// cuts datagrams there with nftables (one table, one input chain, flushed
// when the fault heals). Every process of the run (witness, nodes, the
// client) shares that one loopback, so a cut is by UDP port: a node's
// unicast port, both ways (its acks, NAKs, lease requests, the clients'
// commands and its answers, and whatever it sends from that port). The
// multicast group still reaches every node, as it would on one host.
const (
	// IsolatePrimary cuts the primary's port both ways past its lease
	// (lease + 0.2..1.5 s): the witness promotes a standby, the old
	// primary must stop releasing by its own clock and step down when it
	// hears the new epoch.
	IsolatePrimary = "isolate-primary"
	// IsolateStandby cuts a standby's port both ways for 0.2..3 s: its
	// acks stop, it leaves the in-sync set and rejoins after.
	IsolateStandby = "isolate-standby"
	// IsolateWitness cuts the witness's port both ways for 0.2..2 s: no
	// lease can be renewed or granted; past the lease the market halts
	// until the witness is heard again.
	IsolateWitness = "isolate-witness"
	// Loss drops 5..33 % of every UDP datagram at random for 1..4 s.
	Loss = "loss"
)

// NetworkFaults are the faults that need root and nftables.
var NetworkFaults = []string{IsolatePrimary, IsolateStandby, IsolateWitness, Loss}

// isolatedEnv marks the run started again in its own namespace.
const isolatedEnv = "SEQBUS_CHAOS_ISOLATED"

// needsNetwork reports whether faults has a network fault.
func needsNetwork(faults []string) bool {
	for _, f := range faults {
		if slices.Contains(NetworkFaults, f) {
			return true
		}
	}
	return false
}

// CheckNetwork says why this process cannot run network faults (nil
// when it can): they need root (a network namespace, nftables) and the
// ip and nft tools (scripts/setup installs them).
func CheckNetwork() error {
	if os.Geteuid() != 0 {
		return fmt.Errorf("the network faults (%s) need root: a network namespace of their own and nftables", strings.Join(NetworkFaults, ", "))
	}
	for _, tool := range []string{"ip", "nft"} {
		if _, err := exec.LookPath(tool); err != nil {
			return fmt.Errorf("the network faults need %s (scripts/setup installs it): %v", tool, err)
		}
	}
	return nil
}

// ExitError is Run's error when the run in its own namespace failed:
// Code is its exit status, and it printed why.
type ExitError struct{ Code int }

func (e *ExitError) Error() string {
	return fmt.Sprintf("the isolated chaos run exited with status %d", e.Code)
}

// ExitCode is the status the command exits with: the isolated run's.
func (e *ExitError) ExitCode() int { return e.Code }

// runIsolated runs cfg.Bin cfg.Args again in a new network namespace
// (network faults) and mount namespace (disk faults),
// its output to out, and returns its verdict as an error (nil: OK).
func runIsolated(ctx context.Context, cfg Config, out io.Writer) error {
	cmd := exec.CommandContext(ctx, cfg.Bin, cfg.Args...)
	cmd.Env = append(os.Environ(), isolatedEnv+"=1")
	cmd.Stdout, cmd.Stderr = out, os.Stderr
	var flags uintptr
	if needsNetwork(cfg.Faults) {
		flags |= syscall.CLONE_NEWNET
	}
	if needsDisk(cfg.Faults) {
		flags |= syscall.CLONE_NEWNS
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: flags, Pdeathsig: syscall.SIGKILL}
	// Ctrl-C reaches the child through the terminal's process group; a
	// cancelled context (SIGTERM) interrupts it as Ctrl-C would, and
	// it prints its verdict so far.
	cmd.Cancel = func() error { return cmd.Process.Signal(os.Interrupt) }
	err := cmd.Run()
	if ee, ok := err.(*exec.ExitError); ok {
		if ctx.Err() != nil {
			return ErrInterrupted
		}
		return &ExitError{Code: ee.ExitCode()}
	}
	return err
}

// firewall is the run's nftables table in its own namespace.
type firewall struct{}

const nftTable = "seqbus_chaos"

// setUpNetwork brings up the namespace's loopback with multicast routed
// to it, and the firewall's empty input chain.
func setUpNetwork() (firewall, error) {
	for _, args := range [][]string{
		{"ip", "link", "set", "lo", "up"},
		{"ip", "link", "set", "lo", "multicast", "on"},
		{"ip", "route", "add", "224.0.0.0/4", "dev", "lo"},
		{"nft", "add", "table", "inet", nftTable},
		{"nft", "add", "chain", "inet", nftTable, "input", "{ type filter hook input priority 0 ; policy accept ; }"},
	} {
		if err := runTool(args...); err != nil {
			return firewall{}, err
		}
	}
	return firewall{}, nil
}

// cut drops every UDP datagram from or to port.
func (firewall) cut(port uint16) error {
	p := strconv.Itoa(int(port))
	if err := runTool("nft", "add", "rule", "inet", nftTable, "input", "udp", "sport", p, "drop"); err != nil {
		return err
	}
	return runTool("nft", "add", "rule", "inet", nftTable, "input", "udp", "dport", p, "drop")
}

// lose drops one UDP datagram in mod at random.
func (firewall) lose(mod int) error {
	return runTool("nft", "add", "rule", "inet", nftTable, "input", "meta", "l4proto", "udp", "numgen", "random", "mod", strconv.Itoa(mod), "0", "drop")
}

// heal removes every cut and loss.
func (firewall) heal() error { return runTool("nft", "flush", "chain", "inet", nftTable, "input") }

func runTool(args ...string) error {
	if out, err := exec.Command(args[0], args[1:]...).CombinedOutput(); err != nil {
		return fmt.Errorf("%s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}
