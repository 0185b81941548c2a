package flagcheck

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
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
		"id = minus one\n":  ":1: id: ",
		"dir = a\nid = -\n": ":2: id: ",
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
