package cluster

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

func TestTimeline(t *testing.T) {
	path := filepath.Join(t.TempDir(), "node2.log")
	log := "level=INFO msg=started\n" +
		"level=WARN msg=\"PROMOTED to primary\" epoch=2\n" +
		"level=INFO msg=\"ack batch\"\n" +
		"level=INFO msg=\"first release after promotion\" seq=41\n" +
		"level=WARN msg=\"STEPPING DOWN\" epoch=2\n"
	if err := os.WriteFile(path, []byte(log), 0o644); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	WriteTimeline(&buf, path)
	want := "    level=WARN msg=\"PROMOTED to primary\" epoch=2\n" +
		"    level=INFO msg=\"first release after promotion\" seq=41\n" +
		"    level=WARN msg=\"STEPPING DOWN\" epoch=2\n"
	if buf.String() != want {
		t.Fatalf("timeline:\n%s\nwant:\n%s", buf.String(), want)
	}
	if got := Timeline(filepath.Join(t.TempDir(), "missing.log")); got != nil {
		t.Fatalf("missing log: %q", got)
	}
}
