package docs

import (
	"bufio"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

const module = "github.com/spreadguard/spreadguard/"

// TestArchitectureFloorsAreTheImports holds the table of floors in
// architecture.md to the imports `go list` reports (those of the code
// that is not a test): each package under pkg/ and cmd/ is on one row,
// the row names exactly the packages of spreadguard its packages import,
// and every import goes down to a lower floor. The test builders
// (packages named *test) stand apart, imported by tests only.
func TestArchitectureFloorsAreTheImports(t *testing.T) {
	doc, err := os.ReadFile("architecture.md")
	if err != nil {
		t.Fatal(err)
	}
	rows, err := parseFloors(string(doc))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("go", "list", "-f", "{{.ImportPath}}: {{join .Imports \" \"}}", "./pkg/...", "./cmd/...")
	cmd.Dir = ".."
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	imports := parseGoList(string(out))
	for _, problem := range checkFloors(rows, imports) {
		t.Error(problem)
	}
}

// floorRow is a row of the table of floors.
type floorRow struct {
	floor    int
	packages []string
	imports  []string
}

// parseFloors reads the table whose header starts "| floor |".
func parseFloors(doc string) ([]floorRow, error) {
	var rows []floorRow
	in := false
	sc := bufio.NewScanner(strings.NewReader(doc))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		switch {
		case strings.HasPrefix(line, "| floor |"):
			in = true
			continue
		case !in:
			continue
		case !strings.HasPrefix(line, "|"):
			in = false
			continue
		case strings.HasPrefix(line, "| ---"):
			continue
		}
		cells := strings.Split(strings.Trim(line, "|"), "|")
		if len(cells) != 3 {
			return nil, fmt.Errorf("a row of the table of floors without three cells: %s", line)
		}
		floor, err := strconv.Atoi(strings.TrimSpace(cells[0]))
		if err != nil {
			return nil, fmt.Errorf("a row of the table of floors whose floor is not a number: %s", line)
		}
		rows = append(rows, floorRow{floor: floor, packages: backquoted(cells[1]), imports: backquoted(cells[2])})
	}
	if len(rows) == 0 {
		return nil, fmt.Errorf("no table of floors (a header starting %q)", "| floor |")
	}
	return rows, nil
}

func backquoted(cell string) []string {
	var out []string
	for _, m := range codeName.FindAllStringSubmatch(cell, -1) {
		out = append(out, m[1])
	}
	return out
}

// parseGoList reads `go list -f '{{.ImportPath}}: {{join .Imports " "}}'`
// into each package's imports of spreadguard's own packages, by their
// paths in the module.
func parseGoList(out string) map[string][]string {
	imports := map[string][]string{}
	for line := range strings.Lines(out) {
		pkg, imps, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok {
			continue
		}
		own := []string{}
		for _, imp := range strings.Fields(imps) {
			if p, ok := strings.CutPrefix(imp, module); ok {
				own = append(own, p)
			}
		}
		imports[strings.TrimPrefix(pkg, module)] = own
	}
	return imports
}

// isTestBuilder reports whether pkg is a test builder (spreadtest,
// policytest, ...).
func isTestBuilder(pkg string) bool { return strings.HasSuffix(filepath.Base(pkg), "test") }

// checkFloors returns what the rows get wrong of imports.
func checkFloors(rows []floorRow, imports map[string][]string) []string {
	var problems []string
	floorOf := map[string]int{}
	for _, r := range rows {
		for _, p := range r.packages {
			if _, ok := floorOf[p]; ok {
				problems = append(problems, fmt.Sprintf("`%s` is on two rows of the table of floors", p))
			}
			floorOf[p] = r.floor
		}
	}
	for _, pkg := range slices.Sorted(maps.Keys(imports)) {
		if isTestBuilder(pkg) {
			continue
		}
		floor, onRow := floorOf[pkg]
		if !onRow {
			problems = append(problems, fmt.Sprintf("`%s` is on no row of the table of floors", pkg))
		}
		for _, imp := range imports[pkg] {
			if isTestBuilder(imp) {
				problems = append(problems, fmt.Sprintf("`%s` imports the test builder `%s`, which only tests may import", pkg, imp))
				continue
			}
			if f, ok := floorOf[imp]; ok && onRow && f >= floor {
				problems = append(problems, fmt.Sprintf("`%s` (floor %d) imports `%s` on floor %d: imports go down", pkg, floor, imp, f))
			}
		}
	}
	for _, r := range rows {
		got := map[string]bool{}
		for _, p := range r.packages {
			if _, ok := imports[p]; !ok {
				problems = append(problems, fmt.Sprintf("the table of floors names `%s`, which `go list` does not list", p))
			}
			for _, imp := range imports[p] {
				got[imp] = true
			}
		}
		named := map[string]bool{}
		for _, imp := range r.imports {
			named[imp] = true
			if !got[imp] {
				problems = append(problems, fmt.Sprintf("the row of %s names the import `%s`, which `go list` does not report",
					strings.Join(r.packages, ", "), imp))
			}
		}
		for _, imp := range slices.Sorted(maps.Keys(got)) {
			if !named[imp] {
				problems = append(problems, fmt.Sprintf("%s imports `%s`, which its row of the table of floors does not name",
					strings.Join(r.packages, ", "), imp))
			}
		}
	}
	return problems
}

// ownOutput are the files allowed an informer of their own, each with the
// reason: it watches only objects spreadguard itself writes, which no
// decision reads, so that a write someone else undid is made again.
var ownOutput = map[string]string{
	"pkg/controller/spreadhealth/reports.go": "the leader's metadata watch on the Reports it wrote, to write again one that someone deleted",
}

// TestOnlyTheStateAddsInformerHandlers fails when Go code outside
// pkg/state (tests aside) adds a handler to an informer: every controller
// hears of the cluster through the state's one ordered stream of changes,
// after the state holds each change.
func TestOnlyTheStateAddsInformerHandlers(t *testing.T) {
	calls, err := handlerRegistrations(os.DirFS(".."))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range calls {
		file, _, _ := strings.Cut(c, ":")
		if _, ok := ownOutput[file]; ok {
			continue
		}
		if !strings.HasPrefix(c, "pkg/state/") {
			t.Errorf("%s adds a handler to an informer: subscribe to the cluster state (pkg/state) instead", c)
		}
	}
}

// handlerRegistrations returns where the Go code under pkg/ and cmd/ of
// root, tests aside, calls a method named AddEventHandler (or one of its
// variants), as file:line.
func handlerRegistrations(root fs.FS) ([]string, error) {
	var out []string
	for _, top := range []string{"pkg", "cmd"} {
		err := fs.WalkDir(root, top, func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return err
			}
			src, err := fs.ReadFile(root, path)
			if err != nil {
				return err
			}
			fset := token.NewFileSet()
			f, err := parser.ParseFile(fset, path, src, parser.SkipObjectResolution)
			if err != nil {
				return fmt.Errorf("parsing %s: %w", path, err)
			}
			ast.Inspect(f, func(n ast.Node) bool {
				if call, ok := n.(*ast.CallExpr); ok {
					if sel, ok := call.Fun.(*ast.SelectorExpr); ok && strings.HasPrefix(sel.Sel.Name, "AddEventHandler") {
						out = append(out, fmt.Sprintf("%s:%d", path, fset.Position(call.Pos()).Line))
					}
				}
				return true
			})
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("reading the code under %s: %w", top, err)
		}
	}
	return out, nil
}

func TestCheckFloors(t *testing.T) {
	tests := []struct {
		name    string
		rows    []floorRow
		imports map[string][]string
		want    []string
	}{
		{
			name: "every package on a row naming exactly its imports, each lower -> nothing to report",
			rows: []floorRow{
				{floor: 1, packages: []string{"pkg/a"}, imports: []string{"pkg/b"}},
				{floor: 0, packages: []string{"pkg/b"}},
			},
			imports: map[string][]string{"pkg/a": {"pkg/b"}, "pkg/b": {}, "pkg/b/btest": {"pkg/b"}},
		},
		{
			name: "a row naming an import that does not exist -> reported",
			rows: []floorRow{
				{floor: 1, packages: []string{"pkg/a"}, imports: []string{"pkg/b", "pkg/c"}},
				{floor: 0, packages: []string{"pkg/b", "pkg/c"}},
			},
			imports: map[string][]string{"pkg/a": {"pkg/b"}, "pkg/b": {}, "pkg/c": {}},
			want:    []string{"the row of pkg/a names the import `pkg/c`, which `go list` does not report"},
		},
		{
			name: "a package importing what its row does not name -> reported",
			rows: []floorRow{
				{floor: 1, packages: []string{"pkg/a"}},
				{floor: 0, packages: []string{"pkg/b"}},
			},
			imports: map[string][]string{"pkg/a": {"pkg/b"}, "pkg/b": {}},
			want:    []string{"pkg/a imports `pkg/b`, which its row of the table of floors does not name"},
		},
		{
			name: "an import on the same floor, a package on no row, a test builder imported -> each reported",
			rows: []floorRow{
				{floor: 0, packages: []string{"pkg/a", "pkg/b"}, imports: []string{"pkg/b"}},
			},
			imports: map[string][]string{"pkg/a": {"pkg/b"}, "pkg/b": {}, "pkg/c": {"pkg/b/btest"}, "pkg/b/btest": {}},
			want: []string{
				"`pkg/a` (floor 0) imports `pkg/b` on floor 0: imports go down",
				"`pkg/c` is on no row of the table of floors",
				"`pkg/c` imports the test builder `pkg/b/btest`, which only tests may import",
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := checkFloors(tt.rows, tt.imports)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("checkFloors (-want +got):\n%s", diff)
			}
		})
	}
}

func TestHandlerRegistrations(t *testing.T) {
	dir := t.TempDir()
	files := map[string]string{
		"pkg/state/informers.go":  "package state\nfunc f(i I) { i.AddEventHandler(nil) }\n",
		"pkg/other/watch.go":      "package other\nfunc f(i I) {\n\ti.AddEventHandlerWithResyncPeriod(nil, 0)\n}\n",
		"pkg/other/watch_test.go": "package other\nfunc g(i I) { i.AddEventHandler(nil) }\n",
		"cmd/x/main.go":           "package main\n// AddEventHandler in a comment is no call.\nfunc main() {}\n",
	}
	for name, src := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := handlerRegistrations(os.DirFS(dir))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"pkg/other/watch.go:3", "pkg/state/informers.go:2"}, got); diff != "" {
		t.Errorf("handlerRegistrations (-want +got):\n%s", diff)
	}
}
