package arbiter

import (
	"errors"
	"math"
	"testing"
)

// testConfig uses small round numbers so expected values are easy to read.
var testConfig = Config{LeaseDurationNs: 1000, RenewIntervalNs: 250, MarginNs: 150, RetryNs: 50}

type arbiterStep struct {
	op      string // "acquire", "renew", "restore", "propose"
	node    NodeID
	epoch   uint64 // renew, propose: presented epoch; restore: highest epoch
	nowNs   int64
	want    Decision // ignored for restore
	members []NodeID // propose: the proposed set (based on the current version)
}

func acquire(node NodeID, nowNs int64, want Decision) arbiterStep {
	return arbiterStep{op: "acquire", node: node, nowNs: nowNs, want: want}
}

func renew(node NodeID, epoch uint64, nowNs int64, want Decision) arbiterStep {
	return arbiterStep{op: "renew", node: node, epoch: epoch, nowNs: nowNs, want: want}
}

// propose renews with a proposal based on the current version, to make
// nodes eligible for the lease-handover steps below.
func propose(node NodeID, epoch uint64, nowNs int64, members []NodeID, want Decision) arbiterStep {
	return arbiterStep{op: "propose", node: node, epoch: epoch, nowNs: nowNs, members: members, want: want}
}

func restore(highest uint64, nowNs int64) arbiterStep {
	return arbiterStep{op: "restore", epoch: highest, nowNs: nowNs}
}

func grantNew(node NodeID, epoch uint64, expiresAtNs, remainingNs int64) Decision {
	return Decision{Granted: true, Holder: node, Epoch: epoch, ExpiresAtNs: expiresAtNs, RemainingNs: remainingNs, PersistEpoch: true, Persist: true}
}

func grantExtend(node NodeID, epoch uint64, expiresAtNs, remainingNs int64) Decision {
	return Decision{Granted: true, Holder: node, Epoch: epoch, ExpiresAtNs: expiresAtNs, RemainingNs: remainingNs}
}

func denied(reason DenyReason, holder NodeID, epoch uint64, expiresAtNs, remainingNs int64) Decision {
	return Decision{Reason: reason, Holder: holder, Epoch: epoch, ExpiresAtNs: expiresAtNs, RemainingNs: remainingNs}
}

func TestArbiterRules(t *testing.T) {
	const maxNs = math.MaxInt64
	tests := []struct {
		name  string
		steps []arbiterStep
	}{
		{"grant to free", []arbiterStep{
			acquire(1, 0, grantNew(1, 1, 1000, 1000)),
		}},
		{"acquire by the live holder starts a new term", []arbiterStep{
			// A holder acquires only without a lease in mind (a restart): it
			// must never lead an epoch it may already have used.
			acquire(1, 0, grantNew(1, 1, 1000, 1000)),
			acquire(1, 400, grantNew(1, 2, 1400, 1000)),
		}},
		{"refuse others while live", []arbiterStep{
			acquire(1, 0, grantNew(1, 1, 1000, 1000)),
			acquire(2, 300, denied(ReasonHeld, 1, 1, 1000, 700)),
			acquire(3, 999, denied(ReasonHeld, 1, 1, 1000, 1)),
		}},
		{"renew by holder with current epoch before expiry", []arbiterStep{
			acquire(1, 0, grantNew(1, 1, 1000, 1000)),
			renew(1, 1, 999, grantExtend(1, 1, 1999, 1000)),
		}},
		{"renew exactly at expiry is refused", []arbiterStep{
			acquire(1, 0, grantNew(1, 1, 1000, 1000)),
			renew(1, 1, 1000, denied(ReasonExpired, NodeNone, 1, 0, 0)),
		}},
		{"renew with an old or future epoch is refused", []arbiterStep{
			acquire(1, 0, grantNew(1, 1, 1000, 1000)),
			renew(1, 0, 10, denied(ReasonEpochMismatch, 1, 1, 1000, 990)),
			renew(1, 2, 10, denied(ReasonEpochMismatch, 1, 1, 1000, 990)),
		}},
		{"renew by a non-holder is refused", []arbiterStep{
			acquire(1, 0, grantNew(1, 1, 1000, 1000)),
			renew(2, 1, 10, denied(ReasonNotHolder, 1, 1, 1000, 990)),
		}},
		{"renew with nothing granted is refused", []arbiterStep{
			renew(1, 0, 0, denied(ReasonNotHolder, NodeNone, 0, 0, 0)),
		}},
		{"renew after expiry by another node is refused", []arbiterStep{
			acquire(1, 0, grantNew(1, 1, 1000, 1000)),
			renew(2, 1, 1000, denied(ReasonNotHolder, NodeNone, 1, 0, 0)),
		}},
		{"expiry boundary: live at expiresAt-1, free at expiresAt", []arbiterStep{
			acquire(1, 0, grantNew(1, 1, 1000, 1000)),
			propose(1, 1, 0, []NodeID{2}, grantExtend(1, 1, 1000, 1000)),
			acquire(2, 999, denied(ReasonHeld, 1, 1, 1000, 1)),
			acquire(2, 1000, grantNew(2, 2, 2000, 1000)),
		}},
		{"epoch+1 for each new holder", []arbiterStep{
			acquire(1, 0, grantNew(1, 1, 1000, 1000)),
			propose(1, 1, 0, []NodeID{2, 3}, grantExtend(1, 1, 1000, 1000)),
			acquire(2, 1000, grantNew(2, 2, 2000, 1000)),
			propose(2, 2, 1000, []NodeID{1, 3}, grantExtend(2, 2, 2000, 1000)),
			acquire(3, 2500, grantNew(3, 3, 3500, 1000)),
			acquire(1, 3500, grantNew(1, 4, 4500, 1000)),
		}},
		{"same holder after expiry gets a new epoch", []arbiterStep{
			acquire(1, 0, grantNew(1, 1, 1000, 1000)),
			acquire(1, 1000, grantNew(1, 2, 2000, 1000)),
			renew(1, 1, 1001, denied(ReasonEpochMismatch, 1, 2, 2000, 999)),
		}},
		{"node 0 is never granted", []arbiterStep{
			acquire(0, 0, denied(ReasonInvalidNode, NodeNone, 0, 0, 0)),
			renew(0, 0, 0, denied(ReasonInvalidNode, NodeNone, 0, 0, 0)),
			acquire(1, 0, grantNew(1, 1, 1000, 1000)),
			acquire(0, 1, denied(ReasonInvalidNode, 1, 1, 1000, 999)),
		}},
		{"quarantine after restore refuses everyone for one lease", []arbiterStep{
			restore(7, 100),
			acquire(1, 100, denied(ReasonQuarantine, NodeNone, 7, 0, 1000)),
			renew(1, 7, 500, denied(ReasonQuarantine, NodeNone, 7, 0, 600)),
			acquire(2, 1099, denied(ReasonQuarantine, NodeNone, 7, 0, 1)),
			acquire(2, 1100, grantNew(2, 8, 2100, 1000)),
			acquire(1, 1101, denied(ReasonHeld, 2, 8, 2100, 999)),
		}},
		{"restore on a running arbiter drops and outlasts the live lease", []arbiterStep{
			acquire(1, 0, grantNew(1, 1, 1000, 1000)),
			restore(1, 500),
			acquire(1, 1499, denied(ReasonQuarantine, NodeNone, 1, 0, 1)),
			acquire(1, 1500, grantNew(1, 2, 2500, 1000)),
		}},
		{"restore: the last holder renews its epoch at once, others wait", []arbiterStep{
			// Only the process granted epoch 1 renews it; it may go on
			// with that epoch, and its renew ends the quarantine.
			acquire(1, 0, grantNew(1, 1, 1000, 1000)),
			restore(1, 500),
			acquire(2, 550, denied(ReasonQuarantine, NodeNone, 1, 0, 950)),
			renew(2, 1, 560, denied(ReasonQuarantine, NodeNone, 1, 0, 940)),
			renew(1, 0, 570, denied(ReasonQuarantine, NodeNone, 1, 0, 930)),
			renew(1, 1, 600, grantExtend(1, 1, 1600, 1000)),
			acquire(2, 700, denied(ReasonHeld, 1, 1, 1600, 900)),
			renew(1, 1, 850, grantExtend(1, 1, 1850, 1000)),
		}},
		{"restore: a holder that died waits one lease before another node", []arbiterStep{
			acquire(1, 0, grantNew(1, 1, 1000, 1000)),
			propose(1, 1, 0, []NodeID{2}, grantExtend(1, 1, 1000, 1000)),
			restore(1, 500),
			acquire(1, 600, denied(ReasonQuarantine, NodeNone, 1, 0, 900)), // restarted: a new process acquires
			acquire(2, 1499, denied(ReasonQuarantine, NodeNone, 1, 0, 1)),
			renew(1, 1, 1500, denied(ReasonNotHolder, NodeNone, 1, 0, 0)), // too late: the lease is unknown, gone
			acquire(2, 1500, grantNew(2, 2, 2500, 1000)),
		}},
		{"restore never lowers the epoch", []arbiterStep{
			acquire(1, 0, grantNew(1, 1, 1000, 1000)),
			propose(1, 1, 0, []NodeID{2, 3}, grantExtend(1, 1, 1000, 1000)),
			acquire(2, 1000, grantNew(2, 2, 2000, 1000)),
			restore(1, 2000),
			acquire(3, 3000, grantNew(3, 3, 4000, 1000)),
		}},
		{"time going backwards is clamped and never shrinks a lease", []arbiterStep{
			acquire(1, 1000, grantNew(1, 1, 2000, 1000)),
			propose(1, 1, 1000, []NodeID{2}, grantExtend(1, 1, 2000, 1000)),
			acquire(2, 500, denied(ReasonHeld, 1, 1, 2000, 1000)),
			acquire(1, 0, grantNew(1, 2, 2000, 1000)),
			acquire(2, 2000, grantNew(2, 3, 3000, 1000)),
		}},
		{"expiry saturates near the top of the clock", []arbiterStep{
			acquire(1, maxNs-10, grantNew(1, 1, maxNs, 10)),
			propose(1, 1, maxNs-10, []NodeID{2}, grantExtend(1, 1, maxNs, 10)),
			acquire(2, maxNs-1, denied(ReasonHeld, 1, 1, maxNs, 1)),
			acquire(2, maxNs, grantNew(2, 2, maxNs, 0)),
		}},
		{"negative clock readings work", []arbiterStep{
			acquire(1, -5000, grantNew(1, 1, -4000, 1000)),
			propose(1, 1, -5000, []NodeID{2}, grantExtend(1, 1, -4000, 1000)),
			acquire(2, -4001, denied(ReasonHeld, 1, 1, -4000, 1)),
			acquire(2, -4000, grantNew(2, 2, -3000, 1000)),
		}},
		{"no epoch left after a corrupt restore", []arbiterStep{
			restore(math.MaxUint64, 0),
			acquire(1, 1000, denied(ReasonEpochExhausted, NodeNone, math.MaxUint64, 0, 0)),
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, err := NewArbiter(testConfig)
			if err != nil {
				t.Fatal(err)
			}
			for i, s := range tt.steps {
				var got Decision
				switch s.op {
				case "acquire":
					got = a.Acquire(s.node, s.nowNs)
				case "renew":
					got = a.Renew(s.node, s.epoch, s.nowNs)
				case "propose":
					got = a.RenewWithInSync(s.node, s.epoch, a.Query(s.nowNs).InSyncVersion, s.members, s.nowNs)
					if got.InSyncReason != ReasonNone {
						t.Fatalf("step %d: proposal %v refused: %+v", i, s.members, got)
					}
				case "restore":
					if err := a.Restore(PersistentState{Epoch: s.epoch}, s.nowNs); err != nil {
						t.Fatal(err)
					}
					continue
				}
				// This table checks the lease rules; the in-sync fields
				// are checked by TestInSyncRules, Run by TestDenyRun.
				got.InSyncVersion, got.Members, got.InSyncReason, got.Run = 0, InSyncSet{}, ReasonNone, 0
				if s.op == "propose" {
					got.Persist = false
				}
				if got != s.want {
					t.Fatalf("step %d: %s(node %d, epoch %d, now %d)\n got %+v\nwant %+v", i, s.op, s.node, s.epoch, s.nowNs, got, s.want)
				}
			}
		})
	}
}

func TestArbiterQuery(t *testing.T) {
	a, err := NewArbiter(testConfig)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := a.Query(0), (Status{}); got != want {
		t.Fatalf("empty: got %+v want %+v", got, want)
	}
	a.Acquire(4, 100)
	a.RenewWithInSync(4, 1, 1, []NodeID{6, 5}, 100)
	set := InSyncSet{N: 2, Nodes: [MaxInSyncMembers]NodeID{5, 6}}
	if got, want := a.Query(600), (Status{Holder: 4, Epoch: 1, ExpiresAtNs: 1100, RemainingNs: 500, LastHolder: 4, InSyncVersion: 2, Members: set}); got != want {
		t.Fatalf("held: got %+v want %+v", got, want)
	}
	if got, want := a.Query(1100), (Status{Epoch: 1, LastHolder: 4, InSyncVersion: 2, Members: set}); got != want {
		t.Fatalf("expired: got %+v want %+v", got, want)
	}
	if err := a.Restore(PersistentState{Epoch: 9, InSyncVersion: 3, LastHolder: 5}, 2000); err != nil {
		t.Fatal(err)
	}
	if got, want := a.Query(2400), (Status{Epoch: 9, QuarantineRemainingNs: 600, LastHolder: 5, InSyncVersion: 3}); got != want {
		t.Fatalf("quarantine: got %+v want %+v", got, want)
	}
	if got, want := a.Query(3000), (Status{Epoch: 9, LastHolder: 5, InSyncVersion: 3}); got != want {
		t.Fatalf("after quarantine: got %+v want %+v", got, want)
	}
}

func TestConfigValidate(t *testing.T) {
	ok := DefaultConfig()
	if err := ok.Validate(); err != nil {
		t.Fatalf("default config: %v", err)
	}
	if err := testConfig.Validate(); err != nil {
		t.Fatalf("test config: %v", err)
	}
	bad := map[string]func(c *Config){
		"zero lease":             func(c *Config) { c.LeaseDurationNs = 0 },
		"negative renew":         func(c *Config) { c.RenewIntervalNs = -1 },
		"zero retry":             func(c *Config) { c.RetryNs = 0 },
		"negative margin":        func(c *Config) { c.MarginNs = -1 },
		"margin equals lease":    func(c *Config) { c.MarginNs = c.LeaseDurationNs },
		"renew beyond view":      func(c *Config) { c.RenewIntervalNs = c.LeaseDurationNs - c.MarginNs },
		"renew+retry fill view":  func(c *Config) { c.RetryNs = c.LeaseDurationNs - c.MarginNs - c.RenewIntervalNs },
		"huge renew, huge retry": func(c *Config) { c.RenewIntervalNs, c.RetryNs = math.MaxInt64, math.MaxInt64 },
	}
	for name, mutate := range bad {
		c := DefaultConfig()
		mutate(&c)
		if err := c.Validate(); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("%s: Validate = %v, want ErrInvalidConfig", name, err)
		}
		if _, err := NewArbiter(c); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("%s: NewArbiter error = %v, want ErrInvalidConfig", name, err)
		}
		if _, err := NewKeeper(1, c); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("%s: NewKeeper error = %v, want ErrInvalidConfig", name, err)
		}
	}
	if _, err := NewKeeper(NodeNone, ok); !errors.Is(err, ErrInvalidConfig) {
		t.Errorf("NewKeeper(NodeNone) error = %v, want ErrInvalidConfig", err)
	}
}

func TestDenyReasonString(t *testing.T) {
	if got := ReasonHeld.String(); got != "held" {
		t.Errorf("ReasonHeld = %q", got)
	}
	if got := DenyReason(200).String(); got != "DenyReason(200)" {
		t.Errorf("unknown = %q", got)
	}
	if got := RequestRenew.String(); got != "renew" {
		t.Errorf("RequestRenew = %q", got)
	}
}

// TestAcquireRequestRetryIsTheSameTerm: the retried ACQUIRE of a process
// (the same request ID, resent before the first grant reached it) gets the
// same grant, never a new epoch; a new request ID from the live holder (a
// restarted process) still starts a new term (sim bugs A and C), and an
// older one is refused (issue 15 item 3).
func TestAcquireRequestRetryIsTheSameTerm(t *testing.T) {
	a, err := NewArbiter(testConfig)
	if err != nil {
		t.Fatal(err)
	}
	d := a.AcquireRequest(1, 100, 0)
	if !d.Granted || d.Epoch != 1 || !d.PersistEpoch {
		t.Fatalf("first acquire: %+v", d)
	}
	d = a.AcquireRequest(1, 100, 50)
	if !d.Granted || d.Epoch != 1 || d.Persist || d.ExpiresAtNs != 1000 || d.RemainingNs != 950 {
		t.Fatalf("retried acquire: %+v, want the same grant of epoch 1 (unextended, nothing to persist)", d)
	}
	d = a.AcquireRequest(1, 99, 60)
	if d.Granted || d.Reason != ReasonHeld || d.Epoch != 1 {
		t.Fatalf("older acquire of the live holder: %+v, want refused, epoch 1", d)
	}
	d = a.AcquireRequest(1, 5000, 70)
	if !d.Granted || d.Epoch != 2 || !d.PersistEpoch {
		t.Fatalf("acquire of a restarted holder (new request ID): %+v, want a new term at epoch 2", d)
	}
	d = a.AcquireRequest(1, 100, 80)
	if d.Granted || d.Epoch != 2 {
		t.Fatalf("the first term's acquire after a new term: %+v, want refused", d)
	}
	// After the lease lapsed the retry is an acquire like any other.
	d = a.AcquireRequest(1, 5000, 2000)
	if !d.Granted || d.Epoch != 3 {
		t.Fatalf("acquire after expiry: %+v, want epoch 3", d)
	}
}

// TestArbiterLastTerm: a new epoch remembers the lease it followed and
// how long after that lease ended it was granted (the witness logs it: a
// failover's takeover delay past the lease).
func TestArbiterLastTerm(t *testing.T) {
	a, err := NewArbiter(testConfig) // lease 1000
	if err != nil {
		t.Fatal(err)
	}
	if d := a.AcquireRequest(1, 1, 0); !d.Granted {
		t.Fatalf("first acquire %+v", d)
	}
	if prev, lapsed := a.LastTerm(); prev != NodeNone || lapsed != 0 {
		t.Fatalf("first term follows %d, %d after it: want none", prev, lapsed)
	}
	// Node 1 renews at 500 with node 2 in its in-sync set: its lease now
	// ends at 1500, and node 2 may take over after that.
	if d := a.RenewWithInSync(1, 1, 1, []NodeID{2}, 500); !d.Granted || d.InSyncReason != ReasonNone {
		t.Fatalf("renew with node 2 in sync: %+v", d)
	}
	if d := a.AcquireRequest(2, 1, 1499); d.Granted {
		t.Fatalf("acquire during node 1's lease granted: %+v", d)
	}
	if d := a.AcquireRequest(2, 2, 1512); !d.Granted || d.Epoch != 2 {
		t.Fatalf("acquire after the lease %+v", d)
	}
	if prev, lapsed := a.LastTerm(); prev != 1 || lapsed != 12 {
		t.Fatalf("second term follows node %d, %d after its end: want node 1, 12", prev, lapsed)
	}
	b, err := NewArbiter(testConfig)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Restore(PersistentState{Epoch: 5, LastHolder: 2}, 0); err != nil {
		t.Fatal(err)
	}
	if d := b.AcquireRequest(2, 1, 5000); !d.Granted {
		t.Fatalf("acquire after the quarantine %+v", d)
	}
	if prev, lapsed := b.LastTerm(); prev != 2 || lapsed != -1 {
		t.Fatalf("after a restore, the first term follows %d, %d after it: want the restored holder 2, its lease's end unknown (-1)", prev, lapsed)
	}
}
