package client

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"math"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/seqbus/seqbus/bus"
	"github.com/seqbus/seqbus/engine"
	"github.com/seqbus/seqbus/internal/syncbuf"
	"github.com/seqbus/seqbus/wire"
)

// outputFrame builds an OUTPUT frame from node at epoch whose first output
// is at seq.
func outputFrame(t testing.TB, node uint32, epoch, seq uint64, outs ...engine.Output) []byte {
	t.Helper()
	b := wire.NewBatch(0)
	b.Reset(wire.TypeOutput, wire.Origin{Stream: 1, Node: node, Epoch: epoch}, seq)
	for i := range outs {
		if !b.Add(engine.AppendOutput(nil, &outs[i])) {
			t.Fatal("frame full")
		}
	}
	return append([]byte(nil), b.Bytes()...)
}

func memClient(t testing.TB, opts Options) *Client {
	t.Helper()
	mem := bus.NewMemNetwork(1, bus.Faults{})
	conn, err := mem.Listen(netip.MustParseAddrPort("10.0.0.9:5000"), nil)
	if err != nil {
		t.Fatal(err)
	}
	opts.Conn = conn
	opts.Primary = netip.MustParseAddrPort("10.0.0.1:7000")
	cl, err := Dial(opts)
	if err != nil {
		t.Fatal(err)
	}
	return cl
}

// closeAndRead closes the client and its recorder and reads back the
// record file at path.
func closeAndRead(t *testing.T, cl *Client, rec *Recorder, path string) []RecordLine {
	t.Helper()
	cl.Close()
	if err := rec.Close(); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var lines []RecordLine
	if err := ReadRecord(f, func(l RecordLine) error { lines = append(lines, l); return nil }); err != nil {
		t.Fatal(err)
	}
	return lines
}

func TestRecorderWritesOneLinePerOutput(t *testing.T) {
	path := filepath.Join(t.TempDir(), "rec.jsonl")
	rec, err := CreateRecorder(path)
	if err != nil {
		t.Fatal(err)
	}
	var results []Result
	cl := memClient(t, Options{Core: Config{Session: 7}, Recorder: rec, OnResult: func(r Result) { results = append(results, r) }})
	for range 2 {
		if _, err := cl.Submit(&order); err != nil {
			t.Fatal(err)
		}
	}
	ack1 := engine.Output{Kind: engine.KindAck, ClientOrderID: 1, OrderID: 100, Side: engine.Buy, Type: engine.Limit, Price: 10, Qty: 1}
	exec := engine.Output{Kind: engine.KindExecution, ClientOrderID: 1, OrderID: 100, ContraOrderID: 9, TradeID: 5, Side: engine.Buy, Price: 10, Qty: 1}
	dup := engine.Output{Kind: engine.KindDuplicate, Original: engine.KindAck, ClientOrderID: 2, OrderID: 101, Side: engine.Buy, Type: engine.Limit, Price: 10, Qty: 1}
	again := ack1 // a second answer to 1: not an answer any more
	f1 := outputFrame(t, 2, 3, 40, ack1, exec)
	f2 := outputFrame(t, 2, 3, 41, dup, again)
	cl.onBatch([][]byte{f1, f2}, []int{len(f1), len(f2)}, nil)
	lines := closeAndRead(t, cl, rec, path)
	want := []struct {
		seq          uint64
		index        int
		coid         uint64
		kind, result string
		answer       bool
		out          engine.Output
	}{
		{40, 0, 1, "ack", "ack", true, ack1},
		{40, 1, 1, "execution", "", false, exec},
		{41, 0, 2, "duplicate", "ack", true, dup},
		{41, 1, 1, "ack", "ack", false, again},
	}
	if len(lines) != len(want) {
		t.Fatalf("%d lines, want %d: %+v", len(lines), len(want), lines)
	}
	for i, w := range want {
		l := lines[i]
		if l.Node != 2 || l.Epoch != 3 || l.Session != 7 || l.Seq != w.seq || l.Index != w.index || l.ClientOrderID != w.coid ||
			l.Kind != w.kind || l.Result != w.result || l.Answer != w.answer || l.WallNs == 0 || l.MonoNs == 0 {
			t.Errorf("line %d: %+v, want %+v", i, l, w)
		}
		if l.Payload != hex.EncodeToString(engine.AppendOutput(nil, &w.out)) {
			t.Errorf("line %d: payload %s", i, l.Payload)
		}
	}
	if len(results) != 2 || results[0].Epoch != 3 || results[0].Seq != 40 || results[1].Seq != 41 {
		t.Fatalf("results %+v: want epoch 3, seqs 40 and 41", results)
	}
}

// blockingWriter blocks every Write until release is closed; entered is
// closed when the first Write begins.
type blockingWriter struct {
	release, entered chan struct{}
	once             sync.Once
	mu               sync.Mutex
	buf              bytes.Buffer
	closed           bool
}

func (w *blockingWriter) Write(p []byte) (int, error) {
	w.once.Do(func() { close(w.entered) })
	<-w.release
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.Write(p)
}

func (w *blockingWriter) Close() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.closed = true
	return nil
}

func TestRecorderCountsDropsWhenTheWriterIsBlocked(t *testing.T) {
	w := &blockingWriter{release: make(chan struct{}), entered: make(chan struct{})}
	const queue = 4
	rec := NewRecorder(w, queue)
	f := wire.Frame{Header: wire.Header{Node: 1, Epoch: 1, Seq: 1}}
	o := engine.Output{Kind: engine.KindAck, ClientOrderID: 1}
	p := engine.AppendOutput(nil, &o)
	// One output: the writer takes it, finds the queue empty, flushes,
	// and blocks in the file's Write.
	rec.add(&f, 0, 1, &o, p, true, false)
	select {
	case <-w.entered:
	case <-time.After(10 * time.Second):
		t.Fatal("the writer never wrote")
	}
	const n = 100
	done := make(chan struct{})
	go func() {
		defer close(done)
		for range n {
			rec.add(&f, 0, 1, &o, p, true, false)
		}
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("add blocked behind a blocked writer")
	}
	if d := rec.Dropped(); d != n-queue {
		t.Fatalf("dropped %d of %d with a queue of %d behind a blocked writer, want %d", d, n, queue, n-queue)
	}
	close(w.release)
	err := rec.Close()
	if err == nil || !strings.Contains(err.Error(), "dropped") {
		t.Fatalf("Close: %v, want the drops reported", err)
	}
	lines := strings.Count(w.buf.String(), "\n")
	if lines != 1+queue || rec.Written() != 1+queue {
		t.Fatalf("%d lines, written %d: want the first and the %d queued", lines, rec.Written(), queue)
	}
	if !w.closed {
		t.Fatal("the writer was not closed")
	}
}

func TestRecorderFlushesOnClose(t *testing.T) {
	w := &syncbuf.Buffer{}
	rec := NewRecorder(w, 1024)
	f := wire.Frame{Header: wire.Header{Node: 1, Epoch: 1, Seq: 1}}
	o := engine.Output{Kind: engine.KindAck, ClientOrderID: 1}
	p := engine.AppendOutput(nil, &o)
	for range 500 {
		rec.add(&f, 0, 1, &o, p, true, false)
	}
	if err := rec.Close(); err != nil {
		t.Fatal(err)
	}
	if got := strings.Count(w.String(), "\n"); got != 500 {
		t.Fatalf("%d lines after Close, want 500", got)
	}
}

// The receive path's part of recording allocates nothing, queued or
// dropped.
func TestRecorderAddAllocatesNothing(t *testing.T) {
	rec := NewRecorder(io.Discard, 8)
	defer rec.Close()
	f := wire.Frame{Header: wire.Header{Node: 1, Epoch: 1, Seq: 1}}
	o := engine.Output{Kind: engine.KindAck, ClientOrderID: 1}
	p := engine.AppendOutput(nil, &o)
	if n := testing.AllocsPerRun(1000, func() { rec.add(&f, 0, 1, &o, p, true, false) }); n != 0 {
		t.Fatalf("%v allocations per add", n)
	}
}

// An output that arrives after Close is a counted drop, not a panic.
func TestRecorderAddAfterClose(t *testing.T) {
	rec := NewRecorder(io.Discard, 8)
	if err := rec.Close(); err != nil {
		t.Fatal(err)
	}
	f := wire.Frame{Header: wire.Header{Node: 1, Epoch: 1, Seq: 1}}
	o := engine.Output{Kind: engine.KindAck, ClientOrderID: 1}
	rec.add(&f, 0, 1, &o, engine.AppendOutput(nil, &o), true, false)
	if rec.Dropped() != 1 {
		t.Fatalf("dropped %d, want 1", rec.Dropped())
	}
}

// recordLineOf is what appendRecordLine encoded before it was hand
// written: json.Marshal of the RecordLine; the two must agree byte for byte.
func recordLineOf(e *recEntry) []byte {
	l := RecordLine{WallNs: e.wallNs, MonoNs: e.monoNs, Node: e.node, Epoch: e.epoch, Seq: e.seq, Index: e.index,
		Session: e.session, ClientOrderID: e.coid, Kind: KindName(e.kind), Answer: e.answer,
		Payload: hex.EncodeToString(e.payload[:e.n])}
	switch e.kind {
	case engine.KindAck, engine.KindReject, engine.KindCancelled:
		l.Result = l.Kind
	case engine.KindDuplicate:
		l.Result = KindName(e.orig)
	}
	b, _ := json.Marshal(&l)
	return append(b, '\n')
}

func TestRecordLineIsTheJSONOfRecordLine(t *testing.T) {
	kinds := []engine.OutputKind{engine.KindAck, engine.KindReject, engine.KindExecution, engine.KindCancelled,
		engine.KindMarketData, engine.KindDuplicate, 0, 200}
	for i, k := range kinds {
		for _, answer := range []bool{false, true} {
			e := recEntry{wallNs: -int64(i) * 1e18, monoNs: math.MaxInt64 - int64(i), node: math.MaxUint32, epoch: uint64(i),
				seq: math.MaxUint64, index: -i, session: 77, coid: uint64(i) << 40, kind: k, orig: kinds[(i+2)%len(kinds)], answer: answer}
			for j := range i * 7 {
				e.payload[j] = byte(j * 37)
			}
			e.n = uint8(i * 7)
			if i == len(kinds)-1 {
				e.n = engine.MaxOutputLen
			}
			got, want := appendRecordLine(nil, &e), recordLineOf(&e)
			if string(got) != string(want) {
				t.Fatalf("kind %d answer %v:\n got %s\nwant %s", k, answer, got, want)
			}
			var l RecordLine
			if err := json.Unmarshal(got, &l); err != nil || l.Kind != KindName(k) {
				t.Fatalf("line does not read back: %v %+v", err, l)
			}
		}
	}
}

// The recorder's writer encodes one line per output a recording client
// receives: in steady state that must not allocate (it did: reflection, a
// hex string and the marshalled copy, ~5 objects per output).
func TestRecordLineAllocatesNothing(t *testing.T) {
	e := recEntry{wallNs: 1, monoNs: 2, node: 1, epoch: 3, seq: 4, session: 5, coid: 6, kind: engine.KindDuplicate,
		orig: engine.KindAck, answer: true, n: 32}
	buf := make([]byte, 0, 512)
	if n := testing.AllocsPerRun(1000, func() { buf = appendRecordLine(buf[:0], &e) }); n != 0 {
		t.Fatalf("appendRecordLine: %v allocations per line, want 0", n)
	}
}

// A record line's index is an output's place in its frame: a negative
// or absurd one is an error naming the line (verify indexed with it and
// panicked), and a line too long for the reader names its line too.
func TestReadRecordRefusesBadIndex(t *testing.T) {
	ok := `{"seq":1,"index":3,"session":1}`
	for _, idx := range []string{"-1", "-100000", "9223372036854775807", "65508"} {
		in := ok + "\n" + `{"seq":2,"index":` + idx + `,"session":1}` + "\n"
		err := ReadRecord(strings.NewReader(in), func(RecordLine) error { return nil })
		if err == nil || !strings.Contains(err.Error(), "line 2: index "+idx) {
			t.Errorf("index %s: %v", idx, err)
		}
	}
	long := ok + "\n" + strings.Repeat("x", 2<<20) + "\n"
	if err := ReadRecord(strings.NewReader(long), func(RecordLine) error { return nil }); err == nil || !strings.Contains(err.Error(), "line 2:") {
		t.Errorf("a 2 MB line: %v", err)
	}
	if err := ReadRecord(strings.NewReader(ok+"\n"), func(RecordLine) error { return nil }); err != nil {
		t.Errorf("a good line: %v", err)
	}
}

// A client killed while writing its record leaves the last line torn, with
// no newline: the lines before it are read and the tear is ErrTornTail
// naming the line; a bad line that ends in a newline, or is followed by
// more, stays an error.
func TestReadRecordTornTail(t *testing.T) {
	ok := `{"seq":1,"index":3,"session":1}`
	n := 0
	err := ReadRecord(strings.NewReader(ok+"\n"+ok+"\n"+`{"seq":3,"ind`), func(RecordLine) error { n++; return nil })
	if !errors.Is(err, ErrTornTail) || !strings.Contains(err.Error(), "line 3") || n != 2 {
		t.Fatalf("torn tail: %v after %d lines, want ErrTornTail on line 3 after 2", err, n)
	}
	for _, in := range []string{ok + "\n" + `{"seq":3,"ind` + "\n", `{"seq":3,"ind` + "\n" + ok} {
		if err := ReadRecord(strings.NewReader(in), func(RecordLine) error { return nil }); err == nil || errors.Is(err, ErrTornTail) {
			t.Errorf("%q: %v, want an error that is not a torn tail", in, err)
		}
	}
	if err := ReadRecord(strings.NewReader(ok), func(RecordLine) error { return nil }); err != nil {
		t.Errorf("a good last line without a newline: %v", err)
	}
}
