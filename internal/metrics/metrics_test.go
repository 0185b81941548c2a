package metrics

import (
	"bytes"
	"context"
	"encoding/json"
	"math/rand/v2"
	"net"
	"net/http"
	"net/netip"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"go.uber.org/goleak"

	"github.com/seqbus/seqbus/bus"
	"github.com/seqbus/seqbus/client"
	"github.com/seqbus/seqbus/engine"
	"github.com/seqbus/seqbus/journal"
	"github.com/seqbus/seqbus/node"
	"github.com/seqbus/seqbus/nodeconfig"
	"github.com/seqbus/seqbus/witness"
)

func freeUDP(t *testing.T) netip.AddrPort {
	t.Helper()
	c, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	return c.LocalAddr().(*net.UDPAddr).AddrPort()
}

func scrape(t *testing.T, addr string) map[string]*dto.MetricFamily {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /metrics: %s", resp.Status)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("parse the exposition: %v", err)
	}
	return fams
}

// value returns the sample of family name whose labels include want.
func value(t *testing.T, fams map[string]*dto.MetricFamily, name string, want map[string]string) (float64, bool) {
	t.Helper()
	f := fams[name]
	if f == nil {
		return 0, false
	}
next:
	for _, m := range f.Metric {
		for k, v := range want {
			found := false
			for _, l := range m.Label {
				if l.GetName() == k && l.GetValue() == v {
					found = true
				}
			}
			if !found {
				continue next
			}
		}
		switch {
		case m.Counter != nil:
			return m.Counter.GetValue(), true
		case m.Gauge != nil:
			return m.Gauge.GetValue(), true
		}
	}
	return 0, false
}

// A static primary with no standby (it runs alone, so it releases), a
// client's load, then a scrape: watermarks, counters under status.json's
// names, socket drops by reason, and the latency histogram.
func TestNodeMetricsScrape(t *testing.T) {
	defer goleak.VerifyNone(t)
	listen := freeUDP(t)
	group := netip.AddrPortFrom(netip.AddrFrom4([4]byte{239, 77, byte(rand.IntN(250)), byte(1 + rand.IntN(250))}), freeUDP(t).Port())
	n, err := node.New(nodeconfig.Config{
		ID: 1, Stream: 9, Dir: t.TempDir(), Listen: listen, Group: group, Interface: "lo",
		Role: nodeconfig.RolePrimary, Epoch: 1,
		Journal: journal.Options{Policy: journal.SyncNone, SegmentBytes: 1 << 20},
		NewStateMachine: func() (engine.StateMachine, error) {
			return engine.New(engine.NodeConfig())
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := n.Start(); err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	srv, err := Serve("127.0.0.1:0", NewRegistry(NodeCollector{n}), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()

	cl, err := client.Dial(client.Options{Core: client.Config{Session: 7, MaxInFlight: 256}, Primary: listen})
	if err != nil {
		t.Fatal(err)
	}
	rep, err := cl.Load(context.Background(), client.LoadConfig{Rate: 5_000, Count: 300, Seed: 1, Drain: 10 * time.Second}, nil)
	cl.Close()
	if err != nil || rep.Stats.Answered != 300 {
		t.Fatalf("load: %v %+v", err, rep)
	}
	// One datagram that is no frame: a bad-header drop on the unicast socket.
	garbage, err := net.Dial("udp", listen.String())
	if err != nil {
		t.Fatal(err)
	}
	_, _ = garbage.Write([]byte("garbage, not a frame"))
	garbage.Close()
	deadline := time.Now().Add(10 * time.Second)
	for n.Status().Unicast.Drops.BadHeader == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the garbage datagram was never counted")
		}
		time.Sleep(10 * time.Millisecond)
	}

	fams := scrape(t, srv.Addr())
	st := n.Status()
	for name, want := range map[string]float64{
		"seqbus_applied_seq":     float64(st.Applied),
		"seqbus_released_seq":    float64(st.Released),
		"seqbus_epoch":           1,
		"seqbus_lease_held":      b2f(st.Lease.Held),
		"seqbus_disk_stalled":    0, // a healthy disk
		"seqbus_journal_failed":  0,
		"seqbus_foreign_history": 0,
	} {
		if got, ok := value(t, fams, name, nil); !ok || got != want {
			t.Fatalf("%s = %v (present %v), want %v", name, got, ok, want)
		}
	}
	// The agent's section: its passes count, its longest stall is a level.
	if got, ok := value(t, fams, "seqbus_counter_total", map[string]string{"section": "agent", "name": "Passes"}); !ok || got == 0 {
		t.Fatalf("agent passes = %v (present %v), want the running agent's", got, ok)
	}
	if _, ok := value(t, fams, "seqbus_gauge", map[string]string{"section": "agent", "name": "LongestStallNs"}); !ok {
		t.Fatal("no seqbus_gauge{section=agent,name=LongestStallNs}")
	}
	if got, ok := value(t, fams, "seqbus_node_info", map[string]string{"role": "primary", "id": "1"}); !ok || got != 1 {
		t.Fatal("no seqbus_node_info{role=primary}")
	}
	if got, ok := value(t, fams, "seqbus_socket_drops_total", map[string]string{"socket": "unicast", "reason": "bad_header"}); !ok || got != 1 {
		t.Fatalf("socket drops bad_header = %v (%v), want 1", got, ok)
	}
	// Every number of status.json's node section is there under its name.
	b, _ := json.Marshal(st)
	var raw struct{ Node map[string]json.Number }
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	if err := dec.Decode(&raw); err != nil || len(raw.Node) == 0 {
		t.Fatalf("status.json node section: %v", err)
	}
	for name, v := range raw.Node {
		want, _ := v.Float64()
		got, ok := value(t, fams, "seqbus_counter_total", map[string]string{"section": "node", "name": name})
		if !ok {
			got, ok = value(t, fams, "seqbus_gauge", map[string]string{"section": "node", "name": name})
		}
		// Counters only grow between the status and the scrape.
		if !ok || got < want {
			t.Fatalf("node.%s: scraped %v (present %v), status.json %v", name, got, ok, want)
		}
	}
	if got, _ := value(t, fams, "seqbus_counter_total", map[string]string{"section": "node", "name": "Commands"}); got < 300 {
		t.Fatalf("node.Commands = %v, want >= 300", got)
	}
	if f := fams["seqbus_counter_total"]; f.GetType() != dto.MetricType_COUNTER {
		t.Fatalf("seqbus_counter_total has type %v", f.GetType())
	}
	h := fams["seqbus_release_latency_microseconds"]
	if h == nil || h.GetType() != dto.MetricType_HISTOGRAM || len(h.Metric) != 1 {
		t.Fatalf("latency histogram: %v", h)
	}
	hist := h.Metric[0].Histogram
	// The parser adds the +Inf bucket.
	if hist.GetSampleCount() < 300 || len(hist.Bucket) != len(LatencyBucketsUs)+1 {
		t.Fatalf("latency histogram count %d buckets %d", hist.GetSampleCount(), len(hist.Bucket))
	}
	for i := 1; i < len(LatencyBucketsUs); i++ {
		if hist.Bucket[i].GetCumulativeCount() < hist.Bucket[i-1].GetCumulativeCount() {
			t.Fatalf("buckets not cumulative: %v", hist.Bucket)
		}
	}
	last := hist.Bucket[len(LatencyBucketsUs)-1]
	if last.GetUpperBound() != 1_000_000 || last.GetCumulativeCount() > hist.GetSampleCount() {
		t.Fatalf("last bucket %v of %d", last, hist.GetSampleCount())
	}
	if fams["go_goroutines"] == nil || fams["process_open_fds"] == nil {
		t.Fatal("no Go runtime or process metrics")
	}
}

// The witness's lease and counters, drops by reason.
func TestWitnessMetricsScrape(t *testing.T) {
	defer goleak.VerifyNone(t)
	conn, err := bus.ListenUnicast(bus.UnicastConfig{Addr: netip.MustParseAddrPort("127.0.0.1:0")})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := witness.New(witness.DefaultConfig(), conn, t.TempDir())
	if err != nil {
		conn.Close()
		t.Fatal(err)
	}
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	ms, err := Serve("127.0.0.1:0", NewRegistry(WitnessCollector{srv}), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ms.Close()
	g, err := net.Dial("udp", conn.LocalAddr().String())
	if err != nil {
		t.Fatal(err)
	}
	_, _ = g.Write([]byte{1, 2, 3})
	_, _ = g.Write(make([]byte, 4096)) // longer than any lease frame: the socket cuts it
	g.Close()
	deadline := time.Now().Add(10 * time.Second)
	for st := srv.Stats(); st.Drops[witness.DropShort] == 0 || st.Drops[witness.DropTooLong] == 0; st = srv.Stats() {
		if time.Now().After(deadline) {
			t.Fatalf("the short and the long datagram were never counted: %v", st.Drops)
		}
		time.Sleep(10 * time.Millisecond)
	}
	fams := scrape(t, ms.Addr())
	if got, ok := value(t, fams, "seqbus_witness_drops_total", map[string]string{"reason": "short"}); !ok || got != 1 {
		t.Fatalf("witness drops short = %v (%v)", got, ok)
	}
	if got, ok := value(t, fams, "seqbus_witness_drops_total", map[string]string{"reason": "too-long"}); !ok || got != 1 {
		t.Fatalf("witness drops too-long = %v (%v)", got, ok)
	}
	if got := srv.Report().Drops["too-long"]; got != 1 {
		t.Fatalf("status file drops too-long = %d, want 1", got)
	}
	for _, name := range []string{"seqbus_witness_epoch", "seqbus_witness_holder", "seqbus_witness_lease_remaining_seconds"} {
		if _, ok := value(t, fams, name, nil); !ok {
			t.Fatalf("no %s", name)
		}
	}
	if _, ok := value(t, fams, "seqbus_witness_counter_total", map[string]string{"name": "Acquires"}); !ok {
		t.Fatal("no witness counter Acquires")
	}
}
