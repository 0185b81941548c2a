package bus

import (
	"bytes"
	"errors"
	"fmt"
	"net/netip"
	"runtime"
	"slices"
	"testing"
	"time"
)

// txCall is one call a recording sender saw.
type txCall struct {
	socket string
	each   bool // SendEach, not Send
	to     []netip.AddrPort
}

// recSender records each Send and passes it on.
type recSender struct {
	name string
	c    Sender
	log  *[]txCall
}

func (r *recSender) Send(bufs [][]byte, to netip.AddrPort) error {
	c := txCall{socket: r.name}
	for range bufs {
		c.to = append(c.to, to)
	}
	*r.log = append(*r.log, c)
	return r.c.Send(bufs, to)
}

// recMulti is recSender for a MultiSender, recording SendEach too.
type recMulti struct{ recSender }

func (r *recMulti) SendEach(bufs [][]byte, to []netip.AddrPort) error {
	*r.log = append(*r.log, txCall{socket: r.name, each: true, to: slices.Clone(to)})
	return r.c.(MultiSender).SendEach(bufs, to)
}

// txPort is an endpoint of a TxQueue test: a real socket on 127.0.0.1 or
// an in-memory port.
type txPort interface {
	Conn
	LocalAddr() netip.AddrPort
}

// txPorts opens count endpoints on real sockets on 127.0.0.1 or on one
// fault-free in-memory network.
func txPorts(t *testing.T, real bool, count int) []txPort {
	t.Helper()
	var mem *MemNetwork
	if !real {
		mem = NewMemNetwork(1, Faults{})
	}
	ports := make([]txPort, count)
	for i := range ports {
		var err error
		if real {
			ports[i], err = ListenUnicast(UnicastConfig{Tuning: Tuning{RecvBufferBytes: 1 << 20}})
		} else {
			ports[i], err = mem.Listen(netip.AddrPort{}, nil)
		}
		if err != nil {
			t.Fatal(err)
		}
		p := ports[i]
		t.Cleanup(func() { p.Close() })
	}
	return ports
}

// recording wraps c as a recording sender, keeping SendEach where c has it.
func recording(name string, c Sender, log *[]txCall) Sender {
	r := recSender{name: name, c: c, log: log}
	if _, ok := c.(MultiSender); ok {
		return &recMulti{r}
	}
	return &r
}

// receiveAll reads want datagrams from c (bounded in time) and returns
// their payloads in arrival order.
func receiveAll(t *testing.T, c Receiver, want int) []string {
	t.Helper()
	b := newBatch(BatchSizeMax, 1<<16)
	var got []string
	deadline := time.Now().Add(10 * time.Second)
	for len(got) < want && time.Now().Before(deadline) {
		n, err := c.Receive(b.bufs, b.sizes, b.from, 100*time.Millisecond)
		if err != nil {
			t.Fatal(err)
		}
		for i := range n {
			got = append(got, string(b.bufs[i][:b.sizes[i]]))
		}
	}
	return got
}

// TestTxQueueOrderAcrossSockets: nothing leaves before the pass ends (or
// a flush); a frame for another socket sends the queue first, so every
// datagram leaves in the order it was queued, in one call per run of one
// socket: SendEach where the socket has it (real UDP), else one Send per
// run of one address (in memory).
func TestTxQueueOrderAcrossSockets(t *testing.T) {
	for _, tr := range transports {
		t.Run(tr.name, func(t *testing.T) {
			p := txPorts(t, tr.real, 4)
			var log []txCall
			a, b := recording("a", p[0], &log), recording("b", p[1], &log)
			r1, r2 := p[2].LocalAddr(), p[3].LocalAddr()
			var q TxQueue
			q.Begin()
			steps := []struct {
				s    Sender
				to   netip.AddrPort
				name string
			}{{a, r1, "f0"}, {a, r1, "f1"}, {a, r2, "f2"}, {b, r1, "f3"}, {a, r2, "f4"}, {a, r2, "f5"}}
			buf := make([]byte, 0, 8)
			for i, s := range steps {
				buf = append(buf[:0], s.name...) // the caller reuses its buffer: the queue copies
				if queued, failed := q.Queue(s.s, buf, s.to); !queued || failed != 0 {
					t.Fatalf("step %d: queued %v, failed %d", i, queued, failed)
				}
				if i == 2 && len(log) != 0 {
					t.Fatalf("sent during the pass: %+v", log)
				}
			}
			if failed := q.End(); failed != 0 {
				t.Fatalf("End: %d failed", failed)
			}
			want := []txCall{{"a", false, []netip.AddrPort{r1, r1}}, {"a", false, []netip.AddrPort{r2}}, {"b", false, []netip.AddrPort{r1}}, {"a", false, []netip.AddrPort{r2, r2}}}
			if tr.real {
				want = []txCall{{"a", true, []netip.AddrPort{r1, r1, r2}}, {"b", false, []netip.AddrPort{r1}}, {"a", false, []netip.AddrPort{r2, r2}}}
			}
			if fmt.Sprint(log) != fmt.Sprint(want) {
				t.Fatalf("calls\n got %v\nwant %v", log, want)
			}
			if got := receiveAll(t, p[2], 3); !slices.Equal(got, []string{"f0", "f1", "f3"}) {
				t.Errorf("first receiver got %v", got)
			}
			if got := receiveAll(t, p[3], 3); !slices.Equal(got, []string{"f2", "f4", "f5"}) {
				t.Errorf("second receiver got %v", got)
			}
			if queued, _ := q.Queue(a, buf, r1); queued {
				t.Error("queued after End")
			}
		})
	}
}

// TestTxQueueBounds: a frame that would overfill the arena, or the
// TxFramesMax+1st frame, sends the queue first; a frame larger than the
// whole arena is not queued (the queue is sent first, so the caller's own
// send keeps the order); QueueUpTo sends every perSend frames.
func TestTxQueueBounds(t *testing.T) {
	for _, tr := range transports {
		t.Run(tr.name, func(t *testing.T) {
			p := txPorts(t, tr.real, 2)
			var log []txCall
			s, to := recording("s", p[0], &log), p[1].LocalAddr()
			sizes := func() (out []int) {
				for _, c := range log {
					out = append(out, len(c.to))
				}
				log = log[:0]
				return out
			}
			var q TxQueue
			q.Begin()
			big := bytes.Repeat([]byte{'x'}, 10_000) // 6 fill 60,000 of the arena's 65,536 bytes
			for range 7 {
				q.Queue(s, big, to)
			}
			q.End()
			if got := sizes(); !slices.Equal(got, []int{6, 1}) {
				t.Errorf("10 kB frames: calls of %v, want [6 1]", got)
			}
			q.Begin()
			for range TxFramesMax + 1 {
				q.Queue(s, []byte("small"), to)
			}
			q.End()
			if got := sizes(); !slices.Equal(got, []int{TxFramesMax, 1}) {
				t.Errorf("%d small frames: calls of %v, want [%d 1]", TxFramesMax+1, got, TxFramesMax)
			}
			q.Begin()
			q.Queue(s, []byte("before"), to)
			if queued, _ := q.Queue(s, make([]byte, TxArenaBytes+1), to); queued {
				t.Error("a frame larger than the arena was queued")
			}
			if got := sizes(); !slices.Equal(got, []int{1}) || q.Len() != 0 {
				t.Errorf("before the oversized frame: calls of %v, %d left, want the queue sent", got, q.Len())
			}
			for range 20 {
				q.QueueUpTo(s, []byte("data"), to, TxFramesPerSend)
			}
			q.End()
			if got := sizes(); !slices.Equal(got, []int{8, 8, 4}) {
				t.Errorf("20 frames up to %d: calls of %v, want [8 8 4]", TxFramesPerSend, got)
			}
			if got := receiveAll(t, p[1], 7+TxFramesMax+1+1+20); len(got) != 7+TxFramesMax+1+1+20 {
				t.Errorf("received %d datagrams, want %d", len(got), 7+TxFramesMax+1+1+20)
			}
		})
	}
}

// failSender fails every call; each implements SendEach too when multi.
type failSender struct{ calls int }

var errTxTest = errors.New("send failed")

func (f *failSender) Send([][]byte, netip.AddrPort) error { f.calls++; return errTxTest }

type failMulti struct{ failSender }

func (f *failMulti) SendEach([][]byte, []netip.AddrPort) error { f.calls++; return errTxTest }

// TestTxQueueCountsFailedCalls: each failed call is counted once, by the
// method that made it: End, Flush, or the Queue that flushed for another
// socket; a closed real socket fails like any other.
func TestTxQueueCountsFailedCalls(t *testing.T) {
	x, y := netip.MustParseAddrPort("127.0.0.1:9"), netip.MustParseAddrPort("127.0.0.1:10")
	var q TxQueue
	plain, multi := &failSender{}, &failMulti{}
	q.Begin()
	for _, to := range []netip.AddrPort{x, y, x} {
		q.Queue(plain, []byte("f"), to)
	}
	if _, failed := q.Queue(multi, []byte("f"), x); failed != 3 {
		t.Errorf("switching sockets after three runs of one address: %d failed, want 3", failed)
	}
	q.Queue(multi, []byte("f"), y)
	if failed := q.Flush(); failed != 1 {
		t.Errorf("SendEach: %d failed, want 1", failed)
	}
	for range TxFramesPerSend - 1 {
		q.QueueUpTo(plain, []byte("f"), x, TxFramesPerSend)
	}
	if _, failed := q.QueueUpTo(plain, []byte("f"), x, TxFramesPerSend); failed != 1 {
		t.Errorf("QueueUpTo at the bound: %d failed, want 1", failed)
	}
	closed := txPorts(t, true, 1)[0]
	closed.Close()
	q.Queue(closed, []byte("f"), x)
	if failed := q.End(); failed != 1 {
		t.Errorf("End on a closed socket: %d failed, want 1", failed)
	}
	if plain.calls != 4 || multi.calls != 1 {
		t.Errorf("calls: %d plain, %d SendEach, want 4 and 1", plain.calls, multi.calls)
	}
}

// nopSender accepts everything.
type nopSender struct{ n int }

func (s *nopSender) Send(bufs [][]byte, _ netip.AddrPort) error { s.n += len(bufs); return nil }

// TestTxQueueAllocatesNothing: a pass of queueing, switching sockets and
// flushing allocates nothing once the arena exists, over real UDP too.
func TestTxQueueAllocatesNothing(t *testing.T) {
	var q TxQueue
	a, b := &nopSender{}, &nopSender{}
	frame := make([]byte, 1200)
	x, y := netip.MustParseAddrPort("127.0.0.1:9"), netip.MustParseAddrPort("127.0.0.1:10")
	pass := func(s1, s2 Sender, to1, to2 netip.AddrPort) func() {
		return func() {
			q.Begin()
			for range 3 {
				q.Queue(s1, frame, to1)
				q.Queue(s1, frame, to2)
				q.QueueUpTo(s2, frame, to1, TxFramesPerSend)
			}
			q.End()
		}
	}
	cases := []struct {
		name string
		fn   func()
	}{{"nop", pass(a, b, x, y)}}
	if runtime.GOOS == "linux" {
		p := txPorts(t, true, 4)
		cases = append(cases, struct {
			name string
			fn   func()
		}{"udp", pass(p[0], p[1], p[2].LocalAddr(), p[3].LocalAddr())})
	}
	for _, c := range cases {
		c.fn() // warm up
		if allocs := testing.AllocsPerRun(50, c.fn); allocs != 0 {
			t.Errorf("%s: %v allocs per pass, want 0", c.name, allocs)
		}
	}
}

// Discard drops what is queued unsent; the queue goes on queueing.
func TestTxQueueDiscard(t *testing.T) {
	var q TxQueue
	s := &nopSender{}
	to := netip.MustParseAddrPort("127.0.0.1:1")
	q.Begin()
	q.Queue(s, []byte("a"), to)
	q.Queue(s, []byte("b"), to)
	if got := q.Discard(); got != 2 || q.Len() != 0 {
		t.Fatalf("Discard = %d, Len %d; want 2, 0", got, q.Len())
	}
	q.Queue(s, []byte("c"), to)
	q.End()
	if s.n != 1 {
		t.Fatalf("sent %d frames, want only the one queued after the discard", s.n)
	}
}
