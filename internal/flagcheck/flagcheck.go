// Package flagcheck holds the checks every seqbus command runs on its
// flags right after parsing them, before it starts anything (a child, a
// socket, a file). A failed check is a UsageError naming the flag: the
// command prints it as one line and exits with status 2. ApplyFile reads
// a command's --config file into its flags.
package flagcheck

import (
	"errors"
	"fmt"
	"math"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/seqbus/seqbus/bus"
)

// UsageError is a bad flag, setting or config file.
type UsageError struct{ Err error }

func (e UsageError) Error() string { return e.Err.Error() }
func (e UsageError) Unwrap() error { return e.Err }

// Usagef is a UsageError with a message.
func Usagef(format string, args ...any) error { return UsageError{fmt.Errorf(format, args...)} }

// AsUsage marks err (if not nil) as a usage error.
func AsUsage(err error) error {
	if err == nil || IsUsage(err) {
		return err
	}
	return UsageError{err}
}

// IsUsage says whether err is (or wraps) a UsageError.
func IsUsage(err error) bool { return errors.As(err, new(UsageError)) }

// First returns the first non-nil error: a command lists its checks in
// the order of its flags.
func First(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// Second drops a parse result, keeping its error, for First.
func Second[T any](_ T, err error) error { return err }

// Prefixed names the flag in err, if err is not nil.
func Prefixed(name string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("--%s: %w", name, err)
}

// Number is what the numeric checks take.
type Number interface {
	~int | ~int64 | ~uint | ~uint64 | ~float64
}

// finite: a float flag parses "NaN" and "Inf" (and 1e400 as +Inf), and
// NaN fails no comparison; every numeric check refuses them first.
func finite[T Number](name string, v T) error {
	if f := float64(v); math.IsNaN(f) || math.IsInf(f, 0) {
		return Usagef("--%s must be a finite number, got %v", name, v)
	}
	return nil
}

// Positive: --name must be > 0.
func Positive[T Number](name string, v T) error {
	if err := finite(name, v); err != nil {
		return err
	}
	if v <= 0 {
		return Usagef("--%s must be > 0, got %v", name, v)
	}
	return nil
}

// NonNegative: --name must be >= 0.
func NonNegative[T Number](name string, v T) error {
	if err := finite(name, v); err != nil {
		return err
	}
	if v < 0 {
		return Usagef("--%s must be >= 0, got %v", name, v)
	}
	return nil
}

// Range: --name must be in lo..hi.
func Range[T Number](name string, v, lo, hi T) error {
	if err := finite(name, v); err != nil {
		return err
	}
	if v < lo || v > hi {
		return Usagef("--%s must be %v..%v, got %v", name, lo, hi, v)
	}
	return nil
}

// Rate: --name is a rate per second, > 0 and at most max.
func Rate(name string, v, max float64) error {
	if err := Positive(name, v); err != nil {
		return err
	}
	if v > max {
		return Usagef("--%s must be at most %v per second, got %v", name, max, v)
	}
	return nil
}

// Required: --name must be given.
func Required(name, v string) error {
	if v == "" {
		return Usagef("--%s is required", name)
	}
	return nil
}

// Either: exactly one of --a and --b must be given (aSet, bSet: whether
// each was).
func Either(a string, aSet bool, b string, bSet bool) error {
	if aSet == bSet {
		return Usagef("give --%s or --%s, exactly one of them", a, b)
	}
	return nil
}

// Confirmed: a switch an operator must set to say they accept what the
// command does (why).
func Confirmed(name string, set bool, why string) error {
	if !set {
		return Usagef("--%s is required: %s", name, why)
	}
	return nil
}

// OneOf: --name must be one of the allowed values.
func OneOf(name, v string, allowed ...string) error {
	for _, a := range allowed {
		if v == a {
			return nil
		}
	}
	return Usagef("--%s must be one of %s, got %q", name, strings.Join(allowed, ", "), v)
}

// Each applies check to every comma-separated element of a list flag.
func Each(name, list string, check func(string) error) error {
	for _, f := range strings.Split(list, ",") {
		if err := check(strings.TrimSpace(f)); err != nil {
			return Usagef("--%s: %v", name, err)
		}
	}
	return nil
}

// Addr: --name must be ip:port (empty is allowed when optional).
func Addr(name, v string, optional bool) error {
	if v == "" && optional {
		return nil
	}
	if _, err := netip.ParseAddrPort(v); err != nil {
		return Usagef("--%s must be ip:port, got %q", name, v)
	}
	return nil
}

// Listen: --name is the ip:port a server binds that others are told to
// send to (a node's, the witness's). Port 0 is refused (the kernel would
// pick one nobody was told), and so is a multicast group (binding one
// receives on every interface, and nothing is sent to a server there);
// 0.0.0.0 or :: (every interface) is allowed.
func Listen(name, v string) error {
	a, err := netip.ParseAddrPort(v)
	switch {
	case err != nil:
		return Usagef("--%s must be ip:port, got %q", name, v)
	case a.Port() == 0:
		return Usagef("--%s %s: port 0 would be a port nobody is told: give the port the others send to", name, v)
	case a.Addr().IsMulticast():
		return Usagef("--%s %s: a multicast group is not an address to listen on: give this host's unicast address (or 0.0.0.0)", name, v)
	}
	return nil
}

// Dest: --name is an address this process sends to: ip:port of a host
// (empty is allowed when optional). Port 0, 0.0.0.0 or :: (which Linux
// takes for this host) and a multicast group are refused: a datagram
// there reaches no node, and the process would wait for answers that
// never come.
func Dest(name, v string, optional bool) error {
	if v == "" && optional {
		return nil
	}
	a, err := netip.ParseAddrPort(v)
	if err != nil {
		return Usagef("--%s must be ip:port, got %q", name, v)
	}
	if err := DestAddr(a); err != nil {
		return Usagef("--%s %s: %v", name, v, err)
	}
	return nil
}

// DestAddr is Dest's check of a parsed address.
func DestAddr(a netip.AddrPort) error {
	switch {
	case a.Port() == 0:
		return errors.New("port 0 is no destination: give the port the process listens on")
	case a.Addr().IsUnspecified():
		return errors.New("an unspecified address is no destination: give the host's address (127.0.0.1 on this host)")
	case a.Addr().IsMulticast():
		return errors.New("a multicast group is no destination here: give the host's unicast address")
	}
	return nil
}

// Group: --name must be an IPv4 multicast ip:port (empty when optional).
func Group(name, v string, optional bool) error {
	if v == "" && optional {
		return nil
	}
	a, err := netip.ParseAddrPort(v)
	if err != nil || !a.Addr().Is4() || !a.Addr().IsMulticast() || a.Port() == 0 {
		return Usagef("--%s must be an IPv4 multicast group ip:port (e.g. 239.77.0.1:7100), got %q", name, v)
	}
	return nil
}

// Interface: --name must be an interface of this host that is up.
func Interface(name, v string) error {
	var ie *bus.InterfaceError
	if err := bus.CheckInterface(v); errors.As(err, &ie) {
		what := "no such interface"
		if ie.Down {
			what = "the interface is down"
		}
		return Usagef("--%s %s: %s (this host has: %s)", name, ie.Name, what, strings.Join(ie.Have, ", "))
	} else if err != nil {
		return Usagef("--%s %s: %v", name, v, err)
	}
	return nil
}

// NodeID: an id a node may have.
func NodeID(name string, v uint) error {
	if v == 0 || v > 1<<32-1 {
		return Usagef("--%s must be a node id 1..%d, unique in the cluster, got %d", name, uint64(1<<32-1), v)
	}
	return nil
}

// Lease: the lease flags' relations (arbiter.Config.Validate's rule, in
// flag names): every one positive, margin < lease, and renew + retry fit
// in what the margin leaves of the lease.
func Lease(lease, renew, margin, retry time.Duration) error {
	if err := First(Positive("lease", lease), Positive("renew", renew),
		NonNegative("margin", margin), Positive("retry", retry)); err != nil {
		return err
	}
	if margin >= lease {
		return Usagef("--margin must be < --lease (%v), got %v", lease, margin)
	}
	if renew+retry >= lease-margin {
		return Usagef("--renew (%v) + --retry (%v) must be < --lease - --margin (%v)", renew, retry, lease-margin)
	}
	return nil
}

// InSync: the in-sync flags' relation: --insync-timeout positive,
// --probe-after not negative (0: no probes) and below it,
// --disk-stall-after 0 (the in-sync timeout) or at least minDiskStall.
func InSync(timeout, probeAfter, diskStall, minDiskStall time.Duration) error {
	if err := First(Positive("insync-timeout", timeout), NonNegative("probe-after", probeAfter), NonNegative("disk-stall-after", diskStall)); err != nil {
		return err
	}
	if probeAfter >= timeout {
		return Usagef("--probe-after must be < --insync-timeout (%v), got %v", timeout, probeAfter)
	}
	if diskStall != 0 && diskStall < minDiskStall {
		return Usagef("--disk-stall-after must be 0 (the --insync-timeout) or at least %v, got %v: the disk watch takes a quarter of it between two ticks for a pause of its own", minDiskStall, diskStall)
	}
	return nil
}

// ListenPort: --listen must not use the --group's port. The group's
// receiver binds the wildcard address on that port (to get the group's
// datagrams), so any other socket of the host on it makes the node fail at
// start with EADDRINUSE.
func ListenPort(listen, group string) error {
	l, err1 := netip.ParseAddrPort(listen)
	g, err2 := netip.ParseAddrPort(group)
	if err1 != nil || err2 != nil || l.Port() != g.Port() {
		return nil // malformed ones are reported by their own checks
	}
	return Usagef("--listen %v uses the --group's port %d: the group's socket binds 0.0.0.0:%d, so pick another port for one of them", l, g.Port(), g.Port())
}

// Peers collects a repeated id=host:port flag (`--peer`, `--node`):
// ids 1..2^32-1, each once, each address one a sender may use (DestAddr).
type Peers map[uint32]netip.AddrPort

func (p Peers) String() string { return fmt.Sprint(map[uint32]netip.AddrPort(p)) }

// Set adds one id=host:port.
func (p Peers) Set(v string) error {
	idText, addrText, ok := strings.Cut(v, "=")
	if !ok {
		return fmt.Errorf("want id=host:port, got %q", v)
	}
	id, err := strconv.ParseUint(idText, 10, 32)
	if err != nil || id == 0 {
		return fmt.Errorf("bad peer id %q", idText)
	}
	addr, err := netip.ParseAddrPort(addrText)
	if err == nil {
		err = DestAddr(addr)
	}
	if err != nil {
		return fmt.Errorf("bad peer address %q: %v", addrText, err)
	}
	if prev, ok := p[uint32(id)]; ok {
		return fmt.Errorf("peer id %d given twice (%v and %v)", id, prev, addr)
	}
	p[uint32(id)] = addr
	return nil
}

// CheckMinInSync: --min-insync is at least 0 and no more standbys than
// there are peers.
func (p Peers) CheckMinInSync(v int) error {
	if v < 0 || v > len(p) {
		return Usagef("--min-insync must be 0..%d (the number of --peer), got %d", len(p), v)
	}
	return nil
}

// CheckNotSelf: no --peer may be this node itself (--id).
func (p Peers) CheckNotSelf(id uint) error {
	if addr, ok := p[uint32(id)]; ok && id != 0 {
		return Usagef("--peer %d=%s is this node's own --id", id, addr)
	}
	return nil
}

// OutputFile: --name is a file the command writes (at once, at status
// cadence or at exit), so the directory that will hold it must exist and
// take a new file now, not after a run whose results it would then lose.
// The probe file is created and removed at once. Empty, and "-" where
// the flag means standard output, pass.
func OutputFile(name, path string) error {
	if path == "" || path == "-" {
		return nil
	}
	if fi, err := os.Stat(path); err == nil && fi.IsDir() {
		return Usagef("--%s: %s is a directory, want a file", name, path)
	}
	dir := filepath.Dir(path)
	fi, err := os.Stat(dir)
	if err != nil {
		return Usagef("--%s: the directory for %s: %v", name, path, errors.Unwrap(err))
	}
	if !fi.IsDir() {
		return Usagef("--%s: %s is not a directory", name, dir)
	}
	f, err := os.CreateTemp(dir, ".seqbus-check-*")
	if err != nil {
		return Usagef("--%s: cannot create a file in %s: %v", name, dir, errors.Unwrap(err))
	}
	f.Close()
	os.Remove(f.Name())
	return nil
}

// TraceFile: --trace-file, checked as an OutputFile when --trace-stages
// asks for a trace (written at exit, after the whole run).
func TraceFile(traceStages int, path string) error {
	if traceStages <= 0 {
		return nil
	}
	return OutputFile("trace-file", path)
}
