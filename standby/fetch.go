package standby

import (
	"errors"
	"fmt"
	"hash/crc32"

	"github.com/seqbus/seqbus/wire"
)

// Snapshot transfer, standby side: ask for the snapshot from an offset,
// accept chunks strictly in order (anything else is ignored and counted),
// re-ask from the current offset when nothing arrives within a timeout
// (so a lost request or chunk costs one timeout, and a transfer resumes
// where it stopped instead of restarting), restart from zero if the primary
// now serves a different snapshot, and verify the CRC32C of the whole
// snapshot before declaring it complete.

// Defaults for FetchConfig.
const (
	// DefaultFetchTimeoutNs re-asks after 20 ms of silence: several round
	// trips plus a chunk burst on a LAN, short against a lease.
	DefaultFetchTimeoutNs = 20_000_000
	// DefaultFetchMaxBytes refuses snapshots over 1 GiB: the receiver must
	// buffer or spool it, so the bound is stated rather than implied.
	DefaultFetchMaxBytes = 1 << 30
)

// Errors from Fetch.
var (
	// ErrSnapshotChecksum: the reassembled snapshot does not match its
	// CRC32C; the transfer restarts from zero.
	ErrSnapshotChecksum = errors.New("standby: snapshot checksum mismatch")
	// ErrSnapshotTooLarge: the primary offers a snapshot over MaxBytes.
	ErrSnapshotTooLarge = errors.New("standby: snapshot larger than the configured bound")
	// ErrSnapshotNotAhead: the primary offers a snapshot at or below the
	// seq the standby has applied (an older primary that ignores the
	// request's seq). The transfer stops at its first chunk instead of
	// downloading state that would be thrown away; the standby catches up
	// by retransmit instead.
	ErrSnapshotNotAhead = errors.New("standby: offered snapshot is not ahead of what is applied")
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// FetchConfig configures a Fetch.
type FetchConfig struct {
	TimeoutNs int64
	MaxBytes  uint64
}

// FetchStats counts a Fetch's work.
type FetchStats struct {
	Requests, Chunks, OutOfOrder, Restarts, ChecksumFailures, Completed uint64
	// NotAhead counts transfers stopped at their first chunk because the
	// snapshot was not ahead of the applied seq given to StartAfter.
	NotAhead uint64
}

// Fetch is the pure core of one snapshot download. The runtime writes each
// accepted chunk's data at its offset (to a temp file), and on completion
// restores the state machine from it and calls Window.ResetTo(Seq()).
type Fetch struct {
	cfg      FetchConfig
	active   bool
	seq      uint64 // snapshot seq being fetched (0 = any/latest)
	after    uint64 // the applied seq: only a snapshot past it is useful
	total    uint64
	checksum uint32
	offset   uint64
	crc      uint32
	lastNs   int64
	// unanswered counts requests since the last accepted chunk: after
	// FetchRestartAfter of them the server is presumed unable to continue
	// (it crashed, or a new primary without this snapshot took over) and
	// the transfer starts again from zero.
	unanswered int
	stats      FetchStats
}

// FetchRestartAfter: re-asks without an accepted chunk before the fetch
// starts over from zero (a bounded retry: the one server that could serve
// that offset may be gone).
const FetchRestartAfter = 8

// NewFetch returns an idle Fetch.
func NewFetch(cfg FetchConfig) *Fetch {
	if cfg.TimeoutNs <= 0 {
		cfg.TimeoutNs = DefaultFetchTimeoutNs
	}
	if cfg.MaxBytes == 0 {
		cfg.MaxBytes = DefaultFetchMaxBytes
	}
	return &Fetch{cfg: cfg}
}

// Active reports whether a transfer is under way.
func (f *Fetch) Active() bool { return f.active }

// Seq is the seq of the snapshot being fetched (0 until the first chunk).
func (f *Fetch) Seq() uint64 { return f.seq }

// Offset is how many bytes have been accepted.
func (f *Fetch) Offset() uint64 { return f.offset }

// Total is the snapshot's size (0 until the first chunk).
func (f *Fetch) Total() uint64 { return f.total }

// Stats returns the counters.
func (f *Fetch) Stats() FetchStats { return f.stats }

// Start begins (or restarts) a transfer of the latest snapshot and returns
// the request to send. It is idempotent while active: it returns the
// request for the current offset.
func (f *Fetch) Start(nowNs int64) wire.SnapshotRequest { return f.StartAfter(0, nowNs) }

// StartAfter is Start for a standby that has applied up to applied: the
// requests from offset 0 carry it (wire.SnapshotRequest), so the primary
// sends a snapshot past it (cutting a fresh one if its latest is not), and
// a snapshot offered at or below it is refused at its first chunk
// (ErrSnapshotNotAhead).
func (f *Fetch) StartAfter(applied uint64, nowNs int64) wire.SnapshotRequest {
	if !f.active {
		*f = Fetch{cfg: f.cfg, stats: f.stats, active: true, after: applied}
	}
	return f.request(nowNs)
}

func (f *Fetch) request(nowNs int64) wire.SnapshotRequest {
	f.lastNs = nowNs
	f.stats.Requests++
	if f.offset == 0 {
		return wire.SnapshotRequest{SnapshotSeq: f.after}
	}
	return wire.SnapshotRequest{SnapshotSeq: f.seq, Offset: f.offset}
}

// Poll re-asks from the current offset when nothing arrived for TimeoutNs.
func (f *Fetch) Poll(nowNs int64) (wire.SnapshotRequest, bool) {
	if !f.active || nowNs-f.lastNs < f.cfg.TimeoutNs {
		return wire.SnapshotRequest{}, false
	}
	f.unanswered++
	if f.unanswered >= FetchRestartAfter {
		return f.Restart(nowNs), true
	}
	return f.request(nowNs), true
}

// Restart abandons the transfer in progress and asks from zero for
// whatever snapshot the server has: for a new primary (which may hold
// another snapshot, or none cached at this offset) or a server that
// stopped answering. The caller discards what it wrote.
func (f *Fetch) Restart(nowNs int64) wire.SnapshotRequest {
	f.stats.Restarts++
	*f = Fetch{cfg: f.cfg, stats: f.stats, active: true, after: f.after}
	return f.request(nowNs)
}

// OnChunk accepts c if it is the next chunk of the snapshot being fetched.
// It returns the data to write at c.Offset (nil when the chunk is ignored),
// and done when the snapshot is complete and verified. On a checksum
// failure the transfer restarts from zero and err is ErrSnapshotChecksum;
// the caller discards what it wrote.
func (f *Fetch) OnChunk(c *wire.SnapshotChunk, nowNs int64) (data []byte, done bool, err error) {
	if !f.active {
		return nil, false, nil
	}
	if c.Total > f.cfg.MaxBytes {
		f.active = false
		return nil, false, fmt.Errorf("%w: %d bytes", ErrSnapshotTooLarge, c.Total)
	}
	if f.total != 0 && (c.SnapshotSeq != f.seq || c.Total != f.total || c.Checksum != f.checksum) {
		// The primary moved on to another snapshot: start over with it.
		if c.Offset != 0 {
			f.stats.OutOfOrder++
			return nil, false, nil
		}
		f.stats.Restarts++
		f.total = 0
	}
	if f.total == 0 {
		if c.Offset != 0 {
			f.stats.OutOfOrder++
			return nil, false, nil
		}
		if f.after > 0 && c.SnapshotSeq <= f.after {
			f.active = false
			f.stats.NotAhead++
			return nil, false, fmt.Errorf("%w: snapshot %d, applied %d", ErrSnapshotNotAhead, c.SnapshotSeq, f.after)
		}
		f.seq, f.total, f.checksum, f.offset, f.crc = c.SnapshotSeq, c.Total, c.Checksum, 0, 0
	}
	if c.Offset != f.offset {
		f.stats.OutOfOrder++
		return nil, false, nil
	}
	f.stats.Chunks++
	f.lastNs = nowNs
	f.unanswered = 0
	f.offset += uint64(len(c.Data))
	f.crc = crc32.Update(f.crc, castagnoli, c.Data)
	if f.offset < f.total {
		return c.Data, false, nil
	}
	if f.crc != f.checksum {
		err := fmt.Errorf("%w: got %#08x want %#08x", ErrSnapshotChecksum, f.crc, f.checksum)
		f.stats.ChecksumFailures++
		f.total, f.offset, f.crc, f.seq = 0, 0, 0, 0
		return nil, false, err
	}
	f.active = false
	f.stats.Completed++
	return c.Data, true, nil
}

// NeedsRequest reports whether the runtime should ask for more right after
// accepting a chunk: the primary sends a bounded burst per request, so the
// standby asks again when the burst has been consumed. burst is how many
// chunks the primary sends per request.
func (f *Fetch) NeedsRequest(burst uint64, chunkBytes int, nowNs int64) (wire.SnapshotRequest, bool) {
	if !f.active || f.total == 0 || chunkBytes <= 0 {
		return wire.SnapshotRequest{}, false
	}
	if (f.offset/uint64(chunkBytes))%burst != 0 {
		return wire.SnapshotRequest{}, false
	}
	return f.request(nowNs), true
}
