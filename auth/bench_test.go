package auth

import (
	"fmt"
	"hash/crc32"
	"testing"

	"github.com/seqbus/seqbus/wire"
)

var frameSizes = []int{64, 256, 1400}

func warmRing(tb testing.TB) *Keyring {
	m := testMaster()
	r := NewKeyring(&m, 1)
	for _, e := range []uint64{1, 2, 3, 4} {
		if err := r.Install(e); err != nil {
			tb.Fatal(err)
		}
	}
	return r
}

// TestHotPathAllocs asserts zero allocations for everything a frame passes
// through, on success and on every rejection path, with a warm keyring.
func TestHotPathAllocs(t *testing.T) {
	r := warmRing(t)
	m := testMaster()
	peers, err := NewPeerRing(&m, 1, []uint32{1, 2, 3})
	if err != nil {
		t.Fatal(err)
	}
	mac := NewMAC(ClientKey(&m, 1))
	msg := make([]byte, 1400)
	dst := make([]byte, 0, len(msg)+TagLen)
	tag, _ := r.Sign(nil, msg, 4)
	bad := append([]byte(nil), tag...)
	bad[0] ^= 1
	var flt Filter
	var ef EpochFilter
	var counter uint64
	cases := []struct {
		name string
		fn   func()
	}{
		{"Keyring.Sign", func() { _, _ = r.Sign(dst[:0], msg, 4) }},
		{"Keyring.Verify good", func() { _ = r.Verify(msg, tag, 4) }},
		{"Keyring.Verify bad MAC", func() { _ = r.Verify(msg, bad, 4) }},
		{"Keyring.Verify unknown epoch", func() { _ = r.Verify(msg, tag, 99) }},
		{"Keyring.VerifyInstall held", func() { _ = r.VerifyInstall(msg, tag, 4) }},
		{"PeerRing.Sign", func() { _, _ = peers.Sign(dst[:0], msg, 2) }},
		{"PeerRing.Verify", func() { _ = peers.Verify(msg, tag, 3) }},
		{"MAC.Sign", func() { _ = mac.Sign(dst[:0], msg) }},
		{"MAC.Verify", func() { _ = mac.Verify(msg, tag) }},
		{"Filter.ValidateCounter", func() { counter += 3; flt.ValidateCounter(counter, CounterLimit) }},
		{"EpochFilter.Accept", func() { counter += 3; _ = ef.Accept(1, counter) }},
		{"EpochFilter.Accept replay", func() { _ = ef.Accept(0, 1) }},
	}
	for _, tc := range cases {
		if n := testing.AllocsPerRun(100, tc.fn); n != 0 {
			t.Errorf("%s: %v allocs per run, want 0", tc.name, n)
		}
	}
}

func BenchmarkSign(b *testing.B) {
	r := warmRing(b)
	for _, size := range frameSizes {
		b.Run(fmt.Sprintf("%dB", size), func(b *testing.B) {
			msg := make([]byte, size)
			dst := make([]byte, 0, size+TagLen)
			b.SetBytes(int64(size))
			b.ReportAllocs()
			for b.Loop() {
				dst, _ = r.Sign(dst[:0], msg, 3)
			}
		})
	}
}

func BenchmarkVerify(b *testing.B) {
	r := warmRing(b)
	for _, size := range frameSizes {
		b.Run(fmt.Sprintf("%dB", size), func(b *testing.B) {
			msg := make([]byte, size)
			tag, _ := r.Sign(nil, msg, 3)
			b.SetBytes(int64(size))
			b.ReportAllocs()
			for b.Loop() {
				if err := r.Verify(msg, tag, 3); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkCRC32C is the baseline a frame already pays (wire's checksum),
// to put the MAC's cost in proportion.
func BenchmarkCRC32C(b *testing.B) {
	table := crc32.MakeTable(crc32.Castagnoli)
	for _, size := range frameSizes {
		b.Run(fmt.Sprintf("%dB", size), func(b *testing.B) {
			msg := make([]byte, size)
			b.SetBytes(int64(size))
			b.ReportAllocs()
			var sink uint32
			for b.Loop() {
				sink += crc32.Checksum(msg, table)
			}
			_ = sink
		})
	}
}

// BenchmarkInstall is the cost of learning a new epoch's key (HKDF and
// hmac.New): why it is kept off the per-frame path.
func BenchmarkInstall(b *testing.B) {
	m := testMaster()
	r := NewKeyring(&m, 1)
	b.ReportAllocs()
	var e uint64
	for b.Loop() {
		e++
		if err := r.Install(e); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkFilterValidateCounter(b *testing.B) {
	var f Filter
	b.ReportAllocs()
	var c uint64
	for b.Loop() {
		c++
		f.ValidateCounter(c^1, CounterLimit) // mild reordering
	}
}

// BenchmarkFramesSealVerify is a node's whole per-frame MAC work on the
// hot path (Frames.Seal on the sender, Frames.Verify on the receiver),
// for a DATA frame of its own epoch and for a RETRANSMIT of an older
// epoch's records (signed under the current epoch): both must stay at
// 0 allocations once the epoch's key is held.
func BenchmarkFramesSealVerify(b *testing.B) {
	master := framesMaster(b, 1)
	for _, tc := range []struct {
		name  string
		typ   wire.Type
		epoch uint64
	}{{"data", wire.TypeData, 5}, {"retransmit-older", wire.TypeRetransmit, 2}} {
		b.Run(tc.name, func(b *testing.B) {
			sender := NewFrames(master, testStream, 1)
			receiver := NewFrames(master, testStream, testNode)
			hb := parse(b, sender.Seal(nil, frameOf(b, wire.TypeHeartbeat, 5, 1))) // the sender leads epoch 5
			if v := receiver.Verify(&hb, 4, 0); v != VerifiedNewEpoch {            // the receiver follows it
				b.Fatalf("verdict %d", v)
			}
			plain := frameOf(b, tc.typ, tc.epoch, 10)
			dst := make([]byte, 0, len(plain)+wire.TagLen)
			b.SetBytes(int64(len(plain)))
			b.ReportAllocs()
			for b.Loop() {
				dst = sender.Seal(dst[:0], plain)
				f, _, err := wire.Parse(dst)
				if err != nil {
					b.Fatal(err)
				}
				if v := receiver.Verify(&f, 5, 0); !v.OK() {
					b.Fatalf("verdict %d", v)
				}
			}
		})
	}
}
