// Command static checks that binaries are statically linked, as every binary
// that goes into an image must be: kind's node image and control-plane
// images, the webhook's image and cert-manager's are FROM scratch or a
// minimal base without a dynamic loader, so a binary that asks for one
// (a Go binary built with cgo on a machine with a C compiler) starts on the
// host and fails in the image with "exec ...: no such file or directory".
//
//	go run ./hack/static FILE...
//
// It prints one line per binary that is not static, naming it and its
// loader, and exits 1 if there is any; a file that is not an ELF executable
// is an error too (exit 2). It reads the ELF program headers, so it needs no
// tool beyond Go: a binary is dynamically linked when it has a PT_INTERP
// header (the loader the kernel runs first).
package main

import (
	"debug/elf"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(files []string, stdout, stderr io.Writer) int {
	if len(files) == 0 {
		fmt.Fprintln(stderr, "usage: static FILE...")
		return 2
	}
	dynamic, bad := 0, 0
	for _, f := range files {
		interp, err := interpreter(f)
		switch {
		case err != nil:
			fmt.Fprintf(stderr, "%s: %v\n", f, err)
			bad++
		case interp != "":
			fmt.Fprintf(stdout, "%s: dynamically linked (loader %s); an image has no loader: rebuild it with CGO_ENABLED=0 (hack/build-binaries.sh does)\n", f, interp)
			dynamic++
		}
	}
	switch {
	case bad > 0:
		return 2
	case dynamic > 0:
		return 1
	}
	return 0
}

// interpreter returns the dynamic loader file asks for, empty when it is
// statically linked.
func interpreter(file string) (string, error) {
	r, err := os.Open(file)
	if err != nil {
		return "", fmt.Errorf("reading the binary: %w", err)
	}
	defer r.Close()
	magic := make([]byte, len(elf.ELFMAG))
	if _, err := io.ReadFull(r, magic); err != nil || string(magic) != elf.ELFMAG {
		return "", errors.New("not an ELF binary")
	}
	f, err := elf.NewFile(r)
	if err != nil {
		return "", fmt.Errorf("reading the binary: %w", err)
	}
	for _, p := range f.Progs {
		if p.Type != elf.PT_INTERP {
			continue
		}
		b, err := io.ReadAll(p.Open())
		if err != nil {
			return "", fmt.Errorf("reading its PT_INTERP header: %w", err)
		}
		return strings.TrimRight(string(b), "\x00"), nil
	}
	return "", nil
}
