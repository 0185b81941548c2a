package auth

import (
	"errors"
	"slices"
	"testing"
)

func sortedEpochs(r *Keyring) []uint64 {
	e := r.Epochs(nil)
	slices.Sort(e)
	return e
}

func TestKeyringBound(t *testing.T) {
	r := NewKeyring(new(testMaster()), 7)
	if r.Stream() != 7 || r.Len() != 0 {
		t.Fatalf("new ring: stream %d len %d", r.Stream(), r.Len())
	}
	steps := []struct {
		name    string
		install uint64
		want    error
		epochs  []uint64
	}{
		{"first", 5, nil, []uint64{5}},
		{"again is a no-op", 5, nil, []uint64{5}},
		{"lower while not full", 3, nil, []uint64{3, 5}},
		{"higher", 6, nil, []uint64{3, 5, 6}},
		{"fills the ring", 8, nil, []uint64{3, 5, 6, 8}},
		{"full: newer evicts the lowest", 9, nil, []uint64{5, 6, 8, 9}},
		{"full: older than all is refused", 4, ErrUnknownKey, []uint64{5, 6, 8, 9}},
		{"full: equal to lowest is held", 5, nil, []uint64{5, 6, 8, 9}},
		{"full: gap above lowest evicts lowest", 7, nil, []uint64{6, 7, 8, 9}},
	}
	for _, s := range steps {
		err := r.Install(s.install)
		if !errors.Is(err, s.want) || (s.want == nil) != (err == nil) {
			t.Fatalf("%s: Install(%d) = %v, want %v", s.name, s.install, err, s.want)
		}
		if got := sortedEpochs(r); !slices.Equal(got, s.epochs) || r.Len() > KeyringEpochs {
			t.Fatalf("%s: epochs %v, want %v", s.name, got, s.epochs)
		}
	}
	if n := r.RetireBelow(8); n != 2 || !slices.Equal(sortedEpochs(r), []uint64{8, 9}) {
		t.Fatalf("RetireBelow(8) dropped %d, left %v", n, sortedEpochs(r))
	}
	if n := r.RetireBelow(8); n != 0 {
		t.Fatalf("second RetireBelow(8) dropped %d", n)
	}
	if err := r.Install(2); err != nil || !r.Has(2) {
		t.Fatalf("after retiring, an old epoch fits again: %v", err)
	}
}

func TestKeyringSignVerify(t *testing.T) {
	m := testMaster()
	send := NewKeyring(&m, 1)
	recv := NewKeyring(&m, 1)
	otherStream := NewKeyring(&m, 2)
	for _, r := range []*Keyring{send, recv, otherStream} {
		for _, e := range []uint64{1, 2} {
			if err := r.Install(e); err != nil {
				t.Fatal(err)
			}
		}
	}
	msg := []byte("frame")
	tag1, err := send.Sign(nil, msg, 1)
	if err != nil {
		t.Fatal(err)
	}
	if out, err := send.Sign([]byte("x"), msg, 3); !errors.Is(err, ErrUnknownKey) || string(out) != "x" {
		t.Fatalf("Sign under an unheld epoch = %q, %v; want dst unchanged, ErrUnknownKey", out, err)
	}
	tests := []struct {
		name  string
		ring  *Keyring
		epoch uint64
		want  error
	}{
		{"same epoch, another ring of the stream", recv, 1, nil},
		{"same ring", send, 1, nil},
		{"another held epoch", recv, 2, ErrBadMAC},
		{"unheld epoch", recv, 3, ErrUnknownKey},
		{"another stream", otherStream, 1, ErrBadMAC},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.ring.Verify(msg, tag1, tc.epoch); !errors.Is(err, tc.want) || (tc.want == nil) != (err == nil) {
				t.Fatalf("Verify = %v, want %v", err, tc.want)
			}
		})
	}
	if recv.Has(3) {
		t.Fatal("Verify installed a key")
	}
}

func TestKeyringVerifyInstall(t *testing.T) {
	m := testMaster()
	primary := NewKeyring(&m, 1)
	if err := primary.Install(10); err != nil {
		t.Fatal(err)
	}
	msg := []byte("NEW_EPOCH 10")
	tag, _ := primary.Sign(nil, msg, 10)

	standby := NewKeyring(&m, 1)
	for _, e := range []uint64{6, 7, 8, 9} {
		if err := standby.Install(e); err != nil {
			t.Fatal(err)
		}
	}
	if err := standby.Verify(msg, tag, 10); !errors.Is(err, ErrUnknownKey) {
		t.Fatalf("Verify before learning the epoch = %v, want ErrUnknownKey", err)
	}
	forged := append([]byte(nil), tag...)
	forged[0] ^= 1
	if err := standby.VerifyInstall(msg, forged, 10); !errors.Is(err, ErrBadMAC) || standby.Has(10) ||
		!slices.Equal(sortedEpochs(standby), []uint64{6, 7, 8, 9}) {
		t.Fatalf("forged VerifyInstall = %v, ring %v: a forgery changed the ring", err, sortedEpochs(standby))
	}
	if err := standby.VerifyInstall(msg, tag, 5); !errors.Is(err, ErrUnknownKey) {
		t.Fatalf("VerifyInstall older than a full ring = %v, want ErrUnknownKey", err)
	}
	if err := standby.VerifyInstall(msg, tag, 10); err != nil || !slices.Equal(sortedEpochs(standby), []uint64{7, 8, 9, 10}) {
		t.Fatalf("genuine VerifyInstall = %v, ring %v", err, sortedEpochs(standby))
	}
	if err := standby.VerifyInstall(msg, forged, 10); !errors.Is(err, ErrBadMAC) {
		t.Fatalf("VerifyInstall of a held epoch still verifies: %v", err)
	}
	if err := standby.Verify(msg, tag, 10); err != nil {
		t.Fatalf("Verify after learning: %v", err)
	}
}

func TestPeerRing(t *testing.T) {
	m := testMaster()
	w, err := NewPeerRing(&m, 4, []uint32{1, 2})
	if err != nil || w.Stream() != 4 || !w.Has(1) || w.Has(3) {
		t.Fatalf("NewPeerRing: %v", err)
	}
	node1 := NewMAC(LeaseKey(&m, 4, 1))
	req := []byte("LEASE_RENEW from 1")
	tag := node1.Sign(nil, req)
	if err := w.Verify(req, tag, 1); err != nil {
		t.Fatalf("witness verifies node 1: %v", err)
	}
	if err := w.Verify(req, tag, 2); !errors.Is(err, ErrBadMAC) {
		t.Fatalf("node 1's tag under node 2's key = %v, want ErrBadMAC", err)
	}
	if err := w.Verify(req, tag, 3); !errors.Is(err, ErrUnknownKey) {
		t.Fatalf("unconfigured node = %v, want ErrUnknownKey", err)
	}
	grant := []byte("LEASE_GRANT")
	out, err := w.Sign(nil, grant, 2)
	if err != nil {
		t.Fatal(err)
	}
	if err := node1.Verify(grant, out); !errors.Is(err, ErrBadMAC) {
		t.Fatal("a grant signed for node 2 verified at node 1")
	}
	if err := NewMAC(LeaseKey(&m, 4, 2)).Verify(grant, out); err != nil {
		t.Fatalf("node 2 verifies its grant: %v", err)
	}
	if _, err := w.Sign(nil, grant, 3); !errors.Is(err, ErrUnknownKey) {
		t.Fatalf("Sign for unconfigured node = %v", err)
	}
	if _, err := NewPeerRing(&m, 4, []uint32{1, 1}); !errors.Is(err, ErrUnknownKey) {
		t.Fatalf("duplicate node: %v", err)
	}
	if _, err := NewPeerRing(&m, 4, make([]uint32, MaxPeers+1)); !errors.Is(err, ErrUnknownKey) {
		t.Fatalf("over MaxPeers: %v", err)
	}
}
