package bus

import "testing"

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

// LockAgentThread refuses a CPU the machine does not have.
func TestLockAgentThreadRefusesMissingCPU(t *testing.T) {
	if _, err := LockAgentThread(true, 1<<20); err == nil {
		t.Fatal("pinned to a CPU that does not exist")
	}
}
