package mdfeed

import (
	"encoding/binary"
	"testing"

	"github.com/seqbus/seqbus/wire"
)

// FuzzMDRequest drives a feed with a byte-coded sequence of adds,
// heartbeats, releases, discarded suffixes and requests, well formed or
// not. Whatever comes
// in: no panic, every request is counted and answered by MD_REPLAY frames
// (contiguous from First, never above Released or the state's MD seq),
// by exactly one MD_STATUS and one more Refused, or by nothing while a
// snapshot waits; every frame parses; a malformed request is refused and
// counted as Malformed.
func FuzzMDRequest(f *testing.F) {
	seed := func(ops ...[]byte) []byte {
		var b []byte
		for _, o := range ops {
			b = append(b, o...)
		}
		return b
	}
	op := func(code, from, kind byte, first uint64, count uint32, dt byte) []byte {
		b := []byte{code, from, kind}
		b = binary.LittleEndian.AppendUint64(b, first)
		b = binary.LittleEndian.AppendUint32(b, count)
		return append(b, dt)
	}
	f.Add(seed(op(0, 0, 0, 40, 0, 0), op(1, 0, 0, 30, 0, 0), op(3, 1, 1, 5, 10, 1)))
	f.Add(seed(op(0, 0, 0, 40, 0, 0), op(3, 1, 2, 0, 0, 1), op(1, 0, 0, 40, 0, 0)))
	f.Add(seed(op(0, 0, 0, 400, 0, 0), op(2, 0, 0, 400, 0, 0), op(3, 1, 1, 1, 5000, 0), op(3, 1, 0, 0, 0, 0)))
	f.Add(seed(op(3, 9, 1, 0, 0, 255), op(3, 9, 7, 1, 1, 255), op(4, 0, 0, 0, 0, 0)))
	f.Add(seed(op(0, 0, 0, 40, 0, 0), op(5, 0, 0, 30, 0, 0), op(1, 0, 0, 40, 0, 0), op(3, 1, 1, 25, 20, 1)))
	f.Add(seed(op(0, 0, 0, 40, 0, 0), op(5, 0, 0, 30, 0, 0), op(2, 0, 0, 100, 0, 0)))
	f.Add((&wire.MDRequest{Kind: wire.MDRequestRange, First: 1, Count: 3}).Append(nil))
	f.Fuzz(fuzzBody)
}

func fuzzBody(t *testing.T, data []byte) {
	{
		feed := newFeed(t, Config{RingUpdates: 64, ReserveUpdates: 8, HeartbeatEveryNs: 10})
		bx := &books{md: 0, levels: 30}
		var now int64
		var nextMD uint64 = 1
		// A whole datagram as an MD_REQUEST, as a node receives one.
		if fr, _, err := wire.Parse(data); err == nil && fr.Type == wire.TypeMDRequest {
			req, err := wire.DecodeMDRequest(&fr)
			if err != nil {
				t.Fatalf("a parsed MD_REQUEST does not decode: %v", err)
			}
			check(t, feed, 1, req, now, bx)
			return
		}
		const opLen = 16
		for len(data) >= opLen {
			o := data[:opLen]
			data = data[opLen:]
			first := binary.LittleEndian.Uint64(o[3:])
			now += int64(o[15]) * RefillNs / 4
			switch o[0] % 6 {
			case 0: // the state machine applies updates up to MD seq first%512
				for to := first % 512; nextMD <= to; nextMD++ {
					feed.Add(nextMD/2+1, update(nextMD))
					bx.md = nextMD
				}
			case 1: // a heartbeat says released up to first
				feed.OnHeartbeat(heartbeatFrame(t, first%512), now)
				drain(t, feed)
			case 2: // the primary releases up to command first
				if !feed.Full() {
					for _, s := range publishAll(t, feed, first, bx.md) {
						for _, md := range s.seqs {
							if md > bx.md {
								t.Fatalf("published md %d above the state's %d", md, bx.md)
							}
						}
					}
				}
				feed.HeartbeatDue(first, now)
				feed.ServeSnapshot(now)
				drain(t, feed)
			case 3:
				req := wire.MDRequest{Kind: wire.MDRequestKind(o[2] % 4), First: first % 600, Count: binary.LittleEndian.Uint32(o[11:]) % 5000}
				check(t, feed, addr(o[1]%8), req, now, bx)
			case 4:
				feed.Promoted(bx.md)
			case 5: // a discarded suffix: the state is rebuilt to a fork point, the ring keeps what was above it
				bx.md = min(bx.md, first%512)
				nextMD = bx.md + 1
			}
		}
	}
}

// check sends one request and checks its answer.
func check(t *testing.T, f *Feed[addr], from addr, req wire.MDRequest, now int64, bx *books) {
	t.Helper()
	before := f.Stats()
	f.Request(from, req, now, bx)
	sentFrames := drain(t, f)
	after := f.Stats()
	if after.Requests != before.Requests+1 {
		t.Fatalf("request not counted")
	}
	if !wellFormed(&req) {
		if after.Malformed != before.Malformed+1 || after.Refused != before.Refused+1 || len(sentFrames) != 1 || sentFrames[0].st.Code != wire.MDUnavailable {
			t.Fatalf("malformed %+v: sent %+v, stats %+v", req, sentFrames, after)
		}
		return
	}
	refused := after.Refused - before.Refused
	switch {
	case refused == 1:
		if len(sentFrames) != 1 || sentFrames[0].typ != wire.TypeMDStatus || sentFrames[0].to != from {
			t.Fatalf("refused with %+v", sentFrames)
		}
	case refused > 1:
		t.Fatalf("one request refused %d times", refused)
	case req.Kind == wire.MDRequestRange:
		want := req.First
		for _, s := range sentFrames {
			if s.typ != wire.TypeMDReplay || s.to != from {
				t.Fatalf("range answered with %s to %d", s.typ, s.to)
			}
			for _, md := range s.seqs {
				if md != want || md > after.Released || md > bx.md {
					t.Fatalf("served md %d (want %d, released %d, state %d)", md, want, after.Released, bx.md)
				}
				want++
			}
		}
		if want == req.First || after.Served-before.Served != want-req.First {
			t.Fatalf("served %d updates, counted %d", want-req.First, after.Served-before.Served)
		}
	default:
		for _, s := range sentFrames {
			if s.typ != wire.TypeMDSnapshot || s.snap.MDSeq > after.Released {
				t.Fatalf("snapshot answered with %s at md %d, released %d", s.typ, s.snap.MDSeq, after.Released)
			}
		}
	}
}
