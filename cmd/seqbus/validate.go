package main

import (
	"context"
	"errors"
	"runtime"
	"strings"

	"github.com/seqbus/seqbus/bus"
	"github.com/seqbus/seqbus/client"
	"github.com/seqbus/seqbus/internal/flagcheck"
	"github.com/seqbus/seqbus/nodeconfig"
	"github.com/seqbus/seqbus/wire"
)

// Every command checks every flag right after parsing them, before it
// starts anything (a child, a socket, a file), with internal/flagcheck's
// checks and the node-specific ones below; a failed check is a
// usageError, which main prints as one line naming the flag and exits
// with status 2.

// Exit statuses.
const (
	exitFailure     = 1   // the command ran and failed
	exitUsage       = 2   // a bad flag, setting or config file: nothing was started
	exitInterrupted = 130 // SIGINT or SIGTERM (128 + SIGINT, as a shell reports it)
)

// The flag checks are internal/flagcheck's; these names keep the
// commands' call sites short.
type usageError = flagcheck.UsageError

func usagef(format string, args ...any) error { return flagcheck.Usagef(format, args...) }
func asUsage(err error) error                 { return flagcheck.AsUsage(err) }
func isUsage(err error) bool                  { return flagcheck.IsUsage(err) }
func firstError(errs ...error) error          { return flagcheck.First(errs...) }
func second[T any](v T, err error) error      { return flagcheck.Second(v, err) }
func prefixed(name string, err error) error   { return flagcheck.Prefixed(name, err) }

func checkPositive[T flagcheck.Number](name string, v T) error { return flagcheck.Positive(name, v) }
func checkNonNegative[T flagcheck.Number](name string, v T) error {
	return flagcheck.NonNegative(name, v)
}
func checkRange[T flagcheck.Number](name string, v, lo, hi T) error {
	return flagcheck.Range(name, v, lo, hi)
}
func checkRate(name string, v float64) error             { return flagcheck.Rate(name, v, client.RateMax) }
func checkRequired(name, v string) error                 { return flagcheck.Required(name, v) }
func checkOneOf(name, v string, allowed ...string) error { return flagcheck.OneOf(name, v, allowed...) }
func checkEach(name, list string, check func(string) error) error {
	return flagcheck.Each(name, list, check)
}
func checkAddr(name, v string, optional bool) error { return flagcheck.Addr(name, v, optional) }
func checkDest(name, v string, optional bool) error { return flagcheck.Dest(name, v, optional) }

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

// checkNodeConfig runs nodeconfig.Config.Validate (the library's own checks,
// the interface among them) and words its error as a flag error.
func checkNodeConfig(cfg nodeconfig.Config) error {
	err := cfg.Validate()
	if err == nil {
		return nil
	}
	if errors.As(err, new(*bus.InterfaceError)) {
		return flagcheck.Interface("iface", cfg.Interface)
	}
	if me := (*bus.MTUError)(nil); errors.As(err, &me) {
		return usagef("--datagram-bytes %d does not fit --iface %s: its MTU is %d, and a datagram takes %d more for the IPv4 and UDP headers (at most %d; or raise the MTU)",
			me.DatagramBytes, me.Name, me.MTU, bus.IPv4UDPHeaderBytes, me.MTU-bus.IPv4UDPHeaderBytes)
	}
	return usagef("%s", strings.TrimPrefix(err.Error(), "node: "))
}

// datagramBytesUsage is --datagram-bytes's help, the same for every
// command that has it.
const datagramBytesUsage = "largest datagram sent, and the receive buffers' size, in bytes: every node and client of a stream must use the same (1472 never fragments on standard Ethernet; 8972 for a 9000-byte MTU; at most 65507; a node refuses one its --iface's MTU cannot carry; see docs/tuning.md)"

// nodeDatagramBytesUsage is `seqbus node --datagram-bytes`'s help: 0
// picks the size that fits the interface.
const nodeDatagramBytesUsage = "largest datagram sent, and the receive buffers' size, in bytes: every node and client of a stream must use the same (0: 1472, which never fragments on standard Ethernet, or less to fit --iface's MTU; 8972 for a 9000-byte MTU; at most 65507; a size given here that the --iface's MTU cannot carry is refused; see docs/tuning.md)"

// checkNodeDatagramBytes: 0 (fit the interface) or a size
// checkDatagramBytes takes.
func checkNodeDatagramBytes(v int) error {
	if v == 0 {
		return nil
	}
	return checkDatagramBytes(v)
}

// checkDatagramBytes: --datagram-bytes is wire.MinDatagramLen up to the
// largest UDP payload.
func checkDatagramBytes(v int) error {
	return checkRange("datagram-bytes", v, wire.MinDatagramLen, wire.MaxFrameLen)
}

// checkSessionHistory: --session-history is 0 (off) up to
// nodeconfig.MaxSessionHistory outputs.
func checkSessionHistory(v int) error {
	return checkRange("session-history", v, 0, nodeconfig.MaxSessionHistory)
}

// sessionHistoryConfig maps the flag to nodeconfig.Config.SessionHistory, where
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
	return checkRange("md-ring", v, nodeconfig.MinMDRingUpdates, nodeconfig.MaxMDRingUpdates)
}

const segmentBytesUsage = "journal segment size in bytes (64 KiB..1 GiB): each segment file is preallocated whole when the journal rolls to it, so a full disk stops the node at a roll, never inside a segment (docs/operating.md)"

const fsyncInlineUsage = "under --fsync group or always, fsync on the node's agent thread, with no hand-off to the fsync thread, while fsyncs average at most this (a fast disk: tmpfs, battery-backed NVMe); slower fsyncs stay on the fsync thread (0: always on the thread; see docs/tuning.md)"
