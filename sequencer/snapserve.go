package sequencer

import (
	"hash/crc32"

	"github.com/seqbus/seqbus/wire"
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// SnapshotServerConfig configures a SnapshotServer.
type SnapshotServerConfig struct {
	// Every is the interval of the periodic snapshots: the one held is
	// stale, and a fetch from offset 0 is answered by a fresh one, when it
	// is more than Every/2 seqs behind the applied seq.
	Every uint64
	// ChunkBytes is the data of one chunk (wire.MaxSnapshotData of the
	// datagram); Burst the chunks sent per request at most.
	ChunkBytes, Burst int
	// Budget bounds the chunks per standby (nil: NewSnapshotBudget(0, 0)).
	Budget *SnapshotBudget
}

// SnapshotAnswer is what a SNAPSHOT_REQUEST calls for (Answer).
type SnapshotAnswer uint8

const (
	// SnapshotServe: Begin the chunks of the snapshot held.
	SnapshotServe SnapshotAnswer = iota
	// SnapshotNotBehind: nothing; the standby has applied all we have.
	SnapshotNotBehind
	// SnapshotCutFirst: cut a snapshot at the applied seq, Hold it (the
	// one held is not past the standby, is stale, or there is none), then
	// Begin.
	SnapshotCutFirst
)

// ChunkStatus is what Next produced.
type ChunkStatus uint8

const (
	// ChunkReady: send the frame Next returned; more may follow (Serving).
	ChunkReady ChunkStatus = iota
	// ChunkDone: no burst under way, nothing to send.
	ChunkDone
	// ChunkRefused: the standby's budget for this snapshot is spent; the
	// burst ends. ChunkRefusedFirst is the first refusal of this snapshot
	// to this standby (log it; count both).
	ChunkRefused
	ChunkRefusedFirst
	// ChunkFailed: the chunk did not encode (Next's error); the burst ends.
	ChunkFailed
)

// SnapshotServer is the primary's side of a snapshot fetch, as a pure
// core: the latest snapshot in memory (decompressed, with its CRC32C), so
// chunks are served from any offset without re-reading a file; the
// decision to cut a fresh one; and the bursts of SNAPSHOT_CHUNK frames
// within a SnapshotBudget per standby. No I/O, no clock (nowNs arrives as
// an argument), no goroutine; a served chunk allocates nothing (it is
// encoded into the caller's buffer).
//
// Per SNAPSHOT_REQUEST the runtime calls Answer; on SnapshotCutFirst it
// encodes its state and calls Hold; then Begin, and while Serving, Next,
// sending each ChunkReady frame.
type SnapshotServer struct {
	cfg    SnapshotServerConfig
	budget *SnapshotBudget
	// The snapshot held.
	held       bool
	seq, epoch uint64
	data       []byte
	// crc is data's checksum, computed at the first chunk served (crcOK):
	// most snapshots held are never served, and a runtime holds each one
	// on its agent.
	crc   uint32
	crcOK bool
	// The burst under way: to which standby, from which offset, how
	// many chunks it may still send.
	to     uint32
	offset uint64
	left   int
}

// NewSnapshotServer returns a server holding no snapshot.
func NewSnapshotServer(cfg SnapshotServerConfig) *SnapshotServer {
	if cfg.ChunkBytes <= 0 || cfg.Burst <= 0 {
		panic("sequencer: SnapshotServerConfig needs ChunkBytes and Burst")
	}
	s := &SnapshotServer{cfg: cfg, budget: cfg.Budget}
	if s.budget == nil {
		s.budget = NewSnapshotBudget(0, 0)
	}
	return s
}

// Hold makes the snapshot at seq (taken under epoch; data is its state,
// not modified afterwards) the one served, unless one at or past seq is
// held already (a snapshot written late does not replace a newer one cut
// on demand).
func (s *SnapshotServer) Hold(seq, epoch uint64, data []byte) {
	if s.held && s.seq >= seq {
		return
	}
	s.held, s.seq, s.epoch, s.data = true, seq, epoch, data
	s.crc, s.crcOK = 0, false
	s.left = 0
}

// Drop forgets the snapshot held (its history was cut).
func (s *SnapshotServer) Drop() {
	*s = SnapshotServer{cfg: s.cfg, budget: s.budget}
}

// Latest is the seq of the snapshot held.
func (s *SnapshotServer) Latest() (seq uint64, ok bool) { return s.seq, s.held }

// Chunks is how many chunks the snapshot held is long.
func (s *SnapshotServer) Chunks() uint64 {
	chunkBytes := uint64(s.cfg.ChunkBytes)
	return (uint64(len(s.data)) + chunkBytes - 1) / chunkBytes
}

// Served is how many chunks of its current snapshot node was sent in the
// budget's window.
func (s *SnapshotServer) Served(node uint32) uint64 { return s.budget.Served(node) }

// Answer says what req calls for, the node having applied appliedSeq. A
// request from offset 0 carries the seq the standby has applied: it gets
// a snapshot past it, a fresh one when the one held is not past it or is
// more than Every/2 behind, and nothing when we are not ahead of it. A
// request from another offset resumes the snapshot held.
func (s *SnapshotServer) Answer(req *wire.SnapshotRequest, appliedSeq uint64) SnapshotAnswer {
	if req.Offset != 0 {
		return SnapshotServe
	}
	after := req.SnapshotSeq
	if appliedSeq <= after {
		return SnapshotNotBehind
	}
	if !s.held || s.seq <= after || appliedSeq-s.seq > s.cfg.Every/2 {
		return SnapshotCutFirst
	}
	return SnapshotServe
}

// Begin starts the burst answering req from standby node: from req's
// offset of the snapshot held, or from 0 when req names another snapshot
// or an offset past its end (the standby restarts). It reports whether
// a snapshot is held.
func (s *SnapshotServer) Begin(req *wire.SnapshotRequest, node uint32) bool {
	s.left = 0
	if !s.held {
		return false
	}
	s.to, s.offset, s.left = node, req.Offset, s.cfg.Burst
	if req.SnapshotSeq != s.seq || s.offset > uint64(len(s.data)) {
		s.offset = 0
	}
	return true
}

// Serving reports whether the burst may send another chunk.
func (s *SnapshotServer) Serving() bool { return s.left > 0 }

// Next asks the budget for the burst's next chunk at nowNs and, allowed,
// encodes it (under origin) onto buf, returning the frame. The burst ends
// after the snapshot's last byte, after Burst chunks, or at the first
// refusal.
func (s *SnapshotServer) Next(origin wire.Origin, nowNs int64, buf []byte) ([]byte, ChunkStatus, error) {
	if s.left <= 0 {
		return buf, ChunkDone, nil
	}
	if ok, first := s.budget.Allow(s.to, s.seq, s.Chunks(), nowNs); !ok {
		s.left = 0
		if first {
			return buf, ChunkRefusedFirst, nil
		}
		return buf, ChunkRefused, nil
	}
	if !s.crcOK {
		s.crc, s.crcOK = crc32.Checksum(s.data, castagnoli), true
	}
	total := uint64(len(s.data))
	end := min(s.offset+uint64(s.cfg.ChunkBytes), total)
	ch := wire.SnapshotChunk{Origin: origin, SnapshotSeq: s.seq, Total: total, Offset: s.offset, Checksum: s.crc, Data: s.data[s.offset:end]}
	frame, err := ch.Append(buf)
	if err != nil {
		s.left = 0
		return buf, ChunkFailed, err
	}
	s.offset = end
	s.left--
	if s.offset >= total {
		s.left = 0
	}
	return frame, ChunkReady, nil
}
