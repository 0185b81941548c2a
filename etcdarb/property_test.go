package etcdarb

import (
	"testing"

	"pgregory.net/rapid"

	"github.com/seqbus/seqbus/arbiter"
)

// memEtcd is the three keys of one stream in memory, with etcd's revision
// counter, driven by the same pure rules (decodeState, mayAcquire,
// nextTermInSync, judgeProposal) as the etcd operations. It lets a property
// test compare those rules with arbiter.Arbiter's on random histories.
type memEtcd struct {
	rev                  int64
	leader, term, inSync kv
}

func (m *memEtcd) state(t *rapid.T) state {
	s, err := decodeState(m.leader, m.term, m.inSync)
	if err != nil {
		t.Fatalf("the rules wrote a corrupt state: %v", err)
	}
	return s
}

// acquire mirrors Client.acquire: delete our own live key (a new term),
// refuse another's, else the promotion rule and one transaction writing
// all three keys.
func (m *memEtcd) acquire(t *rapid.T, node arbiter.NodeID) (granted bool, epoch uint64, ins InSync) {
	s := m.state(t)
	if s.leader == node {
		m.rev++
		m.leader = kv{}
		s = m.state(t)
	}
	switch {
	case s.leader != arbiter.NodeNone || !mayAcquire(&s, node):
		return false, s.highestEpoch(), s.inSync
	}
	v, members := nextTermInSync(&s, node)
	m.rev++
	val := []byte(encodeNode(node))
	m.leader = kv{present: true, value: val, createRev: m.rev, modRev: m.rev, lease: 1}
	m.term = kv{present: true, value: val, createRev: m.rev, modRev: m.rev}
	m.inSync = kv{present: true, value: encodeInSync(v, &members, 0), modRev: m.rev}
	return true, uint64(m.rev), InSync{Version: v, Members: members, LastHolder: node}
}

// renew mirrors Client.renew and propose.
func (m *memEtcd) renew(t *rapid.T, node arbiter.NodeID, epoch uint64, p *arbiter.InSyncProposal) (granted bool, ins InSync) {
	s := m.state(t)
	if s.leader != node || uint64(s.leaderRev) != epoch {
		return false, s.inSync
	}
	if p.BaseVersion == 0 {
		return true, s.inSync
	}
	verdict, members := judgeProposal(&s, node, p)
	if verdict != proposalChange {
		return true, s.inSync
	}
	m.rev++
	m.inSync = kv{present: true, value: encodeInSync(s.inSync.Version+1, &members, 0), modRev: m.rev}
	return true, m.state(t).inSync
}

// expire is the etcd lease running out: the leader key is deleted (a
// revision of its own).
func (m *memEtcd) expire() {
	if m.leader.present {
		m.rev++
		m.leader = kv{}
	}
}

// TestRulesMatchArbiter: on random sequences of acquires, renews with
// proposals and lease expiries by nodes 1..4, the etcd rules grant and
// refuse exactly what arbiter.Arbiter does, report the same in-sync
// version and members, and give every new holder a higher epoch.
func TestRulesMatchArbiter(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		cfg := arbiter.DefaultConfig()
		a, _ := arbiter.NewArbiter(cfg)
		var m memEtcd
		nowNs := int64(0)
		arbEpoch := map[arbiter.NodeID]uint64{}
		etcdEpoch := map[arbiter.NodeID]uint64{}
		var lastArb, lastEtcd uint64
		steps := rapid.IntRange(1, 40).Draw(t, "steps")
		for range steps {
			node := arbiter.NodeID(rapid.IntRange(1, 4).Draw(t, "node"))
			switch rapid.IntRange(0, 2).Draw(t, "op") {
			case 0:
				d := a.Acquire(node, nowNs)
				g, e, ins := m.acquire(t, node)
				if d.Granted != g {
					t.Fatalf("acquire by %d: arbiter %v (%s), etcd %v", node, d.Granted, d.Reason, g)
				}
				if d.InSyncVersion != ins.Version || d.Members != ins.Members {
					t.Fatalf("acquire by %d: arbiter set v%d %v, etcd v%d %v", node, d.InSyncVersion, d.Members.Slice(), ins.Version, ins.Members.Slice())
				}
				if g {
					if d.PersistEpoch != (e > lastEtcd) {
						t.Fatalf("new term at the arbiter %v, at etcd epoch %d after %d", d.PersistEpoch, e, lastEtcd)
					}
					if d.Epoch < lastArb || e < lastEtcd {
						t.Fatalf("epoch went back")
					}
					lastArb, lastEtcd = d.Epoch, e
					arbEpoch[node], etcdEpoch[node] = d.Epoch, e
				}
			case 1:
				var p arbiter.InSyncProposal
				if rapid.Bool().Draw(t, "propose") {
					p.BaseVersion = rapid.Uint64Range(1, 12).Draw(t, "base")
					p.N = rapid.IntRange(0, 3).Draw(t, "n")
					for i := range p.N {
						p.Members[i] = arbiter.NodeID(rapid.IntRange(0, 4).Draw(t, "member"))
					}
				}
				var d arbiter.Decision
				if p.BaseVersion == 0 {
					d = a.Renew(node, arbEpoch[node], nowNs)
				} else {
					d = a.RenewWithInSync(node, arbEpoch[node], p.BaseVersion, p.Members[:p.N], nowNs)
				}
				g, ins := m.renew(t, node, etcdEpoch[node], &p)
				if d.Granted != g {
					t.Fatalf("renew by %d: arbiter %v (%s), etcd %v", node, d.Granted, d.Reason, g)
				}
				if g && (d.InSyncVersion != ins.Version || d.Members != ins.Members) {
					t.Fatalf("renew by %d with %+v: arbiter set v%d %v, etcd v%d %v", node, p, d.InSyncVersion, d.Members.Slice(), ins.Version, ins.Members.Slice())
				}
			case 2:
				nowNs += cfg.LeaseDurationNs
				m.expire()
			}
		}
	})
}
