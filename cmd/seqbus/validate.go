package main

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"runtime"
	"strings"
	"time"

	"github.com/seqbus/seqbus/bus"
	"github.com/seqbus/seqbus/node"
)

// Every command checks every flag right after parsing them, before it
// starts anything (a child, a socket, a file), with the checks below; a
// failed check is a usageError, which main prints as one line naming the
// flag and exits with status 2.

// Exit statuses.
const (
	exitFailure     = 1   // the command ran and failed
	exitUsage       = 2   // a bad flag, setting or config file: nothing was started
	exitInterrupted = 130 // SIGINT or SIGTERM (128 + SIGINT, as a shell reports it)
)

// usageError is a bad flag, setting or config file.
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

// usagef is a usageError with a message.
func usagef(format string, args ...any) error { return usageError{fmt.Errorf(format, args...)} }

// asUsage marks err (if not nil) as a usage error.
func asUsage(err error) error {
	if err == nil || isUsage(err) {
		return err
	}
	return usageError{err}
}

func isUsage(err error) bool { return errors.As(err, new(usageError)) }

// errInterrupted is returned by a command stopped by SIGINT or SIGTERM
// after it printed what it had so far.
var errInterrupted = errors.New("interrupted")

// exitStatus maps a command's error to the process's exit status.
func exitStatus(err error) int {
	// An error may carry its own exit code (journal verify's 1, a bad
	// --metrics-addr's 2).
	var coded interface{ ExitCode() int }
	if errors.As(err, &coded) {
		return coded.ExitCode()
	}
	switch {
	case isUsage(err):
		return exitUsage
	case errors.Is(err, errInterrupted), errors.Is(err, context.Canceled):
		return exitInterrupted
	}
	return exitFailure
}

// errorLine is the one line main prints for a command's error, without
// the command's name repeated from a package's prefix ("seqbus client:
// client: ..." reads "seqbus client: ...").
func errorLine(command string, err error) string {
	if errors.Is(err, context.Canceled) && !errors.Is(err, errInterrupted) {
		return errInterrupted.Error()
	}
	msg := strings.TrimPrefix(err.Error(), command+": ")
	return strings.ReplaceAll(msg, "\n", "; ")
}

// firstError returns the first non-nil error: a command lists its checks
// in the order of its flags.
func firstError(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

type number interface {
	~int | ~int64 | ~uint | ~uint64 | ~float64
}

// checkPositive: --name must be > 0.
func checkPositive[T number](name string, v T) error {
	if v <= 0 {
		return usagef("--%s must be > 0, got %v", name, v)
	}
	return nil
}

// checkNonNegative: --name must be >= 0.
func checkNonNegative[T number](name string, v T) error {
	if v < 0 {
		return usagef("--%s must be >= 0, got %v", name, v)
	}
	return nil
}

// checkRange: --name must be in lo..hi.
func checkRange[T number](name string, v, lo, hi T) error {
	if v < lo || v > hi {
		return usagef("--%s must be %v..%v, got %v", name, lo, hi, v)
	}
	return nil
}

// checkRequired: --name must be given.
func checkRequired(name, v string) error {
	if v == "" {
		return usagef("--%s is required", name)
	}
	return nil
}

// checkOneOf: --name must be one of the allowed values.
func checkOneOf(name, v string, allowed ...string) error {
	for _, a := range allowed {
		if v == a {
			return nil
		}
	}
	return usagef("--%s must be one of %s, got %q", name, strings.Join(allowed, ", "), v)
}

// checkEach applies check to every comma-separated element of a list flag.
func checkEach(name, list string, check func(string) error) error {
	for _, f := range strings.Split(list, ",") {
		if err := check(strings.TrimSpace(f)); err != nil {
			return usagef("--%s: %v", name, err)
		}
	}
	return nil
}

// checkAddr: --name must be host:port (empty is allowed when optional).
func checkAddr(name, v string, optional bool) error {
	if v == "" && optional {
		return nil
	}
	if _, err := netip.ParseAddrPort(v); err != nil {
		return usagef("--%s must be ip:port, got %q", name, v)
	}
	return nil
}

// checkGroup: --name must be an IPv4 multicast ip:port (empty when optional).
func checkGroup(name, v string, optional bool) error {
	if v == "" && optional {
		return nil
	}
	a, err := netip.ParseAddrPort(v)
	if err != nil || !a.Addr().Is4() || !a.Addr().IsMulticast() || a.Port() == 0 {
		return usagef("--%s must be an IPv4 multicast group ip:port (e.g. 239.77.0.1:7100), got %q", name, v)
	}
	return nil
}

// checkInterface: --name must be an interface of this host that is up.
func checkInterface(name, v string) error {
	var ie *bus.InterfaceError
	if err := bus.CheckInterface(v); errors.As(err, &ie) {
		what := "no such interface"
		if ie.Down {
			what = "the interface is down"
		}
		return usagef("--%s %s: %s (this host has: %s)", name, ie.Name, what, strings.Join(ie.Have, ", "))
	} else if err != nil {
		return usagef("--%s %s: %v", name, v, err)
	}
	return nil
}

// checkNodeID: an id a node may have.
func checkNodeID(name string, v uint) error {
	if v == 0 || v > 1<<32-1 {
		return usagef("--%s must be a node id 1..%d, unique in the cluster, got %d", name, uint64(1<<32-1), v)
	}
	return nil
}

// checkStream: a stream id.
func checkStream(v uint) error { return checkRange("stream", v, 1, 1<<16-1) }

// checkCPU: -1 (no pinning) or a CPU of this machine.
func checkCPU(v int) error { return checkRange("cpu", v, -1, runtime.NumCPU()-1) }

// checkIdle and checkFsync name the flag in the parsers' errors.
func checkIdle(name, v string) error {
	if _, err := parseIdle(v); err != nil {
		return usagef("--%s: %v", name, err)
	}
	return nil
}

func checkFsync(name, v string) error {
	if _, err := parseFsync(v); err != nil {
		return usagef("--%s: %v", name, err)
	}
	return nil
}

// checkLease: the lease flags' relations (arbiter.Config.Validate's rule,
// in flag names): every one positive, margin < lease, and renew + retry fit
// in what the margin leaves of the lease.
func checkLease(lease, renew, margin, retry time.Duration) error {
	if err := firstError(checkPositive("lease", lease), checkPositive("renew", renew),
		checkNonNegative("margin", margin), checkPositive("retry", retry)); err != nil {
		return err
	}
	if margin >= lease {
		return usagef("--margin must be < --lease (%v), got %v", lease, margin)
	}
	if renew+retry >= lease-margin {
		return usagef("--renew (%v) + --retry (%v) must be < --lease - --margin (%v)", renew, retry, lease-margin)
	}
	return nil
}

// checkNodeConfig runs node.Config.Validate (the library's own checks,
// the interface among them) and words its error as a flag error.
func checkNodeConfig(cfg node.Config) error {
	err := cfg.Validate()
	if err == nil {
		return nil
	}
	if errors.As(err, new(*bus.InterfaceError)) {
		return checkInterface("iface", cfg.Interface)
	}
	return usagef("%s", strings.TrimPrefix(err.Error(), "node: "))
}

// second drops a parse result, keeping its error, for firstError.
func second[T any](_ T, err error) error { return err }

// prefixed names the flag in err, if err is not nil.
func prefixed(name string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("--%s: %w", name, err)
}

// checkSessionHistory: --session-history is 0 (off) up to
// node.MaxSessionHistory outputs.
func checkSessionHistory(v int) error {
	return checkRange("session-history", v, 0, node.MaxSessionHistory)
}

// sessionHistoryConfig maps the flag to node.Config.SessionHistory, where
// 0 means the default and a negative value none.
func sessionHistoryConfig(v int) int {
	if v == 0 {
		return -1
	}
	return v
}

// checkMDRing: the market-data ring's bounds (node.MinMDRingUpdates..
// node.MaxMDRingUpdates updates).
func checkMDRing(v int) error {
	return checkRange("md-ring", v, node.MinMDRingUpdates, node.MaxMDRingUpdates)
}
