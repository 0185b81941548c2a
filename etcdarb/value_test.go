package etcdarb

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/seqbus/seqbus/arbiter"
)

func set(ids ...arbiter.NodeID) arbiter.InSyncSet {
	s, ok := arbiter.MakeInSyncSet(ids, arbiter.NodeNone)
	if !ok {
		panic("bad test set")
	}
	return s
}

func TestTTLRounding(t *testing.T) {
	ms := int64(time.Millisecond)
	for _, tc := range []struct {
		leaseNs, ttlS, etcdTTLS, grantNs int64
	}{
		{1000 * ms, 1, 1, 1000 * ms},
		{1000 * ms, 1, 2, 1000 * ms}, // etcd raised the TTL to its minimum: we keep ours
		{1500 * ms, 2, 2, 1500 * ms}, // rounded up: etcd keeps it longer than the node believes
		{200 * ms, 1, 1, 200 * ms},   // below a second: TTL 1, the view stays 200 ms
		{1, 1, 1, 1},
		{3000 * ms, 3, 3, 3000 * ms},
		{3000 * ms, 3, 0, 0},               // no lease
		{3000 * ms, 3, 1 << 62, 3000 * ms}, // no overflow
		{2500 * ms, 3, 2, 2000 * ms},       // a TTL below ours (never from etcd) wins
	} {
		if got := ttlSeconds(tc.leaseNs); got != tc.ttlS {
			t.Errorf("ttlSeconds(%d) = %d, want %d", tc.leaseNs, got, tc.ttlS)
		}
		if got := grantDurationNs(tc.etcdTTLS, tc.leaseNs); got != tc.grantNs {
			t.Errorf("grantDurationNs(%d s, %d) = %d, want %d", tc.etcdTTLS, tc.leaseNs, got, tc.grantNs)
		}
	}
}

func TestConfig(t *testing.T) {
	good := Config{Endpoints: []string{"http://127.0.0.1:2379"}, Node: 1, LeaseDurationNs: second}
	c, err := good.withDefaults()
	if err != nil || c.Prefix != DefaultPrefix || c.DialTimeoutNs != DefaultDialTimeoutNs || c.RequestTimeoutNs != DefaultRequestTimeoutNs {
		t.Fatalf("defaults: %+v %v", c, err)
	}
	for name, mut := range map[string]func(*Config){
		"no endpoints":   func(c *Config) { c.Endpoints = nil },
		"node none":      func(c *Config) { c.Node = arbiter.NodeNone },
		"zero lease":     func(c *Config) { c.LeaseDurationNs = 0 },
		"relative":       func(c *Config) { c.Prefix = "seqbus" },
		"trailing slash": func(c *Config) { c.Prefix = "/seqbus/" },
		"negative dial":  func(c *Config) { c.DialTimeoutNs = -1 },
	} {
		bad := good
		mut(&bad)
		if _, err := bad.withDefaults(); !errors.Is(err, ErrConfig) {
			t.Errorf("%s: %v, want ErrConfig", name, err)
		}
		k, _ := arbiter.NewKeeper(1, arbiter.DefaultConfig())
		if _, err := New(bad, k); !errors.Is(err, ErrConfig) {
			t.Errorf("New with %s: %v, want ErrConfig", name, err)
		}
	}
	if _, err := New(good, nil); !errors.Is(err, ErrConfig) {
		t.Errorf("New with a nil keeper: %v", err)
	}
	if k := makeKeys("/p", 7); k.leader != "/p/7/leader" || k.term != "/p/7/term" || k.inSync != "/p/7/insync" {
		t.Errorf("keys: %+v", k)
	}
}

func TestInSyncCodec(t *testing.T) {
	for _, s := range []arbiter.InSyncSet{set(), set(2), set(1, 3, 4, 5, 6, 7, 8, 4294967295)} {
		for _, history := range []uint64{0, 0xfeedface12345678} {
			b := encodeInSync(9, &s, history)
			v, got, h, err := decodeInSync(b)
			if err != nil || v != 9 || got != s || h != history {
				t.Errorf("round trip %v, history %#x: %s -> %d %v %#x %v", s.Slice(), history, b, v, got.Slice(), h, err)
			}
		}
	}
	for _, bad := range []string{
		``, `{}`, `{"version":0,"members":[]}`, `{"version":1,"members":[2,1]}`,
		`{"version":1,"members":[1,1]}`, `{"version":1,"members":[0]}`,
		`{"version":1,"members":[1,2,3,4,5,6,7,8,9]}`, `{"version":1,"members":[4294967296]}`,
		`{"version":1,"members":[],"extra":1}`, `{"version":1,"members":[]} {}`,
		`{"version":-1,"members":[]}`, `{"version":1,"members":[],"history":-1}`, `{"version":1,"members":[],"history":"ab"}`, `[1]`, `{"version":1,"members":[1]` + string(make([]byte, 300)) + `}`,
	} {
		if _, _, _, err := decodeInSync([]byte(bad)); !errors.Is(err, ErrCorruptValue) {
			t.Errorf("decodeInSync(%q) = %v, want ErrCorruptValue", bad, err)
		}
	}
	for _, bad := range []string{"", "0", "-1", "4294967296", "1 ", "x", "01x"} {
		if _, err := decodeNode([]byte(bad)); !errors.Is(err, ErrCorruptValue) {
			t.Errorf("decodeNode(%q) = %v", bad, err)
		}
	}
	if n, err := decodeNode([]byte(encodeNode(4294967295))); err != nil || n != 4294967295 {
		t.Errorf("node round trip: %d %v", n, err)
	}
}

func inSyncKV(version uint64, modRev int64, ids ...arbiter.NodeID) kv {
	s := set(ids...)
	return kv{present: true, value: encodeInSync(version, &s, 0), modRev: modRev}
}

func TestDecodeState(t *testing.T) {
	leader := func(n string, rev, lease int64) kv {
		return kv{present: true, value: []byte(n), createRev: rev, modRev: rev, lease: lease}
	}
	term := func(n string, rev int64) kv { return kv{present: true, value: []byte(n), modRev: rev} }
	for _, tc := range []struct {
		name              string
		leader, term, ins kv
		want              state
		corrupt           bool
	}{
		{name: "fresh"},
		{name: "held", leader: leader("1", 5, 77), term: term("1", 5), ins: inSyncKV(2, 6, 2, 3),
			want: state{leader: 1, leaderRev: 5, leaderLease: 77, termRev: 5, inSyncRev: 6, inSync: InSync{Version: 2, Members: set(2, 3), LastHolder: 1}}},
		{name: "lapsed", term: term("1", 5), ins: inSyncKV(2, 6, 2),
			want: state{termRev: 5, inSyncRev: 6, inSync: InSync{Version: 2, Members: set(2), LastHolder: 1}}},
		{name: "leader without lease", leader: leader("1", 5, 0), term: term("1", 5), ins: inSyncKV(1, 5), corrupt: true},
		{name: "leader not last holder", leader: leader("2", 5, 7), term: term("1", 5), ins: inSyncKV(1, 5), corrupt: true},
		{name: "leader older than term", leader: leader("1", 4, 7), term: term("1", 5), ins: inSyncKV(1, 5), corrupt: true},
		{name: "set holds last holder", term: term("1", 5), ins: inSyncKV(1, 5, 1), corrupt: true},
		{name: "set without term", ins: inSyncKV(1, 5), corrupt: true},
		{name: "term without set", term: term("1", 5), corrupt: true},
		{name: "bad leader value", leader: leader("one", 5, 7), term: term("1", 5), ins: inSyncKV(1, 5), corrupt: true},
		{name: "bad term value", term: term("0", 5), ins: inSyncKV(1, 5), corrupt: true},
	} {
		got, err := decodeState(tc.leader, tc.term, tc.ins)
		if tc.corrupt {
			if !errors.Is(err, ErrCorruptValue) {
				t.Errorf("%s: %+v %v, want ErrCorruptValue", tc.name, got, err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("%s: got %+v %v, want %+v", tc.name, got, err, tc.want)
		}
	}
}

func TestMayAcquire(t *testing.T) {
	fresh := state{}
	lapsed := state{termRev: 5, inSyncRev: 6, inSync: InSync{Version: 2, Members: set(2, 3), LastHolder: 1}}
	alone := state{termRev: 5, inSyncRev: 5, inSync: InSync{Version: 1, LastHolder: 1}}
	for _, tc := range []struct {
		name string
		s    state
		node arbiter.NodeID
		want bool
	}{
		{"fresh: anyone", fresh, 9, true},
		{"member", lapsed, 2, true},
		{"other member", lapsed, 3, true},
		{"last holder", lapsed, 1, true},
		{"non-member", lapsed, 4, false},
		{"empty set: last holder", alone, 1, true},
		{"empty set: nobody else", alone, 2, false},
	} {
		if got := mayAcquire(&tc.s, tc.node); got != tc.want {
			t.Errorf("%s: mayAcquire = %v", tc.name, got)
		}
	}
	v, m := nextTermInSync(&lapsed, 2)
	if v != 3 || m != set(3) {
		t.Errorf("next term by 2: version %d members %v, want 3 [3]", v, m.Slice())
	}
	v, m = nextTermInSync(&lapsed, 1)
	if v != 3 || m != set(2, 3) {
		t.Errorf("next term by the last holder: version %d members %v", v, m.Slice())
	}
	v, m = nextTermInSync(&fresh, 1)
	if v != 1 || m.N != 0 {
		t.Errorf("first term: version %d members %v", v, m.Slice())
	}
}

func TestJudgeProposal(t *testing.T) {
	s := state{leader: 1, leaderRev: 5, termRev: 5, inSync: InSync{Version: 4, Members: set(2), LastHolder: 1}}
	prop := func(base uint64, ids ...arbiter.NodeID) *arbiter.InSyncProposal {
		p := &arbiter.InSyncProposal{BaseVersion: base, N: len(ids)}
		copy(p.Members[:], ids)
		return p
	}
	for _, tc := range []struct {
		name string
		p    *arbiter.InSyncProposal
		want proposalResult
		set  arbiter.InSyncSet
	}{
		{"change", prop(4, 3, 2), proposalChange, set(2, 3)},
		{"drop all", prop(4), proposalChange, set()},
		{"same", prop(4, 2), proposalSame, set(2)},
		{"stale", prop(3, 3), proposalStale, set()},
		{"holder itself", prop(4, 1), proposalInvalid, set()},
		{"duplicate", prop(4, 2, 2), proposalInvalid, set()},
		{"node none", prop(4, 0), proposalInvalid, set()},
	} {
		got, members := judgeProposal(&s, 1, tc.p)
		if got != tc.want || members != tc.set {
			t.Errorf("%s: %d %v, want %d %v", tc.name, got, members.Slice(), tc.want, tc.set.Slice())
		}
	}
}

func TestReplies(t *testing.T) {
	s := state{leader: 2, leaderRev: 9, termRev: 9, inSync: InSync{Version: 3, Members: set(1), LastHolder: 2}}
	d := denyReply(7, &s)
	if d.Kind != arbiter.ReplyDeny || d.RequestID != 7 || d.Holder != 2 || d.Epoch != 9 || d.InSyncVersion != 3 || !slices.Equal(d.Members.Slice(), []arbiter.NodeID{1}) {
		t.Errorf("deny: %+v", d)
	}
	lapsed := state{termRev: 9, inSync: InSync{Version: 3, LastHolder: 2}}
	if d := denyReply(7, &lapsed); d.Holder != arbiter.NodeNone || d.Epoch != 9 {
		t.Errorf("deny with no live holder: %+v", d)
	}
	g := grantReply(8, 9, second, 3, set(1), 0)
	if !g.Granted() || g.Epoch != 9 || g.DurationNs != second || g.RequestID != 8 {
		t.Errorf("grant: %+v", g)
	}
	// The keeper takes them exactly as from a witness.
	k, _ := arbiter.NewKeeper(1, arbiter.DefaultConfig())
	k.SetWantLead(true)
	req, _ := k.Tick(100)
	g = grantReply(req.ID, 9, second, 3, set(2), 0)
	if !g.Deliver(k) || !k.MayLead(101) || k.Epoch() != 9 {
		t.Errorf("keeper did not take the grant: view %+v", k.View())
	}
}

func TestParseURL(t *testing.T) {
	eps, err := ParseURL("etcd://10.0.0.1:2379,h2:2379")
	if err != nil || len(eps) != 2 || eps[0] != "http://10.0.0.1:2379" || eps[1] != "http://h2:2379" {
		t.Fatalf("ParseURL = %v, %v", eps, err)
	}
	for _, bad := range []string{"", "etcd://", "http://h:2379", "etcd://h", "etcd://h:1,"} {
		if eps, err := ParseURL(bad); err == nil {
			t.Errorf("ParseURL(%q) = %v, want an error", bad, eps)
		}
	}
}
