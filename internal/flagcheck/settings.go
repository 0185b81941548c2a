package flagcheck

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/seqbus/seqbus/auth"
	"github.com/seqbus/seqbus/bus"
	"github.com/seqbus/seqbus/internal/stagetrace"
	"github.com/seqbus/seqbus/journal"
	"github.com/seqbus/seqbus/wire"
)

// The checks of the flags several commands share: a node's, a client's,
// the witness's and the bench's.

// Stream: --stream is a stream id.
func Stream(v uint) error { return Range("stream", v, 1, 1<<16-1) }

// Idle: --name is an idle strategy (bus.ParseIdle).
func Idle(name, v string) error {
	if _, err := bus.ParseIdle(v); err != nil {
		return Usagef("--%s: %v", name, err)
	}
	return nil
}

// Fsync: --name is a journal fsync policy (journal.ParseSyncPolicy).
func Fsync(name, v string) error {
	if _, err := journal.ParseSyncPolicy(v); err != nil {
		return Usagef("--%s: %v", name, err)
	}
	return nil
}

// DatagramBytes: --datagram-bytes is wire.MinDatagramLen up to the
// largest UDP payload.
func DatagramBytes(v int) error {
	return Range("datagram-bytes", v, wire.MinDatagramLen, wire.MaxFrameLen)
}

// LoadKey reads --key's master key file, or returns nil for an empty
// path.
func LoadKey(path string) (*auth.MasterKey, error) {
	if path == "" {
		return nil, nil
	}
	k, err := auth.LoadKeyFile(path)
	if err != nil {
		return nil, UsageError{Err: fmt.Errorf("--key: %w", err)}
	}
	return &k, nil
}

// TraceStages: --trace-stages is 0 (off) up to stagetrace.RowsMax rows.
func TraceStages(n int) error {
	if n < 0 || n > stagetrace.RowsMax {
		return Usagef("--trace-stages: want 0..%d, got %d", stagetrace.RowsMax, n)
	}
	return nil
}

// TraceWindow: --trace-window is FROM-TO, and needs --trace-stages.
func TraceWindow(s string, traceStages int) error {
	if s == "" {
		return nil
	}
	if _, err := stagetrace.ParseWindow(s, nil); err != nil {
		return Usagef("--trace-window: %v", err)
	}
	if traceStages == 0 {
		return Usagef("--trace-window needs --trace-stages")
	}
	return nil
}

// Ints parses a list flag of comma-separated integers.
func Ints(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		v, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil {
			return nil, fmt.Errorf("bad number %q in %q", f, s)
		}
		out = append(out, v)
	}
	return out, nil
}

// NodeIDs parses a list flag of node ids, "1,2,3" ("": none): each
// 1..2^32-1, none twice (a typo for another node's id).
func NodeIDs(s string) ([]uint32, error) {
	if s == "" {
		return nil, nil
	}
	ints, err := Ints(s)
	if err != nil {
		return nil, err
	}
	out := make([]uint32, 0, len(ints))
	for _, v := range ints {
		if v <= 0 || v > 1<<32-1 {
			return nil, fmt.Errorf("bad node id %d", v)
		}
		if slices.Contains(out, uint32(v)) {
			return nil, fmt.Errorf("node id %d given twice", v)
		}
		out = append(out, uint32(v))
	}
	return out, nil
}
