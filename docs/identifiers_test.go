package docs

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// goPackages are the library's packages the documents name as pkg.Name,
// by directory.
var goPackages = map[string]string{
	"election":     "election",
	"electionprom": "election/electionprom",
	"electionotel": "election/electionotel",
	"electionfake": "election/electionfake",
	"electionhttp": "election/electionhttp",
	"electiontest": "election/electiontest",
	"schema":       "schema",
	"doctor":       "doctor",
	"operator":     "operator",
}

// goDecl is an exported name of a package: its kind (func, interface,
// type, value) and, for a type, its methods.
type goDecl struct {
	kind    string
	methods map[string]bool
}

// exported reads the exported declarations of the package in dir (test
// files left out); a method is also listed under its own name, as the
// documents write operator.Observe for (*Operator).Observe.
func exported(t *testing.T, dir string) map[string]*goDecl {
	t.Helper()
	fset := token.NewFileSet()
	entries, err := os.ReadDir(filepath.Join(root, dir))
	if err != nil {
		t.Fatal(err)
	}
	var files []*ast.File
	for _, e := range entries {
		if n := e.Name(); strings.HasSuffix(n, ".go") && !strings.HasSuffix(n, "_test.go") {
			f, err := parser.ParseFile(fset, filepath.Join(root, dir, n), nil, parser.SkipObjectResolution)
			if err != nil {
				t.Fatal(err)
			}
			files = append(files, f)
		}
	}
	out := map[string]*goDecl{}
	get := func(name, kind string) *goDecl {
		d := out[name]
		if d == nil {
			d = &goDecl{kind: kind, methods: map[string]bool{}}
			out[name] = d
		}
		if kind != "" {
			d.kind = kind
		}
		return d
	}
	for _, f := range files {
		for _, decl := range f.Decls {
			switch d := decl.(type) {
			case *ast.FuncDecl:
				if d.Recv == nil {
					get(d.Name.Name, "func")
					continue
				}
				recv := d.Recv.List[0].Type
				if s, ok := recv.(*ast.StarExpr); ok {
					recv = s.X
				}
				if id, ok := recv.(*ast.Ident); ok && d.Name.IsExported() {
					get(id.Name, "").methods[d.Name.Name] = true
					get(d.Name.Name, "method")
				}
			case *ast.GenDecl:
				for _, spec := range d.Specs {
					switch s := spec.(type) {
					case *ast.TypeSpec:
						kind := "type"
						if it, ok := s.Type.(*ast.InterfaceType); ok {
							kind = "interface"
							for _, m := range it.Methods.List {
								for _, n := range m.Names {
									get(s.Name.Name, "").methods[n.Name] = true
								}
							}
						}
						get(s.Name.Name, kind)
					case *ast.ValueSpec:
						for _, n := range s.Names {
							get(n.Name, "value")
						}
					}
				}
			}
		}
	}
	return out
}

// goRef is `pkg.Name` (or pkg.Name.Field, pkg.Name(…)) in inline code.
var goRef = regexp.MustCompile("`(?:\\*|&)?([a-z]+)\\.([A-Z][A-Za-z0-9_]*)(?:\\.([A-Z][A-Za-z0-9_]*))?[^`]*`")

// exportsVerb is a verb an interface cannot be the subject of.
var exportsVerb = regexp.MustCompile(`\b(exports|serves|collects)\b`)

// TestGoNames checks what the documents say of the library's Go names
// (the CHANGELOG, a history, is left out): each `pkg.Name` exists, and an
// interface is never said to export, serve or collect anything: an
// interface does nothing, its implementations do (electionprom.NewMetrics
// exports Prometheus series; election.Metrics is what it implements).
func TestGoNames(t *testing.T) {
	decls := map[string]map[string]*goDecl{}
	for pkg, dir := range goPackages {
		if _, err := os.Stat(filepath.Join(root, dir)); err != nil {
			t.Errorf("package %s: %v (goPackages lists it)", pkg, err)
			continue
		}
		decls[pkg] = exported(t, dir)
	}
	checked := 0
	for _, file := range markdown(t) {
		if filepath.Base(file) == "CHANGELOG.md" {
			continue
		}
		b, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		text := fence.ReplaceAllString(string(b), "")
		for _, m := range goRef.FindAllStringSubmatchIndex(text, -1) {
			pkg, name := text[m[2]:m[3]], text[m[4]:m[5]]
			names, ok := decls[pkg]
			if !ok {
				continue
			}
			checked++
			d := names[name]
			if d == nil {
				t.Errorf("%s: `%s.%s`: package %s has no exported %s", file, pkg, name, pkg, name)
				continue
			}
			// The rest of the clause, after the reference, up to the
			// next Go name.
			rest := text[m[1]:]
			for _, end := range []string{". ", ".\n", "\n\n", "; "} {
				if i := strings.Index(rest, end); i >= 0 {
					rest = rest[:i]
				}
			}
			if next := goRef.FindStringIndex(rest); next != nil {
				rest = rest[:next[0]]
			}
			if d.kind == "interface" && exportsVerb.MatchString(rest) {
				t.Errorf("%s: `%s.%s` is an interface, which exports nothing: name what implements it (%q)", file, pkg, name, strings.Join(strings.Fields(rest), " "))
			}
		}
	}
	if checked == 0 {
		t.Fatal("no Go names found in the documents: the pattern is broken")
	}
}
