package etcdarb

import (
	"testing"

	"github.com/seqbus/seqbus/arbiter"
)

// FuzzDecodeState feeds arbitrary values and revisions for the three keys
// (what a foreign writer, or a corrupted etcd, could store). Decoding must
// never panic, and whatever it accepts must keep the invariants the rules
// rely on: a valid set without the last holder, and a live leader that is
// the last holder at the term's revision.
func FuzzDecodeState(f *testing.F) {
	s := set(2, 3)
	f.Add([]byte("1"), []byte("1"), encodeInSync(2, &s, 0), int64(5), int64(5), int64(7), int64(6), true, true, true)
	f.Add([]byte(""), []byte("1"), []byte(`{"version":1,"members":[]}`), int64(0), int64(5), int64(0), int64(5), false, true, true)
	f.Add([]byte("x"), []byte("0"), []byte(`{"version":1,"members":[3,2]}`), int64(-1), int64(0), int64(0), int64(0), true, true, true)
	f.Fuzz(func(t *testing.T, lv, tv, iv []byte, lrev, trev, lease, irev int64, lp, tp, ip bool) {
		st, err := decodeState(
			kv{present: lp, value: lv, createRev: lrev, lease: lease},
			kv{present: tp, value: tv, modRev: trev},
			kv{present: ip, value: iv, modRev: irev},
		)
		if err != nil {
			return
		}
		m := st.inSync.Members
		if _, ok := arbiter.MakeInSyncSet(m.Slice(), st.inSync.LastHolder); !ok && m.N > 0 {
			t.Fatalf("accepted an invalid set %v with last holder %d", m.Slice(), st.inSync.LastHolder)
		}
		if st.leader != arbiter.NodeNone && (st.leader != st.inSync.LastHolder || st.leaderRev != st.termRev || st.leaderLease == 0) {
			t.Fatalf("accepted leader %+v", st)
		}
		if ip {
			v, got, h, err := decodeInSync(encodeInSync(st.inSync.Version, &m, st.inSync.History))
			if err != nil || v != st.inSync.Version || got != m || h != st.inSync.History {
				t.Fatalf("re-encoding the accepted set: %v", err)
			}
		}
	})
}
