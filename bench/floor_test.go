package bench

import (
	"context"
	"errors"
	"net/netip"
	"os"
	"runtime"
	"strconv"
	"testing"
	"time"
)

// TestRunFloor: for 2 and 4 hops and every idle strategy, the hops run as
// separate processes (distinct pids, not ours), every recorded ping comes
// back, and both histograms hold Count samples. No latency assertion.
func TestRunFloor(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	for _, hops := range []int{2, 4} {
		for _, idle := range FloorIdles {
			t.Run(FloorStage(hops, idle), func(t *testing.T) {
				ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
				defer cancel()
				const count = 2_000
				res, err := RunFloor(ctx, FloorConfig{Binary: os.Args[0], Hops: hops, Idle: idle, Rate: 5_000, Count: count, Warmup: 100})
				if err != nil {
					t.Fatal(err)
				}
				if res.Sent != count || res.Received != count || res.Hist.TotalCount() != count {
					t.Fatalf("sent %d received %d recorded %d, want %d", res.Sent, res.Received, res.Hist.TotalCount(), count)
				}
				if res.IntendedToSent.TotalCount() != count || res.Pace.Sent != count {
					t.Fatalf("intended->sent has %d, pace sent %d, want %d", res.IntendedToSent.TotalCount(), res.Pace.Sent, count)
				}
				wantRoles := hops/2 + 1 // client, echo, and relay for 4 hops
				if len(res.Processes) != wantRoles {
					t.Fatalf("processes %+v, want %d", res.Processes, wantRoles)
				}
				pids := map[int]bool{}
				children := 0
				for _, p := range res.Processes {
					pids[p.Pid] = true
					if p.Role != "client" {
						children++
						if p.Pid == os.Getpid() {
							t.Fatalf("%s runs in the test process", p.Role)
						}
					}
				}
				if len(pids) != wantRoles || children != wantRoles-1 {
					t.Fatalf("pids not distinct: %+v", res.Processes)
				}
			})
		}
	}
}

// TestRunFloorClosedLoop: rate 0 sends each ping when the last comes back.
func TestRunFloorClosedLoop(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := RunFloor(ctx, FloorConfig{Binary: os.Args[0], Hops: 2, Idle: "block", Count: 500})
	if err != nil {
		t.Fatal(err)
	}
	if res.Received != 500 || res.Hist.TotalCount() != 500 {
		t.Fatalf("received %d recorded %d", res.Received, res.Hist.TotalCount())
	}
}

// TestFloorAllNamesBest: every (hops, idle) is run and named, and the best
// of each hop count is the one with the lowest p50.
func TestFloorAllNamesBest(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	idles := []string{"block", "yield"}
	runs, best2, best4, err := FloorAll(ctx, FloorConfig{Binary: os.Args[0], Rate: 5_000, Count: 500}, idles)
	if err != nil {
		t.Fatal(err)
	}
	if len(runs) != 4 {
		t.Fatalf("%d runs, want 4", len(runs))
	}
	for _, c := range []struct {
		hops int
		best string
	}{{2, best2}, {4, best4}} {
		b, ok := runs[c.best]
		if !ok {
			t.Fatalf("best %d-hop %q is not a run", c.hops, c.best)
		}
		for _, idle := range idles {
			r := runs[FloorStage(c.hops, idle)]
			if r == nil {
				t.Fatalf("missing %s", FloorStage(c.hops, idle))
			}
			if r.Hist.ValueAtQuantile(50) < b.Hist.ValueAtQuantile(50) {
				t.Fatalf("%s p50 below the best %s", FloorStage(c.hops, idle), c.best)
			}
		}
	}
}

// TestEchoRefusesNonLoopback: a hop never binds or relays off the host.
func TestEchoRefusesNonLoopback(t *testing.T) {
	for _, cfg := range []EchoConfig{
		{Listen: netip.MustParseAddrPort("10.0.0.1:0"), Idle: "block"},
		{Listen: netip.MustParseAddrPort("127.0.0.1:0"), Idle: "block", RelayTo: netip.MustParseAddrPort("8.8.8.8:53")},
		{Listen: netip.MustParseAddrPort("127.0.0.1:0"), Idle: "nap"},
	} {
		if err := ServeEcho(context.Background(), cfg, func(netip.AddrPort) { t.Fatal("served") }); err == nil {
			t.Fatalf("%+v: no error", cfg)
		}
	}
}

// TestListeningIn: the hop's address is read from a whole line of its
// log only.
func TestListeningIn(t *testing.T) {
	for _, c := range []struct {
		log  string
		want string
		ok   bool
		bad  bool
	}{
		{"", "", false, false},
		{"listening 127.0.0.1:4", "", false, false}, // not yet a whole line
		{"listening 127.0.0.1:4000\n", "127.0.0.1:4000", true, false},
		{"warming up\nlistening 127.0.0.1:4000\nmore", "127.0.0.1:4000", true, false},
		{"listening nowhere\n", "", false, true},
	} {
		addr, ok, err := listeningIn(c.log)
		if ok != c.ok || (err != nil) != c.bad || (ok && addr.String() != c.want) {
			t.Errorf("%q: %v %v %v, want %q %v bad=%v", c.log, addr, ok, err, c.want, c.ok, c.bad)
		}
	}
	if cpus, err := cpuSlice("0"); err != nil || len(cpus) != 1 || cpus[0] != 0 {
		t.Errorf("cpuSlice(0) = %v, %v", cpus, err)
	}
	if cpus, err := cpuSlice(""); err != nil || cpus != nil {
		t.Errorf("cpuSlice(\"\") = %v, %v", cpus, err)
	}
}

func TestParseCPUList(t *testing.T) {
	set, err := parseCPUList("0")
	if err != nil || !set.IsSet(0) || set.Count() != 1 {
		t.Fatalf("0: %v %v", set, err)
	}
	for _, bad := range []string{"", "x", "1-0", "-1", "99999"} {
		if _, err := parseCPUList(bad); err == nil {
			t.Fatalf("%q accepted", bad)
		}
	}
}

// TestRunFloorPinned: with a CPU layout the hops start pinned and the
// client thread is pinned; the report states the layout per role.
func TestRunFloorPinned(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cpus := map[string]string{"client": "0", "relay": "0", "echo": strconv.Itoa(runtime.NumCPU() - 1)}
	res, err := RunFloor(ctx, FloorConfig{Binary: os.Args[0], Hops: 4, Idle: "block", Rate: 5_000, Count: 300, CPUs: cpus})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Processes) != 3 {
		t.Fatalf("processes %+v", res.Processes)
	}
	for _, p := range res.Processes {
		if p.CPUs != cpus[p.Role] {
			t.Errorf("%s: cpus %q, want %q", p.Role, p.CPUs, cpus[p.Role])
		}
	}
	for _, bad := range []map[string]string{{"echo": "9999"}, {"primary": "0"}} {
		if _, err := RunFloor(ctx, FloorConfig{Binary: os.Args[0], Hops: 2, Idle: "block", Count: 1, CPUs: bad}); !errors.Is(err, ErrConfig) {
			t.Errorf("layout %v: %v, want ErrConfig", bad, err)
		}
	}
}

// TestFloorClientZeroAllocs: the floor client's send and poll (the
// generator's every pass) do not allocate; the echo runs in-process here.
func TestFloorClientZeroAllocs(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	addrCh := make(chan netip.AddrPort, 1)
	done := make(chan error, 1)
	go func() {
		done <- ServeEcho(ctx, EchoConfig{Listen: netip.MustParseAddrPort("127.0.0.1:0"), Idle: "block"}, func(a netip.AddrPort) { addrCh <- a })
	}()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()
	echo := <-addrCh
	cfg, err := FloorConfig{Binary: "unused", Hops: 2, Idle: "block", Rate: 1000, Count: 1000}.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	u, err := listenFloorClient(0)
	if err != nil {
		t.Fatal(err)
	}
	defer u.Close()
	c := newFloorClient(cfg, u, echo)
	seq := uint64(0)
	allocs := testing.AllocsPerRun(200, func() {
		want := c.received + 1
		if err := c.send(seq); err != nil {
			t.Fatal(err)
		}
		seq++
		for i := 0; c.received < want && i < 10_000_000; i++ {
			c.poll(0)
		}
		if c.received < want {
			t.Fatal("no reply")
		}
	})
	if allocs != 0 {
		t.Fatalf("send+poll: %v allocs per round trip, want 0", allocs)
	}
}

// The floor client's socket carries --busy-poll: granted (root, or a
// raised net.core.busy_read) or refused with the reason, never dropped
// on the way as it once was.
func TestFloorClientBusyPoll(t *testing.T) {
	u, err := listenFloorClient(50)
	if err != nil {
		t.Fatal(err)
	}
	defer u.Close()
	if r := u.Report(); (r.BusyPollErr == nil) != (r.BusyPollUs == 50) {
		t.Fatalf("SO_BUSY_POLL: granted %d µs, refused with %v; want 50 or a refusal", r.BusyPollUs, r.BusyPollErr)
	}
	u0, err := listenFloorClient(0)
	if err != nil {
		t.Fatal(err)
	}
	defer u0.Close()
	if r := u0.Report(); r.BusyPollUs != 0 || r.BusyPollErr != nil {
		t.Fatalf("no --busy-poll: granted %d µs, error %v; want none asked", r.BusyPollUs, r.BusyPollErr)
	}
}
