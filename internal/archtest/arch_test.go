// Package archtest checks the import table of docs/architecture.md
// against the code: each package imports, of this module, only what its
// row allows (non-test files), and a new package needs a row.
package archtest

import (
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

const module = "github.com/seqbus/seqbus/"

// mayImport is docs/architecture.md's table. "*" allows anything.
var mayImport = map[string][]string{
	"wire":                {},
	"arbiter":             {},
	"gating":              {},
	"engine":              {},
	"sequencer":           {"wire"},
	"standby":             {"wire"},
	"mdfeed":              {"engine", "wire"},
	"replica":             {"arbiter", "engine", "gating", "sequencer", "standby", "wire"},
	"session":             {"engine", "wire"},
	"auth":                {"wire"}, // auth.Frames: the key of each frame class
	"bus":                 {},
	"journal":             {},
	"internal/monotime":   {},
	"internal/stagetrace": {},
	"internal/netns":      {},
	"internal/etcdtest":   {},
	"internal/syncbuf":    {},
	"internal/dirlock":    {},
	"internal/enginetest": {"engine"},
	"internal/pace":       {"internal/monotime"},
	"witness":             {"arbiter", "auth", "bus", "wire", "internal/dirlock"},
	"etcdarb":             {"arbiter"},
	"status":              {"arbiter", "bus", "mdfeed", "replica", "session", "snapshot", "storage", "transport", "wire"},
	"transport":           {"auth", "bus", "wire"},
	"snapshot":            {"engine", "journal", "sequencer", "wire"},
	"lease":               {"arbiter", "witness"},
	"storage":             {"bus", "engine", "journal", "snapshot", "internal/dirlock"},
	"nodeconfig":          {"arbiter", "auth", "bus", "engine", "journal", "mdfeed", "replica", "sequencer", "session", "standby", "transport", "wire"},
	"node": {"arbiter", "bus", "engine", "journal", "lease", "mdfeed", "nodeconfig", "replica", "session", "snapshot", "status", "storage", "transport", "wire",
		"internal/monotime"},
	"client":             {"arbiter", "auth", "bus", "engine", "wire", "witness", "internal/monotime", "internal/pace"},
	"internal/verdict":   {"client", "engine", "journal"},
	"internal/metrics":   {"arbiter", "node", "status", "witness"},
	"internal/nodetrace": {"engine", "nodeconfig", "status", "internal/monotime", "internal/stagetrace"},
	"internal/cluster":   {"arbiter", "auth", "bus", "client", "engine", "etcdarb", "journal", "mdfeed", "status", "wire", "internal/stagetrace", "internal/verdict"},
	"bench":              {"bus", "internal/cluster", "internal/monotime", "internal/pace"},
	"sim":                {"arbiter", "auth", "bus", "client", "engine", "journal", "node", "nodeconfig", "session", "transport", "wire", "witness"},
	"cmd/seqbus":         {"*"},

	// Under the command layer: what `seqbus demo`, `drill`, `stat` and
	// `bench latency|throughput` run (cmd/seqbus keeps flags and printing).
	"internal/demo":        {"auth", "client", "engine", "internal/cluster", "internal/flagcheck", "internal/verdict"},
	"internal/drill":       {"client", "engine", "internal/cluster", "internal/verdict"},
	"internal/chaos":       {"arbiter", "auth", "client", "engine", "internal/cluster", "internal/flagcheck", "internal/verdict", "journal"},
	"internal/statview":    {},
	"internal/journalview": {"engine", "journal"},
	"internal/flagcheck":   {"auth", "bus", "internal/stagetrace", "journal", "wire"},
	"internal/loadclient":  {"bus", "client", "etcdarb", "internal/cluster", "internal/flagcheck", "internal/stagetrace"},
	"internal/serve":       {"arbiter", "bus", "engine", "etcdarb", "internal/flagcheck", "internal/metrics", "internal/nodetrace", "internal/stagetrace", "journal", "node", "nodeconfig", "witness"},
	"bench/suite":          {"bench", "client", "internal/cluster", "internal/flagcheck", "internal/monotime", "internal/pace", "internal/stagetrace"},
}

// imports returns, per package directory under root, the module packages
// its non-test files import.
func imports(t *testing.T, root string) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if name := d.Name(); path != root && (strings.HasPrefix(name, ".") || name == "testdata") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, filepath.Dir(path))
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		if _, ok := out[rel]; !ok {
			out[rel] = []string{}
		}
		for _, imp := range f.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			if dep, ok := strings.CutPrefix(p, module); ok && !slices.Contains(out[rel], dep) {
				out[rel] = append(out[rel], dep)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestImportsFollowTheLayers(t *testing.T) {
	got := imports(t, filepath.Join("..", ".."))
	if len(got) < len(mayImport) {
		t.Fatalf("found %d packages, fewer than the table's %d: wrong root?", len(got), len(mayImport))
	}
	for pkg, deps := range got {
		allowed, ok := mayImport[pkg]
		if !ok {
			t.Errorf("package %s has no row in docs/architecture.md (and mayImport): say what it may import", pkg)
			continue
		}
		if slices.Contains(allowed, "*") {
			continue
		}
		for _, dep := range deps {
			if !slices.Contains(allowed, dep) {
				t.Errorf("%s imports %s, which docs/architecture.md does not allow", pkg, dep)
			}
		}
	}
}

// pureStd are the standard packages a pure core must not import: no
// socket, file, clock, lock or goroutine plumbing (docs/architecture.md).
var pureStd = []string{"net", "net/netip", "os", "time", "sync", "sync/atomic", "io/fs", "syscall", "runtime"}

// pureCores are checked against pureStd.
var pureCores = []string{"replica", "mdfeed", "session", "sequencer"}

func TestPureCoresImportNoIO(t *testing.T) {
	fset := token.NewFileSet()
	for _, pkg := range pureCores {
		dir := filepath.Join("..", "..", pkg)
		files, err := filepath.Glob(filepath.Join(dir, "*.go"))
		if err != nil || len(files) == 0 {
			t.Fatalf("package %s: no files (%v)", pkg, err)
		}
		for _, path := range files {
			if strings.HasSuffix(path, "_test.go") {
				continue
			}
			f, err := parser.ParseFile(fset, path, nil, parser.ImportsOnly)
			if err != nil {
				t.Fatal(err)
			}
			for _, imp := range f.Imports {
				p, _ := strconv.Unquote(imp.Path.Value)
				if slices.Contains(pureStd, p) {
					t.Errorf("%s imports %s: a pure core takes time as nowNs and does no I/O", path, p)
				}
			}
		}
	}
}
