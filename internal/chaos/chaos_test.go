package chaos

import (
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/seqbus/seqbus/internal/cluster"
	"github.com/seqbus/seqbus/internal/flagcheck"
)

func TestParseFaults(t *testing.T) {
	all, err := ParseFaults("all", ArbiterWitness)
	if err != nil || !slices.Equal(all, slices.DeleteFunc(slices.Clone(AllFaults), func(f string) bool { return f == KillEtcd })) {
		t.Fatalf("all: %v %v", all, err)
	}
	etcd, err := ParseFaults("process,network", ArbiterEtcd)
	want := []string{KillPrimary, RestartPrimary, KillStandby, PausePrimary, PauseStandby, KillEtcd, IsolatePrimary, IsolateStandby, Loss}
	if err != nil || !slices.Equal(etcd, want) {
		t.Fatalf("process,network with etcd: %v %v, want %v", etcd, err, want)
	}
	for group, want := range map[string][]string{"process": ProcessFaults, "network": NetworkFaults} {
		if got, err := ParseFaults(group, ""); err != nil || !slices.Equal(got, want) {
			t.Fatalf("%s: %v %v", group, got, err)
		}
	}
	if got, err := ParseFaults("loss,process", ArbiterWitness); err != nil || len(got) != len(ProcessFaults)+1 || got[0] != Loss {
		t.Fatalf("loss,process: %v %v", got, err)
	}
	got, err := ParseFaults("kill-primary, pause-standby,kill-primary", ArbiterWitness)
	if err != nil || !slices.Equal(got, []string{KillPrimary, PauseStandby}) {
		t.Fatalf("list: %v %v", got, err)
	}
	for _, bad := range []string{"", "flood", "kill-primary,"} {
		if _, err := ParseFaults(bad, ArbiterWitness); err == nil || !strings.Contains(err.Error(), "unknown fault") {
			t.Errorf("ParseFaults(%q) = %v, want unknown fault", bad, err)
		}
	}
}

func TestConfigCheck(t *testing.T) {
	ok := Config{Nodes: 3, Duration: 30 * time.Second, Rate: 2000, Fsync: "group", Faults: ProcessFaults}
	if err := ok.Check(); err != nil {
		t.Fatalf("good config refused: %v", err)
	}
	for name, bad := range map[string]func(*Config){
		"--nodes":               func(c *Config) { c.Nodes = 1 },
		"--nodes 6":             func(c *Config) { c.Nodes = MaxNodes + 1 },
		"--rounds":              func(c *Config) { c.Rounds = -1 },
		"--rate":                func(c *Config) { c.Rate = 0 },
		"--duration":            func(c *Config) { c.Duration = MinDuration - time.Millisecond },
		"--fsync":               func(c *Config) { c.Fsync = "sometimes" },
		"--faults":              func(c *Config) { c.Faults = []string{"flood"} },
		"--faults kill-etcd":    func(c *Config) { c.Faults = []string{KillEtcd} },
		"--faults kill-witness": func(c *Config) { c.Arbiter, c.Faults = ArbiterEtcd, []string{KillWitness} },
		"--arbiter":             func(c *Config) { c.Arbiter = "zookeeper" },
	} {
		c := ok
		bad(&c)
		err := c.Check()
		if _, missing := os.Stat(cluster.EtcdBinary); c.Arbiter == ArbiterEtcd && missing != nil {
			continue // refused for --arbiter: no etcd here
		}
		if err == nil || !flagcheck.IsUsage(err) || !strings.Contains(err.Error(), strings.Fields(name)[0]) {
			t.Errorf("%s: got %v, want a usage error naming it", name, err)
		}
	}
}

// TestConfigCheckNetwork: the network faults are refused, naming
// --faults, where this process cannot run them (not root, or no nft),
// and accepted where it can. With no ip or nft on the PATH they are
// refused even as root, so CI (root) checks the refusal too.
func TestConfigCheckNetwork(t *testing.T) {
	c := Config{Nodes: 3, Duration: 30 * time.Second, Rate: 2000, Faults: []string{KillPrimary, Loss}}
	refused := func(err error) bool {
		return err != nil && flagcheck.IsUsage(err) && strings.Contains(err.Error(), "--faults")
	}
	err := c.Check()
	if why := CheckNetwork(); why != nil {
		if !refused(err) {
			t.Fatalf("network faults where they cannot run (%v): Check = %v, want a usage error naming --faults", why, err)
		}
	} else if err != nil {
		t.Fatalf("network faults as root with nft: %v", err)
	}
	t.Setenv("PATH", t.TempDir()) // no ip, no nft
	if err := c.Check(); !refused(err) {
		t.Fatalf("network faults without nft: Check = %v, want a usage error naming --faults", err)
	}
	c.Faults = []string{KillPrimary}
	if err := c.Check(); err != nil {
		t.Fatalf("process faults without nft: %v", err)
	}
}

// holds are each fault's hold range, [lo, hi), with a 1 s lease.
var holds = map[string][2]time.Duration{
	KillPrimary:    {0, time.Second},
	RestartPrimary: {0, 1},
	KillStandby:    {0, 2 * time.Second},
	PausePrimary:   {1200 * time.Millisecond, 2 * time.Second},
	PauseStandby:   {50 * time.Millisecond, 1500 * time.Millisecond},
	KillWitness:    {0, 1500 * time.Millisecond},
	KillEtcd:       {0, 3 * time.Second},
	IsolatePrimary: {1200 * time.Millisecond, 2500 * time.Millisecond},
	IsolateStandby: {200 * time.Millisecond, 3 * time.Second},
	IsolateWitness: {200 * time.Millisecond, 2 * time.Second},
	Loss:           {time.Second, 4 * time.Second},
}

// TestSchedule: one seed gives one schedule, another seed another; every
// fault is drawn, and each delay stays in its stated range.
func TestSchedule(t *testing.T) {
	draw := func(seed uint64) []step {
		s := newSchedule(seed, AllFaults, time.Second)
		out := make([]step, 400)
		for i := range out {
			out[i] = s.next()
		}
		return out
	}
	a, b, c := draw(7), draw(7), draw(8)
	if !slices.Equal(a, b) {
		t.Fatal("the same seed drew two schedules")
	}
	if slices.Equal(a, c) {
		t.Fatal("two seeds drew the same schedule")
	}
	seen := map[string]bool{}
	for _, st := range a {
		seen[st.fault] = true
		if st.calm < 300*time.Millisecond || st.calm >= 1500*time.Millisecond {
			t.Errorf("calm %v outside 300ms..1.5s", st.calm)
		}
		r := holds[st.fault]
		lo, hi := r[0], r[1]
		if st.hold < lo || st.hold >= hi {
			t.Errorf("%s: hold %v outside %v..%v", st.fault, st.hold, lo, hi)
		}
		if st.fault == Loss && (st.lossMod < 3 || st.lossMod > 20) {
			t.Errorf("loss: 1 in %d, want 1 in 3..20", st.lossMod)
		}
	}
	if len(seen) != len(AllFaults) {
		t.Fatalf("400 draws saw only %v", seen)
	}
	one := newSchedule(1, []string{PauseStandby}, time.Second)
	for range 50 {
		if st := one.next(); st.fault != PauseStandby {
			t.Fatalf("drew %s from [%s]", st.fault, PauseStandby)
		}
	}
}
