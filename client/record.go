package client

import (
	"bufio"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/seqbus/seqbus/engine"
	"github.com/seqbus/seqbus/internal/monotime"
	"github.com/seqbus/seqbus/wire"
)

// DefaultRecordQueue is how many received outputs a Recorder holds for its
// writer: about a second of answers at 64k/s. When the writer falls
// further behind, outputs are dropped (and counted), never waited for.
const DefaultRecordQueue = 1 << 16

// RecordLine is one line of a client record file (seqbus client --record):
// one output the client received, in the order received.
type RecordLine struct {
	// WallNs is the wall clock (Unix ns) and MonoNs CLOCK_MONOTONIC when
	// the receive loop decoded it.
	WallNs int64 `json:"wall_ns"`
	MonoNs int64 `json:"mono_ns"`
	// Node and Epoch are the sender of the OUTPUT frame; Seq is the frame's
	// seq, the seq of its first output, and Index the output's place in
	// the frame (outputs of one frame are consecutive outputs of the
	// session, in seq order: the output's own seq is Seq or later, and
	// seqbus verify resolves it by replaying the journal).
	Node    uint32 `json:"node"`
	Epoch   uint64 `json:"epoch"`
	Seq     uint64 `json:"seq"`
	Index   int    `json:"index"`
	Session uint64 `json:"session"`
	// ClientOrderID is the output's (for an execution: the recipient's
	// order).
	ClientOrderID uint64 `json:"client_order_id"`
	// Kind is the output's kind (ack, reject, cancelled, execution,
	// duplicate, ...); Result, for an answer, the result it stands for
	// (a duplicate's original kind), "" otherwise.
	Kind   string `json:"kind"`
	Result string `json:"result,omitempty"`
	// Answer says the output answered a command in flight (the first
	// answer to it); a second answer after a resend is not one.
	Answer bool `json:"answer"`
	// Payload is the output's exact bytes, hex.
	Payload string `json:"payload"`
	// OutSeq is the output's seq in its session's history (0: market data
	// or an unnumbered reject); Replay says it came in a replay frame
	// (wire.FlagReplay); Dropped says the client did not deliver it to the
	// application (a repeat of one delivered, or one beyond a gap, which
	// the replay then delivers): the record holds every output received.
	OutSeq  uint64 `json:"out_seq,omitempty"`
	Replay  bool   `json:"replay,omitempty"`
	Dropped bool   `json:"dropped,omitempty"`
}

// KindName names an output kind as record files and seqbus verify do.
func KindName(k engine.OutputKind) string {
	switch k {
	case engine.KindAck:
		return "ack"
	case engine.KindReject:
		return "reject"
	case engine.KindExecution:
		return "execution"
	case engine.KindCancelled:
		return "cancelled"
	case engine.KindMarketData:
		return "market_data"
	case engine.KindDuplicate:
		return "duplicate"
	}
	return "kind_" + strconv.Itoa(int(k))
}

type recEntry struct {
	wallNs, monoNs int64
	node           uint32
	epoch, seq     uint64
	index          int
	session        uint64
	coid           uint64
	kind, orig     engine.OutputKind
	answer, replay bool
	dropped        bool
	outSeq         uint64
	n              uint8
	payload        [engine.MaxOutputLen]byte
}

// Recorder writes every output a client receives to a file, one JSON line
// each, from its own goroutine: the receive loop only copies the output
// into a bounded queue (no allocation, no wait), and counts a drop when the
// queue is full. Close drains the queue, flushes and syncs the file.
type Recorder struct {
	ch      chan recEntry
	w       *bufio.Writer
	out     io.Writer
	done    chan struct{}
	dropped atomic.Uint64
	written atomic.Uint64
	// mu orders add against Close: an add after Close counts a drop
	// instead of sending on the closed queue.
	mu     sync.RWMutex
	closed bool
	once   sync.Once
	err    error // set by the writer before done closes
}

// CreateRecorder creates (truncates) path and starts a Recorder writing to
// it.
func CreateRecorder(path string) (*Recorder, error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	return NewRecorder(f, DefaultRecordQueue), nil
}

// NewRecorder starts a Recorder writing to w with a queue of queue outputs
// (<= 0: DefaultRecordQueue). If w is an io.Closer, Close closes it (and
// syncs it first when it is an *os.File).
func NewRecorder(w io.Writer, queue int) *Recorder {
	if queue <= 0 {
		queue = DefaultRecordQueue
	}
	r := &Recorder{ch: make(chan recEntry, queue), w: bufio.NewWriterSize(w, 64<<10), out: w, done: make(chan struct{})}
	go r.run()
	return r
}

// add queues one received output; it never blocks.
func (r *Recorder) add(f *wire.Frame, idx int, session uint64, o *engine.Output, payload []byte, answer, dropped bool) {
	e := recEntry{wallNs: time.Now().UnixNano(), monoNs: monotime.Now(), node: f.Node, epoch: f.Epoch, seq: f.Seq,
		index: idx, session: session, coid: o.ClientOrderID, kind: o.Kind, orig: o.Original, answer: answer,
		outSeq: o.OutSeq, replay: f.Flags&wire.FlagReplay != 0, dropped: dropped}
	e.n = uint8(copy(e.payload[:], payload))
	r.mu.RLock()
	defer r.mu.RUnlock()
	if r.closed {
		r.dropped.Add(1)
		return
	}
	select {
	case r.ch <- e:
	default:
		r.dropped.Add(1)
	}
}

// Dropped counts outputs not recorded because the writer was behind.
func (r *Recorder) Dropped() uint64 { return r.dropped.Load() }

// Written counts lines written.
func (r *Recorder) Written() uint64 { return r.written.Load() }

func (r *Recorder) run() {
	defer close(r.done)
	buf := make([]byte, 0, 512)
	for e := range r.ch {
		if r.err != nil {
			continue // keep draining so that add never blocks
		}
		buf = appendRecordLine(buf[:0], &e)
		if _, err := r.w.Write(buf); err != nil {
			r.err = err
			continue
		}
		r.written.Add(1)
		if len(r.ch) == 0 {
			// Idle: push what we have to the file, so that a kill -9 loses
			// at most what was in flight.
			if err := r.w.Flush(); err != nil {
				r.err = err
			}
		}
	}
}

// appendRecordLine appends e as the JSON line json.Marshal(RecordLine)
// would write (the same keys in the same order; ReadRecord reads it back
// with encoding/json), without allocating: the writer runs for every
// output a recording client receives, so reflection, a hex string and a
// marshalled copy per line were garbage per command in steady state.
// Every string it writes (kind names, hex) is plain ASCII that JSON does
// not escape.
func appendRecordLine(dst []byte, e *recEntry) []byte {
	dst = append(dst, `{"wall_ns":`...)
	dst = strconv.AppendInt(dst, e.wallNs, 10)
	dst = append(dst, `,"mono_ns":`...)
	dst = strconv.AppendInt(dst, e.monoNs, 10)
	dst = append(dst, `,"node":`...)
	dst = strconv.AppendUint(dst, uint64(e.node), 10)
	dst = append(dst, `,"epoch":`...)
	dst = strconv.AppendUint(dst, e.epoch, 10)
	dst = append(dst, `,"seq":`...)
	dst = strconv.AppendUint(dst, e.seq, 10)
	dst = append(dst, `,"index":`...)
	dst = strconv.AppendInt(dst, int64(e.index), 10)
	dst = append(dst, `,"session":`...)
	dst = strconv.AppendUint(dst, e.session, 10)
	dst = append(dst, `,"client_order_id":`...)
	dst = strconv.AppendUint(dst, e.coid, 10)
	dst = append(dst, `,"kind":"`...)
	dst = appendKindName(dst, e.kind)
	dst = append(dst, '"')
	switch e.kind {
	case engine.KindAck, engine.KindReject, engine.KindCancelled:
		dst = append(dst, `,"result":"`...)
		dst = appendKindName(dst, e.kind)
		dst = append(dst, '"')
	case engine.KindDuplicate:
		dst = append(dst, `,"result":"`...)
		dst = appendKindName(dst, e.orig)
		dst = append(dst, '"')
	}
	dst = append(dst, `,"answer":`...)
	dst = strconv.AppendBool(dst, e.answer)
	dst = append(dst, `,"payload":"`...)
	dst = hex.AppendEncode(dst, e.payload[:e.n])
	dst = append(dst, '"')
	if e.outSeq != 0 {
		dst = append(dst, `,"out_seq":`...)
		dst = strconv.AppendUint(dst, e.outSeq, 10)
	}
	if e.replay {
		dst = append(dst, `,"replay":true`...)
	}
	if e.dropped {
		dst = append(dst, `,"dropped":true`...)
	}
	return append(dst, "}\n"...)
}

// appendKindName appends KindName(k) without building the string.
func appendKindName(dst []byte, k engine.OutputKind) []byte {
	switch k {
	case engine.KindAck, engine.KindReject, engine.KindExecution, engine.KindCancelled, engine.KindMarketData, engine.KindDuplicate:
		return append(dst, KindName(k)...)
	}
	return strconv.AppendInt(append(dst, "kind_"...), int64(k), 10)
}

// Close stops the recorder after writing everything queued, flushes and
// syncs the file. Call it after the client is closed: an output received
// after Close is counted as dropped.
// It reports a write error and, as an error too, outputs dropped.
func (r *Recorder) Close() error {
	r.once.Do(func() {
		r.mu.Lock()
		r.closed = true
		close(r.ch)
		r.mu.Unlock()
		<-r.done
		err := r.err
		if err == nil {
			err = r.w.Flush()
		}
		if f, ok := r.out.(*os.File); ok {
			if serr := f.Sync(); err == nil && serr != nil && !errors.Is(serr, os.ErrInvalid) {
				err = serr
			}
		}
		if c, ok := r.out.(io.Closer); ok {
			if cerr := c.Close(); err == nil {
				err = cerr
			}
		}
		if err == nil && r.dropped.Load() > 0 {
			err = fmt.Errorf("client record: %d outputs dropped (the writer fell behind)", r.dropped.Load())
		}
		r.err = err
	})
	return r.err
}

// ErrTornTail: the record's last line has no newline and does not parse:
// the client was killed while writing it. ReadRecord returns it (wrapped,
// naming the line) after every line before it was read; what that line
// held is not in the record.
var ErrTornTail = errors.New("the last line is torn (the client stopped while writing it)")

// ReadRecord reads a record file, calling fn for every line in order. A
// line that does not parse is an error naming its line number; the last
// one, unterminated, is ErrTornTail.
func ReadRecord(rd io.Reader, fn func(RecordLine) error) error {
	sc := bufio.NewScanner(rd)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	unterminated := false // the token just scanned ended the input without a newline
	sc.Split(func(data []byte, atEOF bool) (int, []byte, error) {
		adv, tok, err := bufio.ScanLines(data, atEOF)
		unterminated = tok != nil && atEOF && adv == len(data) && (adv == 0 || data[adv-1] != '\n')
		return adv, tok, err
	})
	n := 0
	for sc.Scan() {
		n++
		if len(sc.Bytes()) == 0 {
			continue
		}
		var l RecordLine
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil && unterminated {
			return fmt.Errorf("line %d: %w", n, ErrTornTail)
		} else if err != nil {
			return fmt.Errorf("line %d: %v", n, err)
		}
		if l.Index < 0 || l.Index > RecordIndexMax {
			return fmt.Errorf("line %d: index %d not in 0..%d (an output's place in its frame)", n, l.Index, RecordIndexMax)
		}
		if err := fn(l); err != nil {
			return err
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("line %d: %w", n+1, err)
	}
	return nil
}

// RecordIndexMax bounds a record line's Index: a frame is one datagram
// (at most 65,507 bytes), and every output in it takes more than a byte.
const RecordIndexMax = 65_507
