package etcdarb

import (
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestImportsNoOtherBackend (issue 17 item 3): etcdarb speaks the
// arbiter's seam (arbiter.Reply, arbiter.Backend) and nothing of the UDP
// witness's. Of this module's packages, its files (tests included) import
// arbiter and the etcd test helper only; package witness, or wire (the
// witness's frames), would mean the seam leaks again.
func TestImportsNoOtherBackend(t *testing.T) {
	const module = "github.com/seqbus/seqbus/"
	allowed := map[string]bool{module + "arbiter": true, module + "internal/etcdtest": true}
	files, err := filepath.Glob("*.go")
	if err != nil || len(files) == 0 {
		t.Fatalf("no Go files: %v", err)
	}
	fset := token.NewFileSet()
	for _, name := range files {
		f, err := parser.ParseFile(fset, name, nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range f.Imports {
			path, _ := strconv.Unquote(imp.Path.Value)
			if strings.HasPrefix(path, module) && !allowed[path] {
				t.Errorf("%s imports %s: etcdarb may import only arbiter of the seqbus packages", name, path)
			}
		}
	}
}
