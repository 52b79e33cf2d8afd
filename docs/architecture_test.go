// Package docs holds the checks that keep the documents in this directory
// true to the code they describe.
package docs

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestArchitectureNamesEveryPackage fails when a package under pkg/ or a
// command under cmd/ is missing from architecture.md, or when the page
// names a package or file that no longer exists: the page is where a
// newcomer learns what each one is for.
func TestArchitectureNamesEveryPackage(t *testing.T) {
	doc, err := os.ReadFile("architecture.md")
	if err != nil {
		t.Fatal(err)
	}
	got, err := checkNames(os.DirFS(".."), string(doc))
	if err != nil {
		t.Fatal(err)
	}
	for _, pkg := range got.missing {
		t.Errorf("%s holds Go code, but docs/architecture.md does not name it. Add a row to the table of packages "+
			"(and to the table of floors, with what it imports):\n| `%s` | <its one job> |", pkg, pkg)
	}
	for _, name := range got.stale {
		t.Errorf("docs/architecture.md names `%s`, which is neither a package nor a file any more: "+
			"remove it from the page, or name what replaced it", name)
	}
}

// names are the results of checkNames.
type names struct {
	// missing are the packages under pkg/ and cmd/ that the page does not
	// name; stale the names on the page that match nothing in the tree.
	missing, stale []string
}

// codeName is a name in backquotes on the page that points into pkg/ or
// cmd/: a package (`pkg/spread`) or a file (`pkg/cache/kinds.go`).
var codeName = regexp.MustCompile("`((?:pkg|cmd)/[A-Za-z0-9_./-]*[A-Za-z0-9_])`")

// checkNames compares the packages under pkg/ and cmd/ of the tree root with
// the names the page doc gives in backquotes. A package is a directory
// holding a .go file that is not a test, outside testdata: the test helper
// packages count, as their rows tell a reader they exist.
func checkNames(root fs.FS, doc string) (names, error) {
	pkgs := map[string]bool{}
	for _, top := range []string{"pkg", "cmd"} {
		err := fs.WalkDir(root, top, func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() {
				if d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".") || strings.HasPrefix(d.Name(), "_") {
					return fs.SkipDir
				}
				return nil
			}
			if strings.HasSuffix(path, ".go") && !strings.HasSuffix(path, "_test.go") {
				pkgs[filepath.ToSlash(filepath.Dir(path))] = true
			}
			return nil
		})
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return names{}, fmt.Errorf("listing the packages under %s: %w", top, err)
		}
	}

	named := map[string]bool{}
	var n names
	for _, m := range codeName.FindAllStringSubmatch(doc, -1) {
		name := m[1]
		if named[name] {
			continue
		}
		named[name] = true
		if pkgs[name] {
			continue
		}
		if st, err := fs.Stat(root, name); err == nil && !st.IsDir() {
			continue
		}
		n.stale = append(n.stale, name)
	}
	for pkg := range pkgs {
		if !named[pkg] {
			n.missing = append(n.missing, pkg)
		}
	}
	slices.Sort(n.missing)
	slices.Sort(n.stale)
	return n, nil
}

func TestCheckNames(t *testing.T) {
	tree := func(files ...string) fs.FS {
		dir := t.TempDir()
		for _, f := range files {
			p := filepath.Join(dir, f)
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, []byte("package x\n"), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		return os.DirFS(dir)
	}
	tests := []struct {
		name  string
		files []string
		doc   string
		want  names
	}{
		{
			name:  "every package and command named -> nothing to report",
			files: []string{"pkg/spread/index.go", "pkg/spread/spreadtest/pod.go", "cmd/webhook/main.go"},
			doc:   "| `pkg/spread` | x |\n| `pkg/spread/spreadtest` | y |\n| `cmd/webhook` | z |",
		},
		{
			name:  "a new package under pkg/controller not on the page -> missing",
			files: []string{"pkg/spread/index.go", "pkg/controller/leader/leader.go"},
			doc:   "| `pkg/spread` | x |",
			want:  names{missing: []string{"pkg/controller/leader"}},
		},
		{
			name:  "a test helper package not on the page -> missing, as any package",
			files: []string{"pkg/spread/index.go", "pkg/spread/spreadtest/pod.go"},
			doc:   "| `pkg/spread` | x |",
			want:  names{missing: []string{"pkg/spread/spreadtest"}},
		},
		{
			name:  "a command not on the page -> missing",
			files: []string{"cmd/kubectl-spread/main.go"},
			want:  names{missing: []string{"cmd/kubectl-spread"}},
		},
		{
			name:  "the page names pkg/audit, renamed pkg/health -> pkg/audit stale, pkg/health missing",
			files: []string{"pkg/health/health.go"},
			doc:   "`pkg/audit` writes reports",
			want:  names{missing: []string{"pkg/health"}, stale: []string{"pkg/audit"}},
		},
		{
			name:  "a directory with only tests, testdata or a parent of packages is no package",
			files: []string{"pkg/admission/handler.go", "pkg/admission/testdata/fuzz/x.go", "pkg/e2eonly/x_test.go", "pkg/apis/spreadguard/v1alpha1/types.go"},
			doc:   "`pkg/admission` and `pkg/apis/spreadguard/v1alpha1`",
		},
		{
			name:  "a parent directory named as if a package -> stale",
			files: []string{"pkg/apis/spreadguard/v1alpha1/types.go"},
			doc:   "`pkg/apis` and `pkg/apis/spreadguard/v1alpha1`",
			want:  names{stale: []string{"pkg/apis"}},
		},
		{
			name:  "a file the page names exists -> fine; one that is gone -> stale",
			files: []string{"pkg/cache/kinds.go"},
			doc:   "`pkg/cache` lists kinds in `pkg/cache/kinds.go`, once in `pkg/cache/table.go`",
			want:  names{stale: []string{"pkg/cache/table.go"}},
		},
		{
			name:  "names outside backquotes are prose, not names",
			files: []string{"pkg/spread/index.go"},
			doc:   "`pkg/spread`; see pkg/gone for history",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := checkNames(tree(tt.files...), tt.doc)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got, cmp.AllowUnexported(names{})); diff != "" {
				t.Errorf("checkNames (-want +got):\n%s", diff)
			}
		})
	}
}
