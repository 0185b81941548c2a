package flagcheck

import (
	"flag"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func configFile(t *testing.T, text string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "seqbus.conf")
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// listValue is a repeatable flag.
type listValue []string

func (l *listValue) String() string     { return strings.Join(*l, ",") }
func (l *listValue) Set(s string) error { *l = append(*l, s); return nil }

func TestApplyFile(t *testing.T) {
	fs := flag.NewFlagSet("node", flag.ContinueOnError)
	id := fs.Uint("id", 0, "")
	dir := fs.String("dir", "", "")
	var peers listValue
	fs.Var(&peers, "peer", "")
	path := configFile(t, "# a cluster's file\nid = 1\n--dir = \"/var/seqbus\"  # quoted\n\npeer = 2=127.0.0.1:7102\npeer=3=127.0.0.1:7103\n")
	if err := ApplyFile(fs, path, map[string]bool{"id": true}); err != nil {
		t.Fatal(err)
	}
	if *id != 0 || *dir != "/var/seqbus" || len(peers) != 2 || peers[1] != "3=127.0.0.1:7103" {
		t.Fatalf("id %d (given on the command line: skipped), dir %q, peers %v", *id, *dir, peers)
	}
	for text, want := range map[string]string{
		"id 1\n":            ":1: want `name = value`",
		"x = 1\n":           `:1: unknown setting "x" for ` + "`seqbus node`",
		"\nconfig = a\n":    ":2: a config file cannot include another",
		"id = minus one\n":  ":1: id = minus one: parse error",
		"dir = a\nid = -\n": ":2: id = -: parse error",
	} {
		fs := flag.NewFlagSet("node", flag.ContinueOnError)
		fs.Uint("id", 0, "")
		fs.String("dir", "", "")
		fs.String("config", "", "")
		err := ApplyFile(fs, configFile(t, text), nil)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want %q", text, err, want)
		}
	}
	if err := ApplyFile(fs, filepath.Join(t.TempDir(), "missing"), nil); err == nil || !strings.HasPrefix(err.Error(), "--config: ") {
		t.Errorf("missing file: %v", err)
	}
}

// FuzzApplyFile: a config file is untrusted text. For any file
// ApplyFile never panics, and an error names the file (and, for a line,
// its number); a file it accepts sets the same values as the same
// settings given as flags on the command line would.
func FuzzApplyFile(f *testing.F) {
	for _, s := range []string{
		"# a cluster's file\nid = 1\n--dir = \"/var/seqbus\"  # quoted\n\npeer = 2=127.0.0.1:7102\npeer=3=127.0.0.1:7103\n",
		"lease = 1s\nv = true\n", "id 1\n", "config = x\n", "nope = 1\n", "id = -1\n", "= 1\n", "lease = forever\n",
	} {
		f.Add(s)
	}
	newSet := func() (*flag.FlagSet, *listValue) {
		fs := flag.NewFlagSet("node", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		fs.Uint("id", 0, "")
		fs.String("dir", "", "")
		fs.Duration("lease", time.Second, "")
		fs.Bool("v", false, "")
		var peers listValue
		fs.Var(&peers, "peer", "")
		return fs, &peers
	}
	dir := f.TempDir()
	path := filepath.Join(dir, "seqbus.conf")
	f.Fuzz(func(t *testing.T, text string) {
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		fs, peers := newSet()
		err := ApplyFile(fs, path, nil)
		if err != nil {
			if !strings.Contains(err.Error(), path) {
				t.Fatalf("error %q does not name the file", err)
			}
			return
		}
		// The same settings as flags, in the file's order.
		var args []string
		for _, line := range strings.Split(text, "\n") {
			line = strings.TrimSpace(line)
			if i := strings.IndexByte(line, '#'); i >= 0 {
				line = strings.TrimSpace(line[:i])
			}
			if name, value, ok := strings.Cut(line, "="); ok {
				args = append(args, "--"+strings.TrimLeft(strings.TrimSpace(name), "-")+"="+strings.Trim(strings.TrimSpace(value), `"`))
			}
		}
		cl, clPeers := newSet()
		if err := cl.Parse(args); err != nil {
			t.Fatalf("the file's settings %q as flags: %v", args, err)
		}
		fs.VisitAll(func(fl *flag.Flag) {
			if got, want := fl.Value.String(), cl.Lookup(fl.Name).Value.String(); got != want {
				t.Fatalf("--%s: %q from the file, %q from the command line", fl.Name, got, want)
			}
		})
		if len(*peers) != len(*clPeers) {
			t.Fatalf("peers %v from the file, %v from the command line", *peers, *clPeers)
		}
	})
}
