package bus

import (
	"errors"
	"net/netip"
	"sync/atomic"
	"testing"
	"time"
)

// testClock is the runners' clock in these tests: monotonic ns.
var testEpoch = time.Now()

func testNowNs() int64 { return int64(time.Since(testEpoch)) }

// hourNs is a deadline no test waits for: a park that is not ended by an
// arrival, a Wake or a shorter deadline fails the test's bound instead.
const hourNs = int64(time.Hour)

// waitBoundNs bounds every wait of these tests: generous, so a loaded
// machine does not flake; what they check is that the event happens at
// all before an hour-long park would have ended.
const waitBound = 10 * time.Second

type arrival struct {
	endpoint int
	payload  string
}

// testAgent records what its passes see. Its deadline is periodNs after
// its last timer (an hour when periodNs is 0).
type testAgent struct {
	periodNs   int64
	deadlineNs atomic.Int64
	timers     atomic.Uint64 // passes at or past the deadline
	pending    atomic.Bool   // published by the test; a pass takes it
	woken      atomic.Uint64 // passes that took pending
	skipParks  atomic.Int64  // Pending says true this many more times
	got        chan arrival
}

func newTestAgent(periodNs int64) *testAgent {
	a := &testAgent{periodNs: periodNs, got: make(chan arrival, 1024)}
	if periodNs == 0 {
		periodNs = hourNs
	}
	a.deadlineNs.Store(testNowNs() + periodNs)
	return a
}

func (a *testAgent) DoWork(now int64, rx *Received) int {
	work := 0
	for {
		b, ok := rx.Next()
		if !ok {
			break
		}
		for j := 0; j < b.Len(); j++ {
			pkt, _ := b.Datagram(j)
			select {
			case a.got <- arrival{b.Endpoint, string(pkt)}:
			default:
			}
		}
		work += b.Len()
	}
	if a.pending.Swap(false) {
		a.woken.Add(1)
		work++
	}
	if a.periodNs > 0 && now >= a.deadlineNs.Load() {
		a.timers.Add(1)
		a.deadlineNs.Store(now + a.periodNs)
	}
	return work
}

func (a *testAgent) DeadlineNs() int64 { return a.deadlineNs.Load() }

func (a *testAgent) Pending() bool { return a.pending.Load() || a.skipParks.Add(-1) >= 0 }

func startRunner(t *testing.T, a Agent, idle Idle, endpoints ...Receiver) *AgentRunner {
	t.Helper()
	r, err := NewAgentRunner(AgentRunnerConfig{Idle: idle, NowNs: testNowNs}, a, endpoints...)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Stop(); r.Close() })
	return r
}

// waitFor polls cond (test code: sleeping here is the test's, not the
// runner's) and fails after waitBound.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(waitBound)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v", what, waitBound)
		}
		time.Sleep(time.Millisecond)
	}
}

func receiveOne(t *testing.T, a *testAgent) arrival {
	t.Helper()
	select {
	case got := <-a.got:
		return got
	case <-time.After(waitBound):
		t.Fatalf("no datagram reached the agent within %v", waitBound)
	}
	return arrival{}
}

// A datagram that arrives while the runner is parked (block: it parks
// after every pass, and its deadline is an hour away) is handed to the
// next pass: the park sees the socket (epoll), or, in memory, the bounded
// wait on the first endpoint reads it.
func TestRunnerArrivalEndsPark(t *testing.T) {
	for _, tr := range transports {
		t.Run(tr.name, func(t *testing.T) {
			a, b := genPair(t, tr.real, nil)
			ag := newTestAgent(0)
			r := startRunner(t, ag, Idle{Kind: IdleBlock}, b)
			if tr.real && !r.Polling() && pollerAvailable() {
				t.Fatal("a runner over UDP sockets has no poller")
			}
			waitFor(t, "the runner parks", func() bool { return r.Parks() > 0 })
			for i, msg := range []string{"first", "second"} {
				if err := a.Send([][]byte{[]byte(msg)}, b.LocalAddr()); err != nil {
					t.Fatal(err)
				}
				if got := receiveOne(t, ag); got.payload != msg || got.endpoint != 0 {
					t.Fatalf("datagram %d: got %+v, want %q from endpoint 0", i, got, msg)
				}
			}
		})
	}
}

// Wake ends a park: a value published by another thread (pending) is
// picked up at once, with the deadline an hour away and nothing arriving.
func TestRunnerWakeEndsPark(t *testing.T) {
	if !pollerAvailable() {
		t.Skip("no epoll on this platform: parks are bounded waits, and Wake does nothing")
	}
	_, b := genPair(t, true, nil)
	ag := newTestAgent(0)
	r := startRunner(t, ag, Idle{Kind: IdleBlock}, b)
	for i := uint64(1); i <= 3; i++ {
		waitFor(t, "the runner parks", func() bool { return r.parked.Load() })
		ag.pending.Store(true) // publish, then wake: the handshake's order
		r.Wake()
		waitFor(t, "the woken pass", func() bool { return ag.woken.Load() == i })
	}
}

// A runner with no endpoints only keeps its agent's deadlines and wakes:
// its poller holds the eventfd alone.
func TestRunnerWithoutEndpoints(t *testing.T) {
	ag := newTestAgent(int64(2 * time.Millisecond))
	r := startRunner(t, ag, Idle{Kind: IdleBlock})
	waitFor(t, "three timers", func() bool { return ag.timers.Load() >= 3 })
	if r.Polling() {
		waitFor(t, "the runner parks", func() bool { return r.parked.Load() })
		ag.pending.Store(true)
		r.Wake()
		waitFor(t, "the woken pass", func() bool { return ag.woken.Load() == 1 })
	}
}

// The agent's deadline bounds a park: with nothing arriving, passes at
// or past each deadline keep coming (the timer work of a node's tick).
func TestRunnerDeadlineBoundsPark(t *testing.T) {
	for _, tr := range transports {
		t.Run(tr.name, func(t *testing.T) {
			_, b := genPair(t, tr.real, nil)
			ag := newTestAgent(int64(5 * time.Millisecond))
			startRunner(t, ag, Idle{Kind: IdleBlock}, b)
			waitFor(t, "three timers", func() bool { return ag.timers.Load() >= 3 })
		})
	}
}

// Pending is checked after the runner announces its park and before it
// parks: something published before that point is never slept through,
// even when the publisher's Wake came too early to write the eventfd.
// Here Pending says true for the next five parks and nothing wakes the
// runner: each park is given up, so the passes go on.
func TestRunnerPendingSkipsPark(t *testing.T) {
	for _, tr := range transports {
		t.Run(tr.name, func(t *testing.T) {
			_, b := genPair(t, tr.real, nil)
			ag := newTestAgent(0)
			ag.skipParks.Store(5)
			r := startRunner(t, ag, Idle{Kind: IdleBlock}, b)
			waitFor(t, "six passes", func() bool { return r.Passes() >= 6 })
		})
	}
}

// Stop returns within one bounded park, however far the deadline is,
// and twice is fine; Stop without Start returns at once.
func TestRunnerStop(t *testing.T) {
	for _, tr := range transports {
		t.Run(tr.name, func(t *testing.T) {
			_, b := genPair(t, tr.real, nil)
			ag := newTestAgent(0)
			r, err := NewAgentRunner(AgentRunnerConfig{Idle: Idle{Kind: IdleBlock}, NowNs: testNowNs}, ag, b)
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			if err := r.Start(); err != nil {
				t.Fatal(err)
			}
			if err := r.Start(); !errors.Is(err, ErrConfig) {
				t.Fatalf("a second Start: %v, want ErrConfig", err)
			}
			waitFor(t, "the runner parks", func() bool { return r.Parks() > 0 })
			stopped := make(chan struct{})
			go func() { r.Stop(); close(stopped) }()
			select {
			case <-stopped:
			case <-time.After(waitBound):
				t.Fatalf("Stop did not return within %v", waitBound)
			}
			r.Stop()
			passes := r.Passes()
			time.Sleep(5 * time.Millisecond)
			if r.Passes() != passes {
				t.Fatal("passes after Stop returned")
			}
		})
	}
	r, err := NewAgentRunner(AgentRunnerConfig{NowNs: testNowNs}, newTestAgent(0))
	if err != nil {
		t.Fatal(err)
	}
	r.Stop()
	r.Close()
}

// Every idle strategy delivers, and spinning ones never park.
func TestRunnerEveryIdle(t *testing.T) {
	for _, idle := range []Idle{{Kind: IdleBlock}, {Kind: IdleBackoff}, {Kind: IdleBackoff, Window: 100 * time.Microsecond}, {Kind: IdleYield}, {Kind: IdleBusySpin}} {
		t.Run(idle.Kind.String(), func(t *testing.T) {
			a, b := genPair(t, true, nil)
			ag := newTestAgent(int64(time.Millisecond))
			r := startRunner(t, ag, idle, b)
			for i := range 20 {
				if err := a.Send([][]byte{[]byte("x")}, b.LocalAddr()); err != nil {
					t.Fatal(err)
				}
				if got := receiveOne(t, ag); got.payload != "x" {
					t.Fatalf("datagram %d: %+v", i, got)
				}
			}
			if k := idle.Kind; (k == IdleBusySpin || k == IdleYield) && r.Parks() != 0 {
				t.Fatalf("%v parked %d times", k, r.Parks())
			}
		})
	}
}

// failingReceiver fails every Receive with err and counts the calls.
type failingReceiver struct {
	err   error
	calls int
}

func (f *failingReceiver) Receive([][]byte, []int, []netip.AddrPort, time.Duration) (int, error) {
	f.calls++
	return 0, f.err
}

// An endpoint whose Receive reports ErrClosed is read no more; any other
// error is the endpoint's to count, and the next pass reads it again.
func TestRunnerReceiveErrors(t *testing.T) {
	closed := &failingReceiver{err: ErrClosed}
	other := &failingReceiver{err: errors.New("transient")}
	ag := newTestAgent(0)
	r, err := NewAgentRunner(AgentRunnerConfig{NowNs: testNowNs}, ag, closed, other)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	for range 3 {
		if w := r.PassAt(testNowNs()); w != 0 {
			t.Fatalf("a pass over failing endpoints did %d work", w)
		}
	}
	if closed.calls != 1 || other.calls != 3 {
		t.Fatalf("closed endpoint read %d times (want 1), failing one %d (want 3)", closed.calls, other.calls)
	}
	r.park(testNowNs()) // a bounded park on a closed first endpoint returns at once
	if closed.calls != 1 {
		t.Fatalf("a park read the closed endpoint (%d reads)", closed.calls)
	}
}

// Without a poller (in memory), a park reads the first endpoint with a
// bounded wait; what it read is the next pass's first batch, in order,
// and is not read over by another park before a pass took it.
func TestRunnerHeldDatagrams(t *testing.T) {
	a, b := genPair(t, false, nil)
	ag := newTestAgent(0)
	r, err := NewAgentRunner(AgentRunnerConfig{NowNs: testNowNs}, ag, b)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if r.Polling() {
		t.Fatal("a runner over in-memory endpoints has a poller")
	}
	if err := a.Send([][]byte{[]byte("one"), []byte("two")}, b.LocalAddr()); err != nil {
		t.Fatal(err)
	}
	r.park(testNowNs())
	if err := a.Send([][]byte{[]byte("three")}, b.LocalAddr()); err != nil {
		t.Fatal(err)
	}
	r.park(testNowNs()) // holds datagrams already: must not read over them
	if w := r.PassAt(testNowNs()); w != 2 {
		t.Fatalf("the pass after the park did %d work, want the 2 held datagrams", w)
	}
	for _, want := range []string{"one", "two"} {
		if got := <-ag.got; got.payload != want {
			t.Fatalf("got %q, want %q", got.payload, want)
		}
	}
	waitFor(t, "the third datagram", func() bool { return r.PassAt(testNowNs()) == 1 })
	if got := <-ag.got; got.payload != "three" {
		t.Fatalf("got %q, want three", got.payload)
	}
}

// Each endpoint has its own buffers, and a pass reads each at most once:
// what the first delivered is intact while the agent reads the second.
func TestRunnerBatchesPerEndpoint(t *testing.T) {
	for _, tr := range transports {
		t.Run(tr.name, func(t *testing.T) {
			ep := sameHostEndpoints(t, tr.real, 3)
			s, b0, b1 := ep[0], ep[1], ep[2]
			seen := &batchAgent{}
			r, err := NewAgentRunner(AgentRunnerConfig{NowNs: testNowNs}, seen, b0, b1)
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			if err := s.Send([][]byte{[]byte("to-0a"), []byte("to-0b")}, b0.LocalAddr()); err != nil {
				t.Fatal(err)
			}
			if err := s.Send([][]byte{[]byte("to-1")}, b1.LocalAddr()); err != nil {
				t.Fatal(err)
			}
			waitFor(t, "both endpoints' datagrams", func() bool {
				r.PassAt(testNowNs())
				return len(seen.out) >= 3
			})
			want := map[string]bool{"0:to-0a": true, "0:to-0b": true, "1:to-1": true}
			for _, g := range seen.out {
				if !want[g] {
					t.Fatalf("got %v, want each of 0:to-0a, 0:to-0b, 1:to-1 once", seen.out)
				}
				delete(want, g)
			}
		})
	}
}

// sameHostEndpoints opens count unicast endpoints that reach each other:
// on 127.0.0.1 (real), or on one fault-free in-memory network.
func sameHostEndpoints(t *testing.T, real bool, count int) []endpoint {
	t.Helper()
	var mem *MemNetwork
	if !real {
		mem = NewMemNetwork(1, Faults{})
	}
	out := make([]endpoint, count)
	for i := range out {
		var err error
		if real {
			out[i], err = ListenUnicast(UnicastConfig{})
		} else {
			out[i], err = mem.Listen(netip.AddrPort{}, nil)
		}
		if err != nil {
			t.Fatal(err)
		}
		c := out[i]
		t.Cleanup(func() { c.Close() })
	}
	return out
}

// batchAgent keeps every batch of a pass until the pass ends, then
// records them: the buffers of one endpoint must survive reading the
// next.
type batchAgent struct {
	out []string
}

func (a *batchAgent) DoWork(now int64, rx *Received) int {
	var batches []Batch
	for {
		b, ok := rx.Next()
		if !ok {
			break
		}
		for _, prev := range batches {
			if prev.Endpoint == b.Endpoint {
				panic("an endpoint read twice in one pass")
			}
		}
		batches = append(batches, b)
	}
	for _, b := range batches {
		for j := 0; j < b.Len(); j++ {
			pkt, _ := b.Datagram(j)
			a.out = append(a.out, string(rune('0'+b.Endpoint))+":"+string(pkt))
		}
	}
	return len(batches)
}

func (a *batchAgent) DeadlineNs() int64 { return testNowNs() + hourNs }
func (a *batchAgent) Pending() bool     { return false }

// NewAgentRunner refuses a runner without a clock or agent, or with more
// endpoints than a poller reports.
func TestNewAgentRunnerRefuses(t *testing.T) {
	if _, err := NewAgentRunner(AgentRunnerConfig{}, newTestAgent(0)); !errors.Is(err, ErrConfig) {
		t.Fatalf("no clock: %v, want ErrConfig", err)
	}
	if _, err := NewAgentRunner(AgentRunnerConfig{NowNs: testNowNs}, nil); !errors.Is(err, ErrConfig) {
		t.Fatalf("no agent: %v, want ErrConfig", err)
	}
	many := make([]Receiver, PollSocketsMax+1)
	for i := range many {
		many[i] = &failingReceiver{err: ErrClosed}
	}
	if _, err := NewAgentRunner(AgentRunnerConfig{NowNs: testNowNs}, newTestAgent(0), many...); !errors.Is(err, ErrConfig) {
		t.Fatalf("%d endpoints: %v, want ErrConfig", len(many), err)
	}
}

// pollerAvailable reports whether this platform has the epoll Poller.
func pollerAvailable() bool {
	p, err := NewPoller()
	if err != nil {
		return false
	}
	p.Close()
	return true
}

// stallAgent runs on a clock of its own that only it moves: its third
// pass takes 50 ms of it, and before the park after its sixth pass the
// thread is away 80 ms (descheduled, as far as the runner can tell).
type stallAgent struct {
	clock  *atomic.Int64
	passes atomic.Int64
	away   bool
}

func (a *stallAgent) DoWork(now int64, rx *Received) int {
	switch a.passes.Add(1) {
	case 3:
		a.clock.Add(int64(50 * time.Millisecond))
		return 1
	case 6:
		return 0
	}
	return 1
}

func (a *stallAgent) DeadlineNs() int64 { return a.clock.Load() + int64(time.Millisecond) }

func (a *stallAgent) Pending() bool {
	if a.passes.Load() == 6 && !a.away {
		a.away = true
		a.clock.Add(int64(80 * time.Millisecond))
	}
	return false
}

// The runner reports its agent's time away from its sockets on its own
// clock: the longest pass that did work (the 50 ms one), and the longest
// turn of the duty cycle less its pass's work and the 1 ms its park was
// allowed (the 80 ms away before a park), with such stalls over StallNs
// counted. A long pass is not a stall, and turns that parked only as
// long as they were allowed count nothing.
func TestRunnerStalls(t *testing.T) {
	var clock atomic.Int64
	clock.Store(1)
	ag := &stallAgent{clock: &clock}
	r, err := NewAgentRunner(AgentRunnerConfig{Idle: Idle{Kind: IdleBlock}, NowNs: clock.Load}, ag)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Start(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "ten passes", func() bool { return ag.passes.Load() >= 10 })
	r.Stop()
	r.Close()
	s := r.Stalls()
	parkNs := int64(time.Millisecond) // the deadline's distance
	if !r.Polling() {
		parkNs = memParkNsMax // a bounded wait: no epoll here
	}
	want := AgentStalls{LongestPassNs: int64(50 * time.Millisecond), LongestStallNs: int64(80*time.Millisecond) - parkNs, Stalls: 1}
	if s != want {
		t.Fatalf("stalls %+v, want %+v", s, want)
	}
}
