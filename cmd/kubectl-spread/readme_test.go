package main

import (
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// consoleBlock is one "$ kubectl spread ..." session of examples/README.md.
var consoleBlock = regexp.MustCompile("(?s)```console\n\\$ kubectl spread ([^\n]*)\n(.*?)\\$ echo \\$\\?\n(\\d+)\n```")

// TestExamplesREADME keeps the outputs pasted in examples/README.md true:
// every session on the example files is run again and compared.
func TestExamplesREADME(t *testing.T) {
	data, err := os.ReadFile("../../examples/README.md")
	if err != nil {
		t.Fatal(err)
	}
	sessions := consoleBlock.FindAllStringSubmatch(string(data), -1)
	ran := 0
	for _, s := range sessions {
		args := strings.Fields(s[1])
		onExamples := true
		for i, a := range args {
			if strings.HasSuffix(a, ".yaml") {
				if !strings.HasPrefix(a, "examples/") {
					onExamples = false // files made up for the text, e.g. broken.yaml
				}
				args[i] = "../../" + a
			}
		}
		if !onExamples {
			continue
		}
		ran++
		t.Run(s[1], func(t *testing.T) {
			wantCode, _ := strconv.Atoi(s[3])
			got := runCommand(t, args...)
			if diff := cmp.Diff(result{code: wantCode, stdout: s[2]}, got, cmp.AllowUnexported(result{})); diff != "" {
				t.Errorf("README session differs from a fresh run (-README +run):\n%s", diff)
			}
		})
	}
	if ran < 3 {
		t.Errorf("found %d sessions on the example files in examples/README.md, want at least 3", ran)
	}
}
