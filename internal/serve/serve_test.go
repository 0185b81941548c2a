package serve

import (
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/seqbus/seqbus/nodeconfig"
	"github.com/seqbus/seqbus/witness"
)

func freeUDP(t *testing.T) netip.AddrPort {
	t.Helper()
	c, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	return c.LocalAddr().(*net.UDPAddr).AddrPort()
}

func freeTCP(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// TestNodeMetricsPortTaken: a taken metrics port fails the start before
// the node opens anything (its directory is never created).
func TestNodeMetricsPortTaken(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	dir := filepath.Join(t.TempDir(), "node1")
	cfg := nodeconfig.Config{ID: 1, Dir: dir, Log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	waited := false
	err = Node(cfg, NodeOptions{MetricsAddr: ln.Addr().String()}, func() { waited = true })
	if err == nil || !strings.Contains(err.Error(), "metrics") || waited {
		t.Fatalf("Node with a taken metrics port: %v (waited %v)", err, waited)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Fatalf("the node opened its directory: %v", err)
	}
}

// TestWitness: the witness serves (its status written, its metrics
// scraped) until wait returns, then closes.
func TestWitness(t *testing.T) {
	dir := t.TempDir()
	cfg := witness.DefaultConfig()
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	maddr := freeTCP(t)
	var body string
	wait := func() {
		deadline := time.Now().Add(10 * time.Second)
		for time.Now().Before(deadline) {
			if _, err := os.Stat(filepath.Join(dir, "status.json")); err == nil {
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
		resp, err := http.Get("http://" + maddr + "/metrics")
		if err != nil {
			t.Error(err)
			return
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		body = string(b)
	}
	if err := Witness(cfg, freeUDP(t), dir, maddr, time.Second, wait); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "status.json")); err != nil {
		t.Fatalf("no status: %v", err)
	}
	if !strings.Contains(body, "seqbus_witness") {
		t.Fatalf("metrics lack the witness's:\n%.500s", body)
	}
	if _, err := http.Get("http://" + maddr + "/metrics"); err == nil {
		t.Fatal("metrics still served after the witness closed")
	}
}
