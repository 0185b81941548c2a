package main

import (
	"flag"
	"io"
	"testing"

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
		if err := f.check(); err != nil {
			t.Fatalf("%v: %v", tc.args, err)
		}
		cfg, err := f.config()
		if err != nil {
			t.Fatalf("%v: %v", tc.args, err)
		}
		if cfg.FsyncInlineBelowNs != tc.want {
			t.Fatalf("%v: FsyncInlineBelowNs %d, want %d", tc.args, cfg.FsyncInlineBelowNs, tc.want)
		}
	}
}
