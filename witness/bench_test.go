package witness

import (
	"testing"

	"github.com/seqbus/seqbus/arbiter"
	"github.com/seqbus/seqbus/wire"
)

// BenchmarkHandleRenew: the steady state, the holder renewing with a new
// request ID each time.
func BenchmarkHandleRenew(b *testing.B) {
	s := newTestServer(b, &memStore{})
	s.handle(acquireFrame(b, 1, 1), nodeAddr, 0)
	pkt := renewFrame(b, 1, 2, 1)
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		pkt[wire.HeaderLen] = byte(i) // a new request ID
		reseal(pkt)
		if s.handle(pkt, nodeAddr, int64(i)) == nil {
			b.Fatal("no reply")
		}
	}
}

// BenchmarkHandleRenewStaleProposal: a renew carrying a proposal on a
// stale version, the proposal path without a write (an accepted proposal
// costs a persist, like BenchmarkHandleNewEpochFile).
func BenchmarkHandleRenewStaleProposal(b *testing.B) {
	s := newTestServer(b, &memStore{})
	s.handle(acquireFrame(b, 1, 1), nodeAddr, 0)
	s.handle(renewInSyncFrame(b, 1, 2, 1, 1, 2, 3), nodeAddr, 0)
	pkt := renewInSyncFrame(b, 1, 3, 1, 1, 3, 2)
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		pkt[wire.HeaderLen] = byte(i) // a new request ID
		reseal(pkt)
		if s.handle(pkt, nodeAddr, int64(i)) == nil {
			b.Fatal("no reply")
		}
	}
}

// BenchmarkHandleResend: a resend answered from the cache.
func BenchmarkHandleResend(b *testing.B) {
	s := newTestServer(b, &memStore{})
	pkt := acquireFrame(b, 1, 1)
	s.handle(pkt, nodeAddr, 0)
	b.ReportAllocs()
	for b.Loop() {
		if s.handle(pkt, nodeAddr, 1) == nil {
			b.Fatal("no reply")
		}
	}
}

// BenchmarkHandleQuery: a LEASE_QUERY.
func BenchmarkHandleQuery(b *testing.B) {
	s := newTestServer(b, &memStore{})
	pkt := queryFrame(1)
	b.ReportAllocs()
	for b.Loop() {
		s.handle(pkt, nodeAddr, 1)
	}
}

// BenchmarkHandleNewEpochFile: a new epoch granted with the real file
// store (temp file, two fsyncs, rename); dominated by the disk. The
// previous holder takes its lapsed lease back each time (a new epoch);
// under the in-sync rules another node would be refused.
func BenchmarkHandleNewEpochFile(b *testing.B) {
	s := newTestServer(b, &fileStore{dir: b.TempDir()})
	b.ReportAllocs()
	nowNs := int64(0)
	for i := 0; b.Loop(); i++ {
		nowNs += testLeaseNs
		if r := s.handle(acquireFrame(b, 1, uint64(i+1)), nodeAddr, nowNs); r == nil {
			b.Fatal("no grant")
		}
	}
}

// BenchmarkClientTickAndReply: the node side, encode a request and
// deliver a grant.
func BenchmarkClientTickAndReply(b *testing.B) {
	k, _ := arbiter.NewKeeper(1, testConfig().Arbiter)
	k.SetWantLead(true)
	c := NewClient(k, 0)
	grant := (&wire.Lease{Type: wire.TypeLeaseGrant, Origin: wire.Origin{Epoch: 1}, RequestID: 1, DurationNs: 1}).Append(nil)
	b.ReportAllocs()
	nowNs := int64(0)
	for b.Loop() {
		nowNs += testLeaseNs
		c.Tick(nowNs)
		c.OnDatagram(grant)
	}
}
