package main

import (
	"flag"
	"io"
	"testing"

	"github.com/seqbus/seqbus/bus"
	"github.com/seqbus/seqbus/nodeconfig"
)

// --fsync-inline reaches the node's Config: the default, a value, and 0
// (always the fsync thread).
func TestNodeFsyncInlineFlag(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want int64
	}{
		{nil, nodeconfig.DefaultFsyncInlineBelowNs},
		{[]string{"--fsync-inline", "50us"}, 50_000},
		{[]string{"--fsync-inline", "0"}, 0},
	} {
		fs := flag.NewFlagSet("node", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		f := defineNodeFlags(fs, false)
		if err := fs.Parse(append([]string{"--id", "1", "--dir", t.TempDir()}, tc.args...)); err != nil {
			t.Fatal(err)
		}
		cfg, _, err := f.Config()
		if err != nil {
			t.Fatalf("%v: %v", tc.args, err)
		}
		if cfg.FsyncInlineBelowNs != tc.want {
			t.Fatalf("%v: FsyncInlineBelowNs %d, want %d", tc.args, cfg.FsyncInlineBelowNs, tc.want)
		}
	}
}

// A node run without --idle, and every node and client of a bench run
// without it, get the agent's default idle strategy (bus.AgentIdleDefault):
// the bench measures what `seqbus node` does by default.
func TestIdleDefaults(t *testing.T) {
	fs := flag.NewFlagSet("node", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	f := defineNodeFlags(fs, false)
	if err := fs.Parse([]string{"--id", "1", "--dir", t.TempDir()}); err != nil {
		t.Fatal(err)
	}
	cfg, _, err := f.Config()
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Idle.Kind != bus.AgentIdleDefault.Kind || cfg.Idle.Window != bus.AgentIdleDefault.Window {
		t.Fatalf("seqbus node's default idle %+v, want bus.AgentIdleDefault %+v", cfg.Idle, bus.AgentIdleDefault)
	}
	bfs := flag.NewFlagSet("bench", flag.ContinueOnError)
	bf := addBenchFlags(bfs, "none")
	if got, want := bf.Idle, bus.AgentIdleDefault.Kind.String(); got != want {
		t.Fatalf("bench --idle default %q, want %q (bus.AgentIdleDefault)", got, want)
	}
}
