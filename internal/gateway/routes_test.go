package gateway

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// TestDocRoutesMatchServeHTTP: the route list in the package doc names
// every path ServeHTTP routes (an exact path as itself, a prefix as
// prefix{id} or prefix*), and nothing else.
func TestDocRoutesMatchServeHTTP(t *testing.T) {
	code := servedPaths(t)
	doc := documentedPaths(t)
	if strings.Join(code, " ") != strings.Join(doc, " ") {
		t.Errorf("routes.go serves %v\ndoc.go lists   %v", code, doc)
	}
}

// servedPaths reads the path literals of ServeHTTP: compared with ==, in a
// case, or as a prefix (CutPrefix: a path with an {id}; HasPrefix: a
// family, *).
func servedPaths(t *testing.T) []string {
	f, err := parser.ParseFile(token.NewFileSet(), "routes.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	set := map[string]bool{}
	ast.Inspect(f, func(n ast.Node) bool {
		switch x := n.(type) {
		case *ast.CallExpr:
			if sel, ok := x.Fun.(*ast.SelectorExpr); ok && len(x.Args) == 2 {
				if lit, ok := x.Args[1].(*ast.BasicLit); ok && lit.Kind == token.STRING {
					p, _ := strconv.Unquote(lit.Value)
					switch sel.Sel.Name {
					case "CutPrefix":
						set[p+"{id}"] = true
					case "HasPrefix":
						set[p+"*"] = true
					}
				}
			}
			return false
		case *ast.BasicLit:
			if p, err := strconv.Unquote(x.Value); err == nil && x.Kind == token.STRING && strings.HasPrefix(p, "/") {
				set[p] = true
			}
		}
		return true
	})
	return sorted(set)
}

// documentedPaths reads the paths of the doc's "# Routes" list.
func documentedPaths(t *testing.T) []string {
	b, err := os.ReadFile("doc.go")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(b), "// # Routes\n")
	if !ok {
		t.Fatal("doc.go has no # Routes section")
	}
	block, _, _ := strings.Cut(rest, "//\n// ")
	path := regexp.MustCompile(`^/[^\s,]*`)
	set := map[string]bool{}
	for _, line := range strings.Split(block, "\n") {
		line = strings.TrimPrefix(strings.TrimPrefix(line, "//"), "\t")
		for _, m := range []string{"GET, HEAD ", "POST ", "GET  ", "GET "} {
			line = strings.TrimPrefix(line, m)
		}
		for {
			line = strings.TrimSpace(line)
			p := path.FindString(line)
			if p == "" {
				break
			}
			set[p] = true
			line = strings.TrimPrefix(strings.TrimPrefix(line, p), ",")
		}
	}
	return sorted(set)
}

func sorted(set map[string]bool) []string {
	out := make([]string, 0, len(set))
	for p := range set {
		out = append(out, p)
	}
	sort.Strings(out)
	return out
}
