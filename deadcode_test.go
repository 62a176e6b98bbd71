package aegis

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// goFiles returns the Go files of the module by directory (test files
// included), skipping hidden directories and testdata.
func goFiles(t *testing.T) map[string][]string {
	t.Helper()
	dirs := map[string][]string{}
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if name := d.Name(); path != "." && (strings.HasPrefix(name, ".") || name == "testdata" || name == "node_modules") {
				return filepath.SkipDir
			}
			return nil
		}
		if strings.HasSuffix(path, ".go") {
			dirs[filepath.Dir(path)] = append(dirs[filepath.Dir(path)], path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return dirs
}

// TestNoDeadCode: no package keeps an unexported function that nothing in
// it calls or refers to (as the never-called badRequest was), and the
// module uses one YAML library, go.yaml.in/yaml/v3, not two.
func TestNoDeadCode(t *testing.T) {
	var dead, yaml []string
	for dir, files := range goFiles(t) {
		fset := token.NewFileSet()
		decls := map[string]string{} // unexported top-level funcs -> position
		used := map[string]bool{}
		for _, name := range files {
			f, err := parser.ParseFile(fset, name, nil, parser.SkipObjectResolution)
			if err != nil {
				t.Fatal(err)
			}
			for _, im := range f.Imports {
				if p, _ := strconv.Unquote(im.Path.Value); p == "gopkg.in/yaml.v3" {
					yaml = append(yaml, name)
				}
			}
			ast.Inspect(f, func(n ast.Node) bool {
				switch n := n.(type) {
				case *ast.FuncDecl:
					if n.Recv == nil && !n.Name.IsExported() && n.Name.Name != "init" && n.Name.Name != "main" && !strings.HasSuffix(name, "_test.go") {
						decls[n.Name.Name] = fset.Position(n.Pos()).String()
					}
					if n.Body != nil {
						ast.Inspect(n.Body, func(m ast.Node) bool {
							if id, ok := m.(*ast.Ident); ok {
								used[id.Name] = true
							}
							return true
						})
					}
					return false
				case *ast.Ident:
					used[n.Name] = true
				}
				return true
			})
		}
		for fn, pos := range decls {
			if !used[fn] {
				dead = append(dead, fn+" ("+pos+")")
			}
		}
		_ = dir
	}
	sort.Strings(dead)
	for _, d := range dead {
		t.Errorf("unexported function never used in its package: %s", d)
	}
	for _, f := range yaml {
		t.Errorf("%s imports gopkg.in/yaml.v3; the module's YAML library is go.yaml.in/yaml/v3", f)
	}
	if mod, err := os.ReadFile("go.mod"); err != nil || strings.Contains(string(mod), "gopkg.in/yaml.v3 v") && !strings.Contains(string(mod), "gopkg.in/yaml.v3 v3.0.1 // indirect") {
		t.Errorf("go.mod requires gopkg.in/yaml.v3 directly (%v)", err)
	}
}
