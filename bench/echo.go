package bench

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"io"
	"net/netip"
	"os"
	"runtime"
	"strings"
	"sync/atomic"
	"time"

	"github.com/seqbus/seqbus/bus"
	"github.com/seqbus/seqbus/internal/monotime"
	"github.com/seqbus/seqbus/internal/pace"
)

// Echo process limits.
const (
	// EchoDurationMaxDefault bounds an echo process's life even if its
	// parent never closes its stdin.
	EchoDurationMaxDefault = 15 * time.Minute
	// echoParkMs: how long a block or back-off echo parks before it checks
	// for stop.
	echoParkMs = 50
	// echoSpins and echoYields are the back-off echo's phases, in empty
	// polls (~1 µs each): ~10 µs spinning, then ~200 polls with a
	// sched_yield between them, then the epoll park. A long spin phase
	// (100 polls) was worse on 2 cores: with the client and two hops all
	// busy, a hop spinning without yielding holds the CPU another process
	// needs (4 hops at 10k/s, loaded machine: p50 179–393 µs with 100
	// spins, 60–65 µs with 10; 2 hops 57–65 µs against 26–30 µs).
	echoSpins  = 10
	echoYields = 200
)

// FloorIdles are the idle strategies an echo or relay process accepts.
var FloorIdles = []string{"block", "yield", "spin", "backoff"}

// EchoConfig configures one floor hop process.
type EchoConfig struct {
	Listen netip.AddrPort // must be loopback
	// Idle is block (park on the Go netpoller), yield (poll, sched_yield
	// between polls), spin (poll without pause) or backoff (spin, yield,
	// then park in epoll_wait on the socket).
	Idle string
	// RelayTo, if valid, makes this the 4-hop middle (A): datagrams from
	// RelayTo go back to the last other sender (the client), every other
	// datagram goes to RelayTo. Otherwise every datagram goes back to its
	// sender.
	RelayTo      netip.AddrPort
	MaxDuration  time.Duration
	DatagramSize int
	// BusyPollUs, when > 0, sets SO_BUSY_POLL on the hop's socket.
	BusyPollUs int
}

// EchoMain is `seqbus bench-echo`: a floor hop in its own process. It binds,
// prints "listening ADDR" on stdout, and serves until its stdin closes (the
// parent ends it that way, or by dying), --max-duration passes, or a signal.
func EchoMain(args []string) error {
	fs := flag.NewFlagSet("bench-echo", flag.ContinueOnError)
	listen := fs.String("listen", "127.0.0.1:0", "address to bind (loopback only)")
	idle := fs.String("idle", "block", "idle strategy: "+strings.Join(FloorIdles, ", "))
	relay := fs.String("relay-to", "", "4-hop middle: forward the client's datagrams here and this address's back to the client")
	maxDur := fs.Duration("max-duration", EchoDurationMaxDefault, "exit after this long whatever happens")
	busyPoll := fs.Int("busy-poll-us", 0, "SO_BUSY_POLL on the hop's socket, in µs (0: off)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	cfg := EchoConfig{Idle: *idle, MaxDuration: *maxDur, BusyPollUs: *busyPoll}
	var err error
	if cfg.Listen, err = netip.ParseAddrPort(*listen); err != nil {
		return fmt.Errorf("--listen: %v", err)
	}
	if *relay != "" {
		if cfg.RelayTo, err = netip.ParseAddrPort(*relay); err != nil {
			return fmt.Errorf("--relay-to: %v", err)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		// The parent holds our stdin open; EOF means stop.
		_, _ = io.Copy(io.Discard, os.Stdin)
		cancel()
	}()
	return ServeEcho(ctx, cfg, func(addr netip.AddrPort) {
		fmt.Printf("listening %v\n", addr)
		os.Stdout.Sync()
	})
}

// ServeEcho runs one floor hop on the calling goroutine until ctx ends or
// cfg.MaxDuration passes; ready is called with the bound address.
// Spinning and yielding strategies lock the goroutine to its OS thread.
func ServeEcho(ctx context.Context, cfg EchoConfig, ready func(netip.AddrPort)) error {
	if err := cfg.check(); err != nil {
		return err
	}
	// 4 MB: a hop descheduled for a while (2 cores, other processes)
	// queues the pings instead of dropping them.
	u, err := bus.ListenUnicast(bus.UnicastConfig{Addr: cfg.Listen, Tuning: bus.Tuning{RecvBufferBytes: 4 << 20, SendBufferBytes: 1 << 20, BusyPollUs: cfg.BusyPollUs}})
	if err != nil {
		return err
	}
	defer u.Close()
	var parker *bus.Parker
	if cfg.Idle == "backoff" {
		if parker, err = bus.NewParker(u); err != nil {
			return err
		}
		defer parker.Close()
	}
	if cfg.Idle != "block" {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
	}
	var stop atomic.Bool
	done := make(chan struct{})
	defer close(done)
	go func() {
		select {
		case <-ctx.Done():
		case <-done:
		}
		stop.Store(true)
	}()
	e := newEchoer(u, cfg)
	ready(u.LocalAddr())
	endNs := monotime.Now() + int64(cfg.MaxDuration)
	empties := 0
	for !stop.Load() && monotime.Now() < endNs {
		var n int
		var err error
		if cfg.Idle == "block" {
			n, err = u.Receive(e.bufs, e.sizes, e.from, echoParkMs*time.Millisecond)
		} else {
			n, err = u.Receive(e.bufs, e.sizes, e.from, 0)
		}
		if err != nil {
			return err
		}
		if n > 0 {
			e.handle(n)
			empties = 0
			continue
		}
		empties++
		switch cfg.Idle {
		case "yield":
			pace.Yield()
		case "backoff":
			switch {
			case empties <= echoSpins:
			case empties <= echoSpins+echoYields:
				pace.Yield()
			default:
				if _, err := parker.Park(echoParkMs); err != nil {
					return err
				}
				empties = 0
			}
		}
	}
	return nil
}

// check says whether cfg stays on loopback with a known idle strategy,
// and fills in its defaults.
func (cfg *EchoConfig) check() error {
	if !cfg.Listen.Addr().IsLoopback() {
		return fmt.Errorf("%w: echo address %v is not loopback", ErrConfig, cfg.Listen)
	}
	if cfg.RelayTo.IsValid() && !cfg.RelayTo.Addr().IsLoopback() {
		return fmt.Errorf("%w: relay address %v is not loopback", ErrConfig, cfg.RelayTo)
	}
	if !validIdle(cfg.Idle) {
		return fmt.Errorf("%w: idle %q, want one of %s", ErrConfig, cfg.Idle, strings.Join(FloorIdles, ", "))
	}
	if cfg.MaxDuration <= 0 {
		cfg.MaxDuration = EchoDurationMaxDefault
	}
	if cfg.DatagramSize <= 0 {
		cfg.DatagramSize = bus.DatagramBytesDefault
	}
	return nil
}

func validIdle(idle string) bool {
	for _, k := range FloorIdles {
		if k == idle {
			return true
		}
	}
	return false
}

// echoer holds a hop's reused buffers: handling a datagram does not
// allocate.
type echoer struct {
	u       *bus.UDP
	relayTo netip.AddrPort
	client  netip.AddrPort // relay: the last sender other than relayTo
	bufs    [][]byte
	sizes   []int
	from    []netip.AddrPort
	out     [][]byte
}

func newEchoer(u *bus.UDP, cfg EchoConfig) *echoer {
	e := &echoer{u: u, relayTo: cfg.RelayTo, out: make([][]byte, 1),
		bufs: make([][]byte, echoBatch), sizes: make([]int, echoBatch), from: make([]netip.AddrPort, echoBatch)}
	for i := range e.bufs {
		e.bufs[i] = make([]byte, cfg.DatagramSize)
	}
	return e
}

// handle answers datagrams [0, n). Send errors show in the socket's
// counters and, to the client, as a lost ping.
func (e *echoer) handle(n int) {
	for i := 0; i < n; i++ {
		e.out[0] = e.bufs[i][:e.sizes[i]]
		to := e.from[i]
		if e.relayTo.IsValid() {
			if to == e.relayTo {
				to = e.client
			} else {
				e.client = to
				to = e.relayTo
			}
			if !to.IsValid() {
				continue // an answer from B before any client: nowhere to go
			}
		}
		_ = e.u.Send(e.out, to)
	}
}

// readListening reads the "listening ADDR" line an echo process prints.
func readListening(r *bufio.Reader) (netip.AddrPort, error) {
	line, err := r.ReadString('\n')
	if err != nil {
		return netip.AddrPort{}, fmt.Errorf("bench: echo process said %q: %w", line, err)
	}
	addr, ok := strings.CutPrefix(strings.TrimSpace(line), "listening ")
	if !ok {
		return netip.AddrPort{}, fmt.Errorf("bench: echo process said %q", line)
	}
	return netip.ParseAddrPort(addr)
}
