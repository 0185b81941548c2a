package arbiter

import "testing"

func BenchmarkArbiterAcquireExtend(b *testing.B) {
	a, _ := NewArbiter(DefaultConfig())
	b.ReportAllocs()
	nowNs := int64(0)
	for b.Loop() {
		a.Acquire(1, nowNs)
		nowNs++
	}
}

func BenchmarkArbiterAcquireDenied(b *testing.B) {
	a, _ := NewArbiter(DefaultConfig())
	a.Acquire(1, 0)
	b.ReportAllocs()
	for b.Loop() {
		a.Acquire(2, 1)
	}
}

func BenchmarkArbiterRenew(b *testing.B) {
	a, _ := NewArbiter(DefaultConfig())
	epoch := a.Acquire(1, 0).Epoch
	b.ReportAllocs()
	nowNs := int64(0)
	for b.Loop() {
		a.Renew(1, epoch, nowNs)
		nowNs++
	}
}

var sinkBool bool

func BenchmarkMayLead(b *testing.B) {
	v := LeaseView{Epoch: 1, SentAtNs: 0, DurationNs: DefaultLeaseDurationNs}
	b.ReportAllocs()
	nowNs := int64(0)
	for b.Loop() {
		sinkBool = MayLead(v, nowNs, DefaultMarginNs)
		nowNs++
	}
}

func BenchmarkKeeperMayLead(b *testing.B) {
	k, _ := NewKeeper(1, DefaultConfig())
	k.SetWantLead(true)
	req, _ := k.Tick(0)
	k.OnGrant(req.ID, 1, DefaultLeaseDurationNs)
	b.ReportAllocs()
	nowNs := int64(0)
	for b.Loop() {
		sinkBool = k.MayLead(nowNs)
		nowNs++
	}
}

func BenchmarkKeeperTickGrant(b *testing.B) {
	k, _ := NewKeeper(1, DefaultConfig())
	k.SetWantLead(true)
	b.ReportAllocs()
	nowNs := int64(0)
	for b.Loop() {
		if req, ok := k.Tick(nowNs); ok {
			k.OnGrant(req.ID, 1, DefaultLeaseDurationNs)
		}
		nowNs += DefaultRenewIntervalNs
	}
}

func BenchmarkFenceAccept(b *testing.B) {
	var f Fence
	b.ReportAllocs()
	for b.Loop() {
		if f.Accept(7) != nil {
			b.Fatal("refused")
		}
	}
}

func BenchmarkFenceRefuses(b *testing.B) {
	var f Fence
	_ = f.Accept(5)
	b.ReportAllocs()
	for b.Loop() {
		sinkBool = f.Refuses(4)
	}
}
