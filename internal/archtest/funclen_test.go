package archtest

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"
)

// The length limits of issue 17: a function in the command layer
// (cmd/seqbus keeps flags and printing) is at most cmdFuncMax lines, any
// other non-test function at most funcMax. A function's length runs from
// its func keyword to its closing brace (its doc comment not counted).
const (
	cmdFuncMax = 60
	funcMax    = 80
)

// longExempt lists functions allowed past funcMax, each with its reason
// (none today). Key: package directory and function ("node.New",
// "node.Config.withDefaults"). Remove an entry when its function shrinks;
// the test fails on a stale entry.
var longExempt = map[string]string{}

// funcLen is one function's name and length.
type funcLen struct {
	key, pos string
	lines    int
}

// funcLengths returns, per package directory under root, its non-test
// functions with their lengths.
func funcLengths(t *testing.T, root string) map[string][]funcLen {
	t.Helper()
	out := map[string][]funcLen{}
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
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, filepath.Dir(path))
		if err != nil {
			return err
		}
		pkg := filepath.ToSlash(rel)
		for _, decl := range f.Decls {
			fd, ok := decl.(*ast.FuncDecl)
			if !ok || fd.Body == nil {
				continue
			}
			start, end := fset.Position(fd.Pos()), fset.Position(fd.End())
			out[pkg] = append(out[pkg], funcLen{key: pkg + "." + funcName(fd), pos: start.String(), lines: end.Line - start.Line + 1})
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// funcName is "F" or "Recv.F".
func funcName(fd *ast.FuncDecl) string {
	if fd.Recv == nil || len(fd.Recv.List) == 0 {
		return fd.Name.Name
	}
	typ := fd.Recv.List[0].Type
	for {
		switch x := typ.(type) {
		case *ast.StarExpr:
			typ = x.X
			continue
		case *ast.IndexExpr:
			typ = x.X
			continue
		case *ast.IndexListExpr:
			typ = x.X
			continue
		case *ast.Ident:
			return x.Name + "." + fd.Name.Name
		}
		return fd.Name.Name
	}
}

func TestFunctionLengths(t *testing.T) {
	all := funcLengths(t, filepath.Join("..", ".."))
	if len(all["cmd/seqbus"]) == 0 || len(all["node"]) == 0 {
		t.Fatal("found no functions in cmd/seqbus or node: wrong root?")
	}
	used := map[string]bool{}
	for pkg, fns := range all {
		limit := funcMax
		if pkg == "cmd/seqbus" {
			limit = cmdFuncMax
		}
		for _, f := range fns {
			if f.lines <= limit {
				continue
			}
			if _, ok := longExempt[f.key]; ok {
				used[f.key] = true
				continue
			}
			t.Errorf("%s: %s is %d lines, over the %d of %s: split it", f.pos, f.key, f.lines, limit, pkg)
		}
	}
	for key := range longExempt {
		if !used[key] {
			t.Errorf("longExempt lists %s, which is gone or within the limit: remove the entry", key)
		}
	}
}

// TestFuncNames: the names the exemption list uses.
func TestFuncNames(t *testing.T) {
	src := "package p\nfunc F() {}\nfunc (x *T) M() {}\nfunc (x G[K]) N() {}\nfunc (x H[K, V]) O() {}\n"
	f, err := parser.ParseFile(token.NewFileSet(), "p.go", src, 0)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, d := range f.Decls {
		got = append(got, funcName(d.(*ast.FuncDecl)))
	}
	want := "F T.M G.N H.O"
	if strings.Join(got, " ") != want {
		t.Fatalf("names %v, want %s", got, want)
	}
}
