package loadclient

import (
	"bytes"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/seqbus/seqbus/client"
	"github.com/seqbus/seqbus/internal/cluster"
	"github.com/seqbus/seqbus/internal/syncbuf"
)

func TestClientSummaryTable(t *testing.T) {
	var b bytes.Buffer
	WriteSummary(&b, &cluster.ClientSummary{Sent: 1200, Answered: 1199, Unanswered: 1, Acks: 1100, Rejects: 99, Resent: 7, Failovers: 1,
		ElapsedSec: 2, RatePerSec: 599.5, LatencyUs: map[string]float64{"p50": 40, "p90": 60, "p99": 120, "p99.9": 300, "p99.99": 400, "p100": 500}})
	text := b.String()
	for _, want := range []string{"sent", "answered", "unanswered", "failovers", "1200", "1199", "600/s", "p99.9", "120", "500"} {
		if !strings.Contains(text, want) {
			t.Errorf("summary lacks %q:\n%s", want, text)
		}
	}
	if strings.Contains(text, "{") {
		t.Errorf("the table is JSON:\n%s", text)
	}
}

// TestClientProgressLine: on a terminal the client prints a line a second
// with its counts, primary, epoch and quantiles; off one, nothing.
func TestClientProgressLine(t *testing.T) {
	cl, err := client.Dial(client.Options{Core: client.Config{Session: 1}, Primary: netip.MustParseAddrPort("127.0.0.1:9")})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	lat := NewLatency()
	lat.Record(client.Result{LatencyNs: 250_000, Epoch: 3})
	lat.Flush()
	var off syncbuf.Buffer
	StartProgress(&off, false, cl, lat)()
	var on syncbuf.Buffer
	stop := StartProgress(&on, true, cl, lat)
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(on.String(), "\n") && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	stop()
	line := on.String()
	for _, want := range []string{"sent 0", "answered 0", "in flight 0", "resent 0", "primary 127.0.0.1:9", "epoch 3", "p50 250", "p99 250"} {
		if !strings.Contains(line, want) {
			t.Errorf("progress line lacks %q: %q", want, line)
		}
	}
	if off.String() != "" {
		t.Errorf("progress off a terminal: %q", off.String())
	}
}
