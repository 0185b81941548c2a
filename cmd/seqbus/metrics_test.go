package main

import (
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// A bad --metrics-addr is refused with exit 2, naming the flag, before
// the node or the witness starts.
func TestMetricsAddrBadValueExits2(t *testing.T) {
	dir := t.TempDir()
	for _, args := range [][]string{
		{"node", "--id", "1", "--dir", dir, "--metrics-addr", "nonsense:port"},
		{"witness", "--dir", dir, "--metrics-addr", "1.2.3.4:99999"},
	} {
		_, errOut, code := runSeqbus(t, args...)
		if code != 2 || !strings.Contains(errOut, "--metrics-addr") {
			t.Fatalf("%v: exit %d, want 2 naming the flag:\n%s", args, code, errOut)
		}
	}
}

// A node process started with --metrics-addr serves /metrics.
func TestNodeProcessServesMetrics(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	startStaticPrimary(t, "--metrics-addr", addr)
	var body string
	deadline := time.Now().Add(20 * time.Second)
	for {
		resp, err := http.Get("http://" + addr + "/metrics")
		if err == nil {
			p := expfmt.NewTextParser(model.UTF8Validation)
			fams, perr := p.TextToMetricFamilies(resp.Body)
			resp.Body.Close()
			if perr != nil {
				t.Fatalf("parse: %v", perr)
			}
			if f := fams["seqbus_node_info"]; f != nil && fams["seqbus_counter_total"] != nil && fams["seqbus_release_latency_microseconds"] != nil {
				return
			}
			body = "families: " + strings.Join(familyNames(fams), " ")
		}
		if time.Now().After(deadline) {
			t.Fatalf("no node metrics at %s: %v %s", addr, err, body)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func familyNames[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}
