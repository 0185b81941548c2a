package client

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/seqbus/seqbus/bus"
	"github.com/seqbus/seqbus/engine"
	"github.com/seqbus/seqbus/wire"
)

// fakePrimary answers every command with an Ack in its own OUTPUT frame
// (seq counting from 1, epoch 3), on loopback.
type fakePrimary struct {
	u    *bus.UDP
	loop *bus.Loop
}

const fakeEpoch = 3

func startFakePrimary(t *testing.T) *fakePrimary { return startFakePrimaryRuns(t, false) }

// startFakePrimaryRuns is startFakePrimary; with runs, the frames that
// answer one COMMAND datagram leave with one Send (equal lengths: one
// segmented run, as a primary's release of a pass sends them).
func startFakePrimaryRuns(t *testing.T, runs bool) *fakePrimary {
	t.Helper()
	// 4 MB, as a node's: a fake primary descheduled for a while on a
	// loaded machine (CI runs the packages side by side under -race)
	// queues a load's bursts instead of dropping them (the default
	// 208 KB held ~90 full datagrams: 744 of 5,000 commands lost once,
	// with resends off).
	u, err := bus.ListenUnicast(bus.UnicastConfig{Tuning: bus.Tuning{RecvBufferBytes: 4 << 20}})
	if err != nil {
		t.Fatal(err)
	}
	p := &fakePrimary{u: u}
	var seq uint64
	var outs [][]byte
	var outBuf []byte
	p.loop, err = bus.StartLoop(u, bus.LoopConfig{}, func(bufs [][]byte, sizes []int, from []netip.AddrPort) {
		for i := range sizes {
			f, _, err := wire.Parse(bufs[i][:sizes[i]])
			if err != nil || f.Type != wire.TypeCommand {
				continue
			}
			outs = outs[:0]
			it := f.Messages()
			for {
				_, msg, ok := it.Next()
				if !ok {
					break
				}
				h, err := engine.ParseCommand(msg)
				if err != nil {
					continue
				}
				seq++
				batch := wire.NewBatch(0)
				batch.Reset(wire.TypeOutput, wire.Origin{Stream: 1, Node: 1, Epoch: fakeEpoch}, seq)
				outBuf = engine.AppendOutput(outBuf[:0], &engine.Output{Kind: engine.KindAck, ClientOrderID: h.ClientOrderID, OrderID: h.ClientOrderID, Side: engine.Buy, Type: engine.Limit, Price: 1000, Qty: 1})
				batch.Add(outBuf)
				outs = append(outs, batch.Bytes())
				if !runs {
					_ = u.Send(outs, from[i])
					outs = outs[:0]
				}
			}
			if len(outs) > 0 {
				_ = u.Send(outs, from[i])
			}
		}
	})
	if err != nil {
		u.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() { u.Close(); p.loop.Stop() })
	return p
}

// TestLoadReadsCoalescedAnswers: a client with GRO (poll mode, parked
// waits, bursts) reads the answers a primary sent as segmented runs
// whole, and every command is answered once; its socket counts the runs.
func TestLoadReadsCoalescedAnswers(t *testing.T) {
	p := startFakePrimaryRuns(t, true)
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	cl, err := Dial(Options{Core: Config{Session: 9}, Primary: p.u.LocalAddr(), Poll: true, GRO: true})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if r := cl.uc.(*bus.UDP).Report(); !r.GRO {
		t.Skipf("the kernel refused UDP_GRO: %v", r.GROErr)
	}
	const count = 5_000
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rep, err := cl.Load(ctx, LoadConfig{Rate: 50_000, Count: count, Seed: 1, Drain: 5 * time.Second, CoalesceNs: int64(time.Millisecond), Park: true}, nil)
	if err != nil || rep.Answered != count || rep.Stats.Duplicates != 0 {
		t.Fatalf("%v: answered %d of %d, %d duplicates", err, rep.Answered, count, rep.Stats.Duplicates)
	}
	c := cl.Counters()
	if c.CoalescedReceives == 0 {
		t.Fatalf("no answer read in a coalesced run: %+v", c)
	}
	t.Logf("%d answers in %d datagrams, %d read in coalesced runs", count, c.DatagramsReceived, c.CoalescedReceives)
}

// TestLoadPollMode: in poll mode Dial starts no goroutine, Load answers
// every command from its own thread, and each Result carries absolute
// monotime stage times in order, the schedule's intended times, the
// session, and the OUTPUT frame's seq and epoch; the report carries the
// generator's lateness for every send. Both modes run the same checks.
func TestLoadPollMode(t *testing.T) {
	for _, poll := range []bool{true, false} {
		name := "goroutine"
		if poll {
			name = "poll"
		}
		t.Run(name, func(t *testing.T) {
			p := startFakePrimary(t)
			defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
			cl, err := Dial(Options{Core: Config{Session: 9}, Primary: p.u.LocalAddr(), Poll: poll})
			if err != nil {
				t.Fatal(err)
			}
			defer cl.Close()
			if poll {
				// No receive goroutine: nothing new beyond the fake primary's.
				if err := goleak.Find(goleak.IgnoreCurrent()); err != nil {
					t.Fatalf("poll mode started a goroutine: %v", err)
				}
			}
			const count, rate = 2_000, 5_000
			var mu sync.Mutex
			var results []Result
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			rep, err := cl.Load(ctx, LoadConfig{Rate: rate, Count: count, Seed: 1, Drain: 5 * time.Second}, func(r Result) {
				mu.Lock()
				results = append(results, r)
				mu.Unlock()
			})
			if err != nil {
				t.Fatalf("%v: %+v", err, rep)
			}
			if rep.Sent != count || rep.Answered != count || len(results) != count {
				t.Fatalf("sent %d answered %d results %d, want %d", rep.Sent, rep.Answered, len(results), count)
			}
			if rep.Pace.Sent != count || rep.IntendedToSent.TotalCount() != count {
				t.Fatalf("pace %+v, intended->sent count %d", rep.Pace, rep.IntendedToSent.TotalCount())
			}
			byID := map[uint64]Result{}
			for _, r := range results {
				if r.Session != 9 || r.Epoch != fakeEpoch || r.Seq != r.ClientOrderID {
					t.Fatalf("result %+v: want session 9, epoch %d, seq = id", r, fakeEpoch)
				}
				if !(r.IntendedNs <= r.SentNs && r.SentNs <= r.ReceivedNs) || r.LatencyNs != r.ReceivedNs-r.IntendedNs {
					t.Fatalf("stage times out of order: %+v", r)
				}
				byID[r.ClientOrderID] = r
			}
			// Intended times are the schedule: 200 µs apart (±1 ns rounding).
			first := byID[1].IntendedNs
			for id := uint64(1); id <= count; id++ {
				want := first + int64(float64(id-1)*1e9/rate)
				if d := byID[id].IntendedNs - want; d < -1 || d > 1 {
					t.Fatalf("id %d intended %d, want %d", id, byID[id].IntendedNs, want)
				}
			}
		})
	}
}

// TestPollIOZeroAllocs: an empty poll (the generator's every wait pass)
// does not allocate.
func TestPollIOZeroAllocs(t *testing.T) {
	p := startFakePrimary(t)
	cl, err := Dial(Options{Core: Config{Session: 9}, Primary: p.u.LocalAddr(), Poll: true})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	now := cl.nowNs()
	cl.PollIO(now) // timers once
	allocs := testing.AllocsPerRun(100, func() { cl.PollIO(now) })
	if allocs != 0 {
		t.Fatalf("PollIO: %v allocs, want 0", allocs)
	}
}

// TestPollIOStopsOnClose: after the socket closes, PollIO records the
// error and Load returns it instead of spinning to its drain deadline.
func TestPollIOStopsOnClose(t *testing.T) {
	p := startFakePrimary(t)
	cl, err := Dial(Options{Core: Config{Session: 9}, Primary: p.u.LocalAddr(), Poll: true})
	if err != nil {
		t.Fatal(err)
	}
	cl.Close()
	cl.PollIO(cl.nowNs())
	if _, err := cl.Load(context.Background(), LoadConfig{Rate: 1000, Count: 10, Drain: time.Minute}, nil); err == nil {
		t.Fatal("Load on a closed socket: no error")
	}
}

// TestLoadEndsOnClose: a client closed while its Load waits on a full
// window (a primary that never answers) ends the Load with ErrClosed, in
// both modes. It used to spin in its back-pressure wait forever: in
// goroutine mode nothing read the closed socket, and in poll mode its
// read gate never said "readable" again; a test that failed with a Load
// running leaked that goroutine into every later test of its package.
func TestLoadEndsOnClose(t *testing.T) {
	silent, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close() // bound, never read: nothing is ever answered
	primary := silent.LocalAddr().(*net.UDPAddr).AddrPort()
	for _, poll := range []bool{false, true} {
		cl, err := Dial(Options{Core: Config{Session: 3}, Primary: netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), primary.Port()), Poll: poll})
		if err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() {
			_, err := cl.Load(context.Background(), LoadConfig{Rate: 50_000, Count: 1_000_000, Drain: time.Minute}, nil)
			done <- err
		}()
		for i := 0; cl.InFlight() < DefaultMaxInFlight && i < 2000; i++ {
			time.Sleep(time.Millisecond) // until the window is full (bounded)
		}
		cl.Close()
		select {
		case err := <-done:
			if !errors.Is(err, ErrClosed) {
				t.Errorf("poll %v: Load after Close: %v, want ErrClosed", poll, err)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("poll %v: Load still running 10 s after Close", poll)
		}
	}
}

// TestLoadSlowRateParks: at 200/s (5 ms apart) poll mode parks in
// epoll_wait between sends and still answers everything on schedule.
func TestLoadSlowRateParks(t *testing.T) {
	p := startFakePrimary(t)
	cl, err := Dial(Options{Core: Config{Session: 4}, Primary: p.u.LocalAddr(), Poll: true})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if cl.parker == nil {
		t.Fatal("poll mode on UDP has no parker")
	}
	var got []Result
	rep, err := cl.Load(context.Background(), LoadConfig{Rate: 200, Count: 20, Drain: 5 * time.Second}, func(r Result) { got = append(got, r) })
	if err != nil {
		t.Fatal(err)
	}
	if rep.Answered != 20 || rep.Pace.Sent != 20 || len(got) != 20 {
		t.Fatalf("answered %d, pace %+v, results %d", rep.Answered, rep.Pace, len(got))
	}
	for i := 1; i < len(got); i++ {
		if d := got[i].IntendedNs - got[i-1].IntendedNs; d != 5_000_000 {
			t.Fatalf("intended times %d apart, want 5 ms", d)
		}
	}
}

// TestOnBatchAnswerAllocatesNothing: decoding and matching an answer is
// on the client's hot path (one per command); it must not allocate. A
// decoded output passed by the address of a local escaped to the heap
// once per answer (1.00 mallocs per command in seqbus bench).
func TestOnBatchAnswerAllocatesNothing(t *testing.T) {
	p := startFakePrimary(t)
	answered := 0
	cl, err := Dial(Options{Core: Config{Session: 9}, Primary: p.u.LocalAddr(), Poll: true,
		OnResult: func(Result) { answered++ }})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	batch := wire.NewBatch(0)
	var outBuf []byte
	bufs, sizes := make([][]byte, 1), make([]int, 1)
	frame := func(id uint64) {
		batch.Reset(wire.TypeOutput, wire.Origin{Stream: 1, Node: 1, Epoch: fakeEpoch}, id)
		outBuf = engine.AppendOutput(outBuf[:0], &engine.Output{Kind: engine.KindAck, ClientOrderID: id, OrderID: id, Side: engine.Buy, Type: engine.Limit, Price: 1000, Qty: 1})
		batch.Add(outBuf)
		bufs[0] = append(bufs[0][:0], batch.Bytes()...)
		sizes[0] = len(bufs[0])
	}
	frame(1)
	bufs[0] = make([]byte, 0, 2048) // room for every frame below
	allocs := testing.AllocsPerRun(200, func() {
		frame(7)
		cl.onBatch(bufs, sizes, nil)
	})
	if allocs != 0 {
		t.Fatalf("onBatch of one answer: %v allocs, want 0", allocs)
	}
}

// TestLoadSaysPrimaryNeverAnswered: against a loopback port nobody
// listens on, Load says the primary never answered and names it (it used
// to say only "commands unanswered: N of N").
func TestLoadSaysPrimaryNeverAnswered(t *testing.T) {
	l, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	dead := l.LocalAddr().(*net.UDPAddr).AddrPort()
	l.Close() // nobody listens there now
	for _, poll := range []bool{false, true} {
		cl, err := Dial(Options{Core: Config{Session: 1}, Primary: netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), dead.Port()), Poll: poll})
		if err != nil {
			t.Fatal(err)
		}
		rep, err := cl.Load(context.Background(), LoadConfig{Rate: 1000, Count: 5, Drain: 200 * time.Millisecond}, nil)
		cl.Close()
		if !errors.Is(err, ErrNoAnswer) || !strings.Contains(err.Error(), "never answered") || !strings.Contains(err.Error(), dead.String()) ||
			!strings.Contains(err.Error(), "drops commands sent without it") {
			t.Fatalf("poll %v: err = %v, want ErrNoAnswer naming %s, and a keyed cluster as a cause", poll, err, dead)
		}
		if rep.Sent != 5 || rep.Answered != 0 {
			t.Fatalf("poll %v: report %+v: want 5 sent, 0 answered", poll, rep)
		}
	}
}

// TestLoadNice: in poll mode Load runs its generator thread at the nice
// value asked for and reports when it could not; the thread is restored
// afterwards (a goroutine locked to it after Load sees the old value).
func TestLoadNice(t *testing.T) {
	p := startFakePrimary(t)
	cl, err := Dial(Options{Core: Config{Session: 9}, Primary: p.u.LocalAddr(), Poll: true})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	rep, err := cl.Load(context.Background(), LoadConfig{Rate: 5000, Count: 200, Drain: 5 * time.Second, Nice: -5}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if os.Geteuid() == 0 && rep.NiceErr != nil {
		t.Fatalf("as root the nice value must apply: %v", rep.NiceErr)
	}
	if os.Geteuid() != 0 && rep.NiceErr == nil {
		t.Fatalf("without root a negative nice cannot apply, but no error was reported")
	}
}
