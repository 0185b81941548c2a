// Package stagetrace records per-command stage times inside each seqbus
// process of a benchmark and merges them afterwards.
//
// Every process of a run (the load client, the primary, each standby)
// keeps a Recorder: a few preallocated int64 columns indexed by client
// order id (the client) or by seq (the nodes). Recording is an index
// store: no lock, no allocation, no syscall; the clock is
// internal/monotime (CLOCK_MONOTONIC), the same in every process on a
// host, so times from different processes subtract. At exit each process
// writes its columns and a header (role, pid, mallocs, syscalls) to one
// file; Merge joins the files by client order id and seq into one HDR
// histogram per stage.
//
// File format (little-endian):
//
//	magic    [8]byte "SQBTRACE"
//	version  uint32 (4)
//	role     uint16 length + bytes ("client", "primary", "standby")
//	id       uint32 (node id, or the client's session)
//	pid      uint32
//	mallocs  uint64 (runtime.MemStats.Mallocs over the process's life since tracing began)
//	syscalls uint64 (send and receive calls that moved data, from the bus counters)
//	commands uint64 (commands the process handled over the run)
//	gomaxprocs uint32 (the process's runtime.GOMAXPROCS)
//	window   uint8 (1: the measured window closed), from uint64, to uint64
//	         (client order ids), mallocs uint64, syscalls uint64, cpu ns
//	         uint64 (over the window only: see Window)
//	columns  uint32, rows uint32
//	per column: name uint16 length + bytes, then rows int64 values
//
// A zero value means "not recorded". Row i of every column is index i
// (client order id or seq); row 0 is unused.
package stagetrace

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
)

// Column names. Client columns are indexed by client order id, node
// columns by seq.
const (
	ColIntended = "intended" // client: when the command was meant to leave
	ColSent     = "sent"     // client: when it left
	ColReceived = "received" // client: when its answer arrived

	ColSequenced = "sequenced" // primary: sequenced, journaled and applied
	ColSession   = "session"   // primary: the command's session (a value, not a time)
	ColOrderID   = "order_id"  // primary: the command's client order id (a value)
	ColAcked     = "acked"     // primary: the standby acks the gate needs covered it
	ColDurable   = "durable"   // primary: durable in its journal
	ColReleased  = "released"  // primary: released through the gate

	ColApplied = "applied" // standby: journaled and applied
)

// Roles.
const (
	RoleClient  = "client"
	RolePrimary = "primary"
	RoleStandby = "standby"
)

// Limits.
const (
	// RowsMax bounds a recorder (and a file read back): 2^26 rows of a
	// handful of int64 columns is ~2 GB at most; a bench run is 10^5..10^7.
	RowsMax = 1 << 26
	// ColumnsMax bounds the columns of a file read back.
	ColumnsMax = 16
	nameMax    = 64
	version    = 4
)

var magic = [8]byte{'S', 'Q', 'B', 'T', 'R', 'A', 'C', 'E'}

// Errors.
var (
	ErrFormat = errors.New("stagetrace: not a trace file")
	ErrLimit  = errors.New("stagetrace: over a limit")
)

// Header is what a process says about itself.
type Header struct {
	Role     string
	ID       uint32
	Pid      uint32
	Mallocs  uint64
	Syscalls uint64
	Commands uint64
	// GOMAXPROCS is the process's (a pinned process gets one P per CPU
	// it may run on).
	GOMAXPROCS uint32
	// The measured window (Window): client order ids WindowFrom..
	// WindowTo, and the allocations and socket calls between the
	// process's first handling of a measured command and its last.
	// WindowClosed is false when the window never closed (the others
	// are then zero).
	WindowClosed                  bool
	WindowFrom, WindowTo          uint64
	WindowMallocs, WindowSyscalls uint64
	// WindowCPUNs is the process's CPU time (user + system, every
	// thread) over the window.
	WindowCPUNs uint64
}

// Recorder holds preallocated columns. Set and Stamp never allocate; they
// are not safe for concurrent use (each process records from one lock or
// one goroutine: the node's lock, the client's result callback).
type Recorder struct {
	names   []string
	cols    [][]int64
	cursors []uint64 // per column, for Stamp
	maxRow  uint64   // highest row written
}

// NewRecorder allocates rows (1..RowsMax) for each named column.
func NewRecorder(rows int, names ...string) (*Recorder, error) {
	if rows < 1 || rows > RowsMax {
		return nil, fmt.Errorf("%w: %d rows (1..%d)", ErrLimit, rows, RowsMax)
	}
	if len(names) == 0 || len(names) > ColumnsMax {
		return nil, fmt.Errorf("%w: %d columns (1..%d)", ErrLimit, len(names), ColumnsMax)
	}
	r := &Recorder{names: names, cols: make([][]int64, len(names)), cursors: make([]uint64, len(names))}
	for i := range r.cols {
		r.cols[i] = make([]int64, rows+1) // row 0 unused
		prefault(r.cols[i])
	}
	return r, nil
}

// prefault writes one word of every page of c, so the first touch of
// each page (a page fault, a few µs in a VM) is paid here, before the
// node starts, and not by the hot path that records into it.
func prefault(c []int64) {
	const wordsPerPage = 4096 / 8
	for j := 0; j < len(c); j += wordsPerPage {
		c[j] = 0
	}
}

// Column returns the index of a column name, for Set and Stamp, or -1.
func (r *Recorder) Column(name string) int {
	for i, n := range r.names {
		if n == name {
			return i
		}
	}
	return -1
}

// Rows is the recorder's capacity.
func (r *Recorder) Rows() int { return len(r.cols[0]) - 1 }

// Set records v at row in column col. Rows past the capacity (and row 0)
// are ignored: a run longer than asked records its first rows.
func (r *Recorder) Set(col int, row uint64, v int64) {
	c := r.cols[col]
	if row == 0 || row >= uint64(len(c)) {
		return
	}
	c[row] = v
	if row > r.maxRow {
		r.maxRow = row
	}
}

// Stamp records v at every row of col in (last stamped, upTo]: a
// watermark that rose to upTo at time v. The work is bounded by the
// capacity over the recorder's life (each row is stamped once).
func (r *Recorder) Stamp(col int, upTo uint64, v int64) {
	c := r.cols[col]
	upTo = min(upTo, uint64(len(c)-1))
	cur := r.cursors[col]
	for s := cur + 1; s <= upTo; s++ {
		c[s] = v
	}
	if upTo > cur {
		r.cursors[col] = upTo
		if upTo > r.maxRow {
			r.maxRow = upTo
		}
	}
}

// WriteFile writes the recorded rows (up to the highest written) with h.
func (r *Recorder) WriteFile(path string, h Header) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	w := bufio.NewWriterSize(f, 1<<20)
	if err := r.Write(w, h); err != nil {
		f.Close()
		return err
	}
	if err := w.Flush(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// Write writes the trace to w.
func (r *Recorder) Write(w io.Writer, h Header) error {
	if len(h.Role) > nameMax {
		return fmt.Errorf("%w: role %q", ErrLimit, h.Role)
	}
	rows := r.maxRow + 1
	var b []byte
	b = append(b, magic[:]...)
	b = binary.LittleEndian.AppendUint32(b, version)
	b = appendString(b, h.Role)
	b = binary.LittleEndian.AppendUint32(b, h.ID)
	b = binary.LittleEndian.AppendUint32(b, h.Pid)
	b = binary.LittleEndian.AppendUint64(b, h.Mallocs)
	b = binary.LittleEndian.AppendUint64(b, h.Syscalls)
	b = binary.LittleEndian.AppendUint64(b, h.Commands)
	b = binary.LittleEndian.AppendUint32(b, h.GOMAXPROCS)
	closed := byte(0)
	if h.WindowClosed {
		closed = 1
	}
	b = append(b, closed)
	for _, v := range []uint64{h.WindowFrom, h.WindowTo, h.WindowMallocs, h.WindowSyscalls, h.WindowCPUNs} {
		b = binary.LittleEndian.AppendUint64(b, v)
	}
	b = binary.LittleEndian.AppendUint32(b, uint32(len(r.cols)))
	b = binary.LittleEndian.AppendUint32(b, uint32(rows))
	if _, err := w.Write(b); err != nil {
		return err
	}
	buf := make([]byte, 0, 8*4096)
	for i, c := range r.cols {
		buf = appendString(buf[:0], r.names[i])
		for _, v := range c[:rows] {
			buf = binary.LittleEndian.AppendUint64(buf, uint64(v))
			if len(buf) >= cap(buf)-8 {
				if _, err := w.Write(buf); err != nil {
					return err
				}
				buf = buf[:0]
			}
		}
		if _, err := w.Write(buf); err != nil {
			return err
		}
	}
	return nil
}

func appendString(b []byte, s string) []byte {
	b = binary.LittleEndian.AppendUint16(b, uint16(len(s)))
	return append(b, s...)
}

// Trace is a file read back.
type Trace struct {
	Header
	Columns map[string][]int64
}

// Col returns a column, or nil when the file has none by that name.
func (t *Trace) Col(name string) []int64 { return t.Columns[name] }

// ReadFile reads a trace file.
func ReadFile(path string) (*Trace, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	t, err := Read(bufio.NewReaderSize(f, 1<<20))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return t, nil
}

// Read reads a trace; it treats its input as untrusted (bounded sizes, a
// clear error on anything malformed).
func Read(r io.Reader) (*Trace, error) {
	var m [8]byte
	if _, err := io.ReadFull(r, m[:]); err != nil || m != magic {
		return nil, ErrFormat
	}
	rd := reader{r: r}
	if v := rd.u32(); rd.err == nil && v != version {
		return nil, fmt.Errorf("%w: version %d", ErrFormat, v)
	}
	t := &Trace{Columns: map[string][]int64{}}
	t.Role = rd.str()
	t.ID = rd.u32()
	t.Pid = rd.u32()
	t.Mallocs = rd.u64()
	t.Syscalls = rd.u64()
	t.Commands = rd.u64()
	t.GOMAXPROCS = rd.u32()
	switch rd.u8() {
	case 0:
	case 1:
		t.WindowClosed = true
	default:
		if rd.err == nil {
			rd.err = fmt.Errorf("%w: window flag", ErrFormat)
		}
	}
	t.WindowFrom, t.WindowTo, t.WindowMallocs, t.WindowSyscalls, t.WindowCPUNs = rd.u64(), rd.u64(), rd.u64(), rd.u64(), rd.u64()
	ncols, rows := rd.u32(), rd.u32()
	if rd.err != nil {
		return nil, rd.err
	}
	if ncols > ColumnsMax || rows > RowsMax+1 {
		return nil, fmt.Errorf("%w: %d columns of %d rows", ErrLimit, ncols, rows)
	}
	for range ncols {
		name := rd.str()
		if rd.err != nil {
			return nil, rd.err
		}
		// The column grows as its rows arrive: a header's row count is a
		// claim, and a short file claiming 2^26 rows must not cost 512 MB.
		col := make([]int64, 0, min(int(rows), 4096))
		raw := make([]byte, 8*4096)
		for len(col) < int(rows) {
			n := min(int(rows)-len(col), 4096)
			if _, err := io.ReadFull(r, raw[:8*n]); err != nil {
				return nil, fmt.Errorf("%w: column %q truncated", ErrFormat, name)
			}
			for k := range n {
				col = append(col, int64(binary.LittleEndian.Uint64(raw[8*k:])))
			}
		}
		if _, dup := t.Columns[name]; dup {
			return nil, fmt.Errorf("%w: column %q twice", ErrFormat, name)
		}
		t.Columns[name] = col
	}
	return t, nil
}

type reader struct {
	r   io.Reader
	b   [8]byte
	err error
}

func (d *reader) fill(n int) []byte {
	if d.err != nil {
		return make([]byte, n)
	}
	if _, err := io.ReadFull(d.r, d.b[:n]); err != nil {
		d.err = fmt.Errorf("%w: truncated header", ErrFormat)
	}
	return d.b[:n]
}

func (d *reader) u8() uint8   { return d.fill(1)[0] }
func (d *reader) u16() uint16 { return binary.LittleEndian.Uint16(d.fill(2)) }
func (d *reader) u32() uint32 { return binary.LittleEndian.Uint32(d.fill(4)) }
func (d *reader) u64() uint64 { return binary.LittleEndian.Uint64(d.fill(8)) }

func (d *reader) str() string {
	n := d.u16()
	if d.err != nil {
		return ""
	}
	if n > nameMax {
		d.err = fmt.Errorf("%w: name of %d bytes", ErrFormat, n)
		return ""
	}
	b := make([]byte, n)
	if _, err := io.ReadFull(d.r, b); err != nil {
		d.err = fmt.Errorf("%w: truncated name", ErrFormat)
	}
	return string(b)
}
