package chart_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/spreadguard/spreadguard/test/chart/valuesdoc"
)

func TestREADMEIsUpToDate(t *testing.T) {
	t.Parallel()
	want, err := valuesdoc.Generate(chartDir)
	if err != nil {
		t.Fatalf("generate README: %v", err)
	}
	got, err := os.ReadFile(filepath.Join(chartDir, valuesdoc.READMEFile))
	if err != nil {
		t.Fatalf("%v (run `make chart-docs`)", err)
	}
	if diff := cmp.Diff(string(want), string(got)); diff != "" {
		t.Errorf("charts/spreadguard/README.md is stale: run `make chart-docs` and commit the result (-generated +in the tree):\n%s", diff)
	}
}

func TestEveryValueIsDocumented(t *testing.T) {
	t.Parallel()
	data, err := os.ReadFile(filepath.Join(chartDir, valuesdoc.ValuesFile))
	if err != nil {
		t.Fatal(err)
	}
	v, err := valuesdoc.Parse(data)
	if err != nil {
		t.Fatal(err)
	}
	if len(v.Undocumented) > 0 {
		t.Errorf("values without a `# --` comment on them or on a key above them: %v", v.Undocumented)
	}
	if len(v.Documented) < 40 {
		t.Errorf("only %d documented values found; the parser lost some", len(v.Documented))
	}
}

// TestSchemaAndValuesAgree checks the direction the schema's validation of
// the defaults does not: every setting the schema accepts has a default, and
// so a documented line, in values.yaml. Kubernetes structures the schema
// describes by reference (affinity, tolerations, ...) are not followed.
func TestSchemaAndValuesAgree(t *testing.T) {
	t.Parallel()
	var schema map[string]any
	data, err := os.ReadFile(filepath.Join(chartDir, "values.schema.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &schema); err != nil {
		t.Fatalf("values.schema.json: %v", err)
	}
	defaults := readValues(t, filepath.Join(chartDir, valuesdoc.ValuesFile))
	var inSchema []string
	var walk func(prefix string, s map[string]any)
	walk = func(prefix string, s map[string]any) {
		if s["type"] == "object" && s["additionalProperties"] != false && prefix != "" && prefix != "global" {
			if _, ok := s["additionalProperties"].(map[string]any); !ok {
				t.Errorf("%s: an object the schema does not close with additionalProperties", prefix)
			}
		}
		props, _ := s["properties"].(map[string]any)
		for name, sub := range props {
			path := strings.TrimPrefix(prefix+"."+name, ".")
			if path == "global" {
				continue
			}
			inSchema = append(inSchema, path)
			if m, ok := sub.(map[string]any); ok {
				walk(path, m)
			}
		}
	}
	walk("", schema)
	slices.Sort(inSchema)
	var missing []string
	for _, path := range inSchema {
		if !hasPath(defaults, strings.Split(path, ".")) {
			missing = append(missing, path)
		}
	}
	if len(missing) > 0 {
		t.Errorf("settings in values.schema.json without a default in values.yaml: %v", missing)
	}
}

func hasPath(m map[string]any, path []string) bool {
	v, ok := m[path[0]]
	if !ok || len(path) == 1 {
		return ok
	}
	sub, ok := v.(map[string]any)
	return ok && hasPath(sub, path[1:])
}
