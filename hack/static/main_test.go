package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// build compiles a one-file main package with cgo on or off into dir.
func build(t *testing.T, dir, name, src string, cgo bool) string {
	t.Helper()
	pkg := filepath.Join(dir, name+"-src")
	if err := os.MkdirAll(pkg, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(pkg, "main.go"), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(pkg, "go.mod"), []byte("module example.com/"+name+"\n\ngo 1.26\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, name)
	cmd := exec.Command("go", "build", "-o", out, ".")
	cmd.Dir = pkg
	enabled := "0"
	if cgo {
		enabled = "1"
	}
	cmd.Env = append(os.Environ(), "CGO_ENABLED="+enabled, "GOFLAGS=")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build %s (CGO_ENABLED=%s): %v\n%s", name, enabled, err, b)
	}
	return out
}

func TestStatic(t *testing.T) {
	if _, err := exec.LookPath("cc"); err != nil {
		t.Skip("no C compiler (cc) to build a dynamically linked binary with")
	}
	dir := t.TempDir()
	static := build(t, dir, "kube-apiserver", "package main\n\nfunc main() {}\n", false)
	// A Go binary that links the C library, as one built with cgo on a
	// machine with a C compiler does.
	dynamic := build(t, dir, "etcd", "package main\n\n// #include <stdlib.h>\nimport \"C\"\n\nfunc main() { C.free(nil) }\n", true)
	text := filepath.Join(dir, "README")
	if err := os.WriteFile(text, []byte("not a binary\n"), 0o644); err != nil {
		t.Fatal(err)
	}

	for _, tc := range []struct {
		name       string
		files      []string
		wantCode   int
		wantOut    []string // a line of stdout starts with each, in order
		wantErrHas string
	}{
		{name: "a static binary passes", files: []string{static}, wantCode: 0},
		{name: "a dynamically linked binary fails and is named", files: []string{static, dynamic}, wantCode: 1,
			wantOut: []string{dynamic + ": dynamically linked (loader /"}},
		{name: "a file that is not ELF is an error that names it", files: []string{text}, wantCode: 2,
			wantErrHas: text + ": not an ELF binary"},
		{name: "a missing file is an error that names it", files: []string{filepath.Join(dir, "kubelet")}, wantCode: 2,
			wantErrHas: filepath.Join(dir, "kubelet") + ": reading the binary"},
		{name: "no file is a usage error", wantCode: 2, wantErrHas: "usage: static FILE..."},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := run(tc.files, &stdout, &stderr)
			if code != tc.wantCode {
				t.Errorf("exit code %d, want %d (stdout %q, stderr %q)", code, tc.wantCode, stdout.String(), stderr.String())
			}
			var got []string
			for _, l := range strings.Split(strings.TrimSpace(stdout.String()), "\n") {
				if l == "" {
					continue
				}
				for _, w := range tc.wantOut {
					if strings.HasPrefix(l, w) {
						l = w
					}
				}
				got = append(got, l)
			}
			if diff := cmp.Diff(tc.wantOut, got); diff != "" {
				t.Errorf("stdout lines (-want,+got):\n%s", diff)
			}
			if !strings.Contains(stderr.String(), tc.wantErrHas) {
				t.Errorf("stderr %q does not contain %q", stderr.String(), tc.wantErrHas)
			}
		})
	}
}
