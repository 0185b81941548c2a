package client

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"
)

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
	cl, err := Dial(Options{Core: Config{Session: 1}, Primary: netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), dead.Port())})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	rep, err := cl.Load(context.Background(), LoadConfig{Rate: 1000, Count: 5, Drain: 200 * time.Millisecond}, nil)
	if !errors.Is(err, ErrNoAnswer) || !strings.Contains(err.Error(), "never answered") || !strings.Contains(err.Error(), dead.String()) {
		t.Fatalf("err = %v, want ErrNoAnswer naming %s", err, dead)
	}
	if rep.Sent != 5 || rep.Answered != 0 {
		t.Fatalf("report %+v: want 5 sent, 0 answered", rep)
	}
}
