package cluster

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestLogTail(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x.log")
	if err := os.WriteFile(path, []byte("a\nb\nc\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(LogTail(path, 2), ","); got != "b,c" {
		t.Fatalf("tail 2: %q", got)
	}
	if got := strings.Join(LogTail(path, 8), ","); got != "a,b,c" {
		t.Fatalf("tail 8: %q", got)
	}
	if got := LogTail(path+".missing", 2); got != nil {
		t.Fatalf("missing file: %q", got)
	}
}
