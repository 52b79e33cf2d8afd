// Command chart-docs regenerates a chart's README.md from its README.md.gotmpl,
// Chart.yaml and the `# --` comments of its values.yaml.
//
//	go run ./cmd/chart-docs [-chart ../../charts/spreadguard]
//
// The chart tests fail when the README in the tree differs from what this
// writes, so `make chart-docs` is run after every change to values.yaml.
package main

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"github.com/spreadguard/spreadguard/test/chart/valuesdoc"
)

func main() {
	chartDir := flag.String("chart", "../../charts/spreadguard", "directory of the chart")
	flag.Parse()
	if err := run(*chartDir); err != nil {
		fmt.Fprintf(os.Stderr, "chart-docs: %v\n", err)
		os.Exit(1)
	}
}

func run(chartDir string) error {
	readme, err := valuesdoc.Generate(chartDir)
	if err != nil {
		return err
	}
	path := filepath.Join(chartDir, valuesdoc.READMEFile)
	if old, err := os.ReadFile(path); err == nil && bytes.Equal(old, readme) {
		fmt.Printf("%s is up to date\n", path)
		return nil
	}
	if err := os.WriteFile(path, readme, 0o644); err != nil {
		return fmt.Errorf("write README: %w", err)
	}
	fmt.Printf("wrote %s\n", path)
	return nil
}
