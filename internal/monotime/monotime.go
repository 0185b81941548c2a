// Package monotime is the one monotonic clock every seqbus process shares
// on a host: CLOCK_MONOTONIC in nanoseconds, read through the Go runtime's
// vDSO path (no syscall, no allocation). Because it is the same clock in
// every process, stage timestamps taken by a client, a primary and a
// standby on one machine can be subtracted from one another.
//
// The zero point is the kernel's (boot), not this process's start, so
// values are large; subtract, never print them raw.
package monotime

import (
	_ "unsafe" // for go:linkname
)

// nanotime is the runtime's CLOCK_MONOTONIC reading (the clock behind
// time.Since). The runtime keeps this linkname for outside packages.
//
//go:linkname nanotime runtime.nanotime
func nanotime() int64

// Now returns CLOCK_MONOTONIC in nanoseconds.
func Now() int64 { return nanotime() }
