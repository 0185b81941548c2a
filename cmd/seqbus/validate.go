package main

import (
	"context"
	"errors"
	"strings"

	"github.com/seqbus/seqbus/client"
	"github.com/seqbus/seqbus/internal/flagcheck"
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
func prefixed(name string, err error) error   { return flagcheck.Prefixed(name, err) }

func checkPositive[T flagcheck.Number](name string, v T) error { return flagcheck.Positive(name, v) }
func checkRate(name string, v float64) error                   { return flagcheck.Rate(name, v, client.RateMax) }
func checkRequired(name, v string) error                       { return flagcheck.Required(name, v) }

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

// datagramBytesUsage is --datagram-bytes's help, the same for every
// command that has it.
const datagramBytesUsage = "largest datagram sent, and the receive buffers' size, in bytes: every node and client of a stream must use the same (1472 never fragments on standard Ethernet; 8972 for a 9000-byte MTU; at most 65507; a node refuses one its --iface's MTU cannot carry; see docs/tuning.md)"

// nodeDatagramBytesUsage is `seqbus node --datagram-bytes`'s help: 0
// picks the size that fits the interface.
const nodeDatagramBytesUsage = "largest datagram sent, and the receive buffers' size, in bytes: every node and client of a stream must use the same (0: 1472, which never fragments on standard Ethernet, or less to fit --iface's MTU; 8972 for a 9000-byte MTU; at most 65507; a size given here that the --iface's MTU cannot carry is refused; see docs/tuning.md)"

const segmentBytesUsage = "journal segment size in bytes (64 KiB..1 GiB): each segment file is preallocated whole when the journal rolls to it, so a full disk stops the node at a roll, never inside a segment (docs/operating.md)"

const fsyncInlineUsage = "under --fsync group or always, fsync on the node's agent thread, with no hand-off to the fsync thread, while fsyncs average at most this (a fast disk: tmpfs, battery-backed NVMe); slower fsyncs stay on the fsync thread (0: always on the thread; see docs/tuning.md)"
const traceWindowUsage = "FROM-TO: client order ids of the measured commands (seqbus bench); the trace also reports the allocations and socket calls between the process's first handling of FROM and its last of TO"
