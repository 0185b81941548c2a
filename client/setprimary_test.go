package client

import (
	"net/netip"
	"testing"
)

// A caller that follows another arbiter (etcd) points the client with
// SetPrimary: a move to another address counts as a failover, as one the
// witness reports; the same address again does not.
func TestSetPrimaryCountsFailovers(t *testing.T) {
	cl, err := Dial(Options{Core: Config{Session: 3}, Primary: netip.MustParseAddrPort("127.0.0.1:9"), Poll: true})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	cl.SetPrimary(netip.MustParseAddrPort("127.0.0.1:9"))
	if n := cl.Failovers(); n != 0 {
		t.Fatalf("the same primary again: %d failovers, want 0", n)
	}
	cl.SetPrimary(netip.MustParseAddrPort("127.0.0.1:10"))
	if n := cl.Failovers(); n != 1 {
		t.Fatalf("a new primary: %d failovers, want 1", n)
	}
}
