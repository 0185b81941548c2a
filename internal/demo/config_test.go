package demo

import (
	"strings"
	"testing"
	"time"

	"github.com/seqbus/seqbus/internal/flagcheck"
)

// The demo's settings: each bad one refused, naming its flag, before
// anything starts.
func TestConfigCheck(t *testing.T) {
	good := func() Config { return Config{Rate: 5000, Duration: 8 * time.Second, KillAfter: 3 * time.Second} }
	if c := good(); c.Check() != nil {
		t.Fatalf("the defaults refused: %v", c.Check())
	}
	for _, tc := range []struct {
		want string
		set  func(*Config)
	}{
		{"--rate", func(c *Config) { c.Rate = 0 }},
		{"--duration", func(c *Config) { c.Duration = 0 }},
		{"--kill-after must be >= 0", func(c *Config) { c.KillAfter = -time.Second }},
		{"--kill-after must be < --duration", func(c *Config) { c.KillAfter = c.Duration }},
		{"less than one command", func(c *Config) { c.Rate, c.Duration, c.KillAfter = 0.5, time.Second, 0 }},
		{"--fsync", func(c *Config) { c.Fsync = "sometimes" }},
		{"--record", func(c *Config) { c.Record = "/nonexistent-seqbus-dir/r.jsonl" }},
	} {
		c := good()
		tc.set(&c)
		err := c.Check()
		if err == nil || !flagcheck.IsUsage(err) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: got %v", tc.want, err)
		}
	}
}
