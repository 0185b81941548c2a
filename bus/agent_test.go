package bus

import (
	"runtime"
	"testing"
	"time"
)

// The agent's idle phases: block parks at once, busy-spin never parks,
// yield always yields, back-off spins, yields, then parks, with its
// defaults or its configured counts.
func TestAgentPhase(t *testing.T) {
	cases := []struct {
		idle  Idle
		empty int
		want  IdlePhase
	}{
		{Idle{Kind: IdleBlock}, 1, PhasePark},
		{Idle{Kind: IdleBusySpin}, 1_000_000, PhaseSpin},
		{Idle{Kind: IdleYield}, 1, PhaseYield},
		{Idle{Kind: IdleYield}, 1_000_000, PhaseYield},
		{Idle{Kind: IdleBackoff}, 1, PhaseSpin},
		{Idle{Kind: IdleBackoff}, AgentSpinsDefault, PhaseSpin},
		{Idle{Kind: IdleBackoff}, AgentSpinsDefault + 1, PhaseYield},
		{Idle{Kind: IdleBackoff}, AgentSpinsDefault + AgentYieldsDefault, PhaseYield},
		{Idle{Kind: IdleBackoff}, AgentSpinsDefault + AgentYieldsDefault + 1, PhasePark},
		{Idle{Kind: IdleBackoff, Spins: 2, Yields: 1}, 2, PhaseSpin},
		{Idle{Kind: IdleBackoff, Spins: 2, Yields: 1}, 3, PhaseYield},
		{Idle{Kind: IdleBackoff, Spins: 2, Yields: 1}, 4, PhasePark},
		{Idle{Kind: IdleBackoff, Spins: 1 << 30, Yields: 1 << 30}, 2*PollsPerCallMax + 1, PhasePark},
	}
	for _, c := range cases {
		if got := c.idle.AgentPhase(c.empty); got != c.want {
			t.Errorf("%v spins %d yields %d, empty pass %d: %v, want %v", c.idle.Kind, c.idle.Spins, c.idle.Yields, c.empty, got, c.want)
		}
	}
}

// A back-off window: spin the first passes, yield while the last work is
// younger than the window, park after it; no window: the default one.
func TestAgentPhaseAtWindow(t *testing.T) {
	w := Idle{Kind: IdleBackoff, Window: 250 * time.Microsecond}
	cases := []struct {
		idle   Idle
		empty  int
		idleNs int64
		want   IdlePhase
	}{
		{w, 1, 0, PhaseSpin},
		{w, AgentSpinsDefault, 1_000_000, PhaseSpin},
		{w, AgentSpinsDefault + 1, 0, PhaseYield},
		{w, 1_000_000, 249_999, PhaseYield},
		{w, AgentSpinsDefault + 1, 250_000, PhasePark},
		{Idle{Kind: IdleBackoff}, AgentSpinsDefault + AgentYieldsDefault + 1, 0, PhaseYield},
		{Idle{Kind: IdleBackoff}, AgentSpinsDefault + 1, int64(AgentWindowDefault) - 1, PhaseYield},
		{Idle{Kind: IdleBackoff}, AgentSpinsDefault + 1, int64(AgentWindowDefault), PhasePark},
		{Idle{Kind: IdleBlock, Window: time.Second}, 1, 0, PhasePark},
		{Idle{Kind: IdleYield, Window: time.Nanosecond}, 1 << 20, 1 << 40, PhaseYield},
	}
	for _, c := range cases {
		if got := c.idle.AgentPhaseAt(c.empty, c.idleNs); got != c.want {
			t.Errorf("%v window %v, empty pass %d, idle %d ns: %v, want %v", c.idle.Kind, c.idle.Window, c.empty, c.idleNs, got, c.want)
		}
	}
}

func TestParseIdle(t *testing.T) {
	for in, want := range map[string]Idle{
		"block": {Kind: IdleBlock}, "backoff": {Kind: IdleBackoff}, "spin": {Kind: IdleBusySpin}, "yield": {Kind: IdleYield},
		"backoff:250us": {Kind: IdleBackoff, Window: 250 * time.Microsecond}, "backoff:1s": {Kind: IdleBackoff, Window: time.Second},
	} {
		if got, err := ParseIdle(in); err != nil || got != want {
			t.Errorf("ParseIdle(%q) = %+v, %v; want %+v", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "Block", "backoff:", "backoff:0s", "backoff:-1ms", "backoff:2s", "backoff:fast", "yield:1ms"} {
		if _, err := ParseIdle(bad); err == nil {
			t.Errorf("ParseIdle(%q): no error", bad)
		}
	}
}

// LockAgentThread refuses a CPU the machine does not have.
func TestLockAgentThreadRefusesMissingCPU(t *testing.T) {
	if _, err := LockAgentThread(true, 1<<20); err == nil {
		t.Fatal("pinned to a CPU that does not exist")
	}
}

// TestSparePOnOneCPU: a process with one P (confined to one CPU) gets a
// second one for the rest of the runtime while an agent keeps its own;
// a GOMAXPROCS the user set is left alone.
func TestSparePOnOneCPU(t *testing.T) {
	prev := runtime.GOMAXPROCS(1)
	defer runtime.GOMAXPROCS(prev)
	t.Setenv("GOMAXPROCS", "")
	if !SpareP() || runtime.GOMAXPROCS(0) != 2 {
		t.Fatalf("one P, GOMAXPROCS unset: SpareP left %d Ps, want 2", runtime.GOMAXPROCS(0))
	}
	if SpareP() {
		t.Fatal("two Ps: SpareP raised them again")
	}
	runtime.GOMAXPROCS(1)
	t.Setenv("GOMAXPROCS", "1")
	if SpareP() || runtime.GOMAXPROCS(0) != 1 {
		t.Fatalf("GOMAXPROCS=1 set by the user: SpareP made %d Ps, want it left at 1", runtime.GOMAXPROCS(0))
	}
}
