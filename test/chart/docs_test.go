package chart_test

import (
	"encoding/json"
	"maps"
	"os"
	"path/filepath"
	"regexp"
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

// The README's adoption from 0.1.0 must hand the release every CRD a
// released chart installed from crds/: SpreadPolicy and ClusterSpreadPolicy
// from the first 0.1.0, NodeTemplate too from the later ones. Those are the
// chart's CRDs of the spreadguard.io group (files/crds), and the command
// picks them by name from `kubectl get crd -o name`; other CRDs, which
// another release or tool may own, it must leave alone. The e2e suite's
// TestUpgrade runs the command on a cluster.
func TestREADMEAdoptsEveryCRDOfARelease(t *testing.T) {
	t.Parallel()
	data, err := os.ReadFile(filepath.Join(chartDir, valuesdoc.READMEFile))
	if err != nil {
		t.Fatal(err)
	}
	section, _, _ := strings.Cut(string(data)[strings.Index(string(data), "### From 0.1.0"):], "\n## ")
	block, _, ok := strings.Cut(section[strings.Index(section, "```sh\n")+len("```sh\n"):], "```")
	if !ok {
		t.Fatalf("no sh block in the README's section \"From 0.1.0\":\n%s", section)
	}
	m := regexp.MustCompile(`kubectl get crd -o name \| grep '([^']+)' \| xargs kubectl patch --type merge -p \\\n\s*'([^']+)'`).FindStringSubmatch(block)
	if m == nil {
		t.Fatalf("the adoption is not `kubectl get crd -o name | grep PATTERN | xargs kubectl patch --type merge -p PATCH`:\n%s", block)
	}
	pattern := regexp.MustCompile(m[1])
	adopted := func(name string) bool {
		return pattern.MatchString("customresourcedefinition.apiextensions.k8s.io/" + name)
	}
	crds, err := filepath.Glob(filepath.Join(chartDir, "files", "crds", "*.yaml"))
	if err != nil || len(crds) == 0 {
		t.Fatalf("no CRDs in files/crds: %v", err)
	}
	var names []string
	for _, f := range crds {
		// spreadguard.io_nodetemplates.yaml holds nodetemplates.spreadguard.io.
		group, plural, _ := strings.Cut(strings.TrimSuffix(filepath.Base(f), ".yaml"), "_")
		names = append(names, plural+"."+group)
	}
	wantReleased := []string{"clusterspreadpolicies.spreadguard.io", "nodetemplates.spreadguard.io", "spreadpolicies.spreadguard.io"}
	for _, name := range wantReleased {
		if !slices.Contains(names, name) {
			t.Errorf("files/crds no longer holds %s, which chart 0.1.0 installed", name)
		}
	}
	for _, name := range names {
		if !adopted(name) {
			t.Errorf("the README's command does not adopt %s", name)
		}
	}
	for _, name := range []string{"reports.openreports.io", "nodepools.karpenter.sh", "spreadguard.io.example.com", "policies.notspreadguard.io"} {
		if adopted(name) {
			t.Errorf("the README's command adopts %s, which is not spreadguard's", name)
		}
	}
	var patch struct {
		Metadata struct {
			Labels      map[string]string `json:"labels"`
			Annotations map[string]string `json:"annotations"`
		} `json:"metadata"`
	}
	if err := json.Unmarshal([]byte(m[2]), &patch); err != nil {
		t.Fatalf("the README's patch is not JSON: %v\n%s", err, m[2])
	}
	want := map[string]string{"app.kubernetes.io/managed-by": "Helm", "meta.helm.sh/release-name": "RELEASE", "meta.helm.sh/release-namespace": "NAMESPACE"}
	got := map[string]string{}
	maps.Copy(got, patch.Metadata.Labels)
	maps.Copy(got, patch.Metadata.Annotations)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("the ownership metadata the README's patch sets (-Helm's +README):\n%s", diff)
	}
}
