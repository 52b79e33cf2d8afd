package v1alpha1_test

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	crdvalidation "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/validation"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/cel"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/defaulting"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/listtype"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/pruning"
	schemavalidation "k8s.io/apiextensions-apiserver/pkg/apiserver/validation"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"k8s.io/apimachinery/pkg/util/validation/field"
	celconfig "k8s.io/apiserver/pkg/apis/cel"
	"sigs.k8s.io/yaml"

	"github.com/spreadguard/spreadguard/pkg/apis/spreadguard/v1alpha1"
)

// These tests read the CRDs that `make generate` writes into the chart and
// run the apiextensions-apiserver's own schema, list-type and CEL
// validators on sample objects, in process. They catch a wrong marker
// quickly; the test against a real kube-apiserver lives elsewhere.

const crdDir = "../../../../charts/spreadguard/files/crds"

var crdFiles = map[string]string{
	v1alpha1.KindSpreadPolicy:        "spreadguard.io_spreadpolicies.yaml",
	v1alpha1.KindClusterSpreadPolicy: "spreadguard.io_clusterspreadpolicies.yaml",
	v1alpha1.KindNodeTemplate:        "spreadguard.io_nodetemplates.yaml",
}

func readCRD(t *testing.T, kind string) *apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	path := filepath.Join(crdDir, crdFiles[kind])
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("reading the CRD (run `make generate`): %v", err)
	}
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := yaml.UnmarshalStrict(data, crd); err != nil {
		t.Fatalf("%s does not parse as a CustomResourceDefinition: %v", path, err)
	}
	return crd
}

func openAPISchema(t *testing.T, crd *apiextensionsv1.CustomResourceDefinition) *apiextensionsv1.JSONSchemaProps {
	t.Helper()
	if len(crd.Spec.Versions) != 1 || crd.Spec.Versions[0].Schema == nil || crd.Spec.Versions[0].Schema.OpenAPIV3Schema == nil {
		t.Fatalf("want exactly one version with an openAPIV3Schema, got %d versions", len(crd.Spec.Versions))
	}
	return crd.Spec.Versions[0].Schema.OpenAPIV3Schema
}

// prop walks properties and items ("[]") down a schema.
func prop(t *testing.T, s *apiextensionsv1.JSONSchemaProps, path ...string) *apiextensionsv1.JSONSchemaProps {
	t.Helper()
	for i, p := range path {
		if p == "[]" {
			if s.Items == nil || s.Items.Schema == nil {
				t.Fatalf("%s has no items schema", strings.Join(path[:i], "."))
			}
			s = s.Items.Schema
			continue
		}
		next, ok := s.Properties[p]
		if !ok {
			t.Fatalf("schema has no %s", strings.Join(path[:i+1], "."))
		}
		s = &next
	}
	return s
}

func enumOf(s *apiextensionsv1.JSONSchemaProps) []string {
	var out []string
	for _, e := range s.Enum {
		out = append(out, strings.Trim(string(e.Raw), `"`))
	}
	return out
}

func TestCRDsParseAndDescribeTheAPI(t *testing.T) {
	type column struct{ Name, Type, JSONPath string }
	wantColumns := []column{
		{"Ready", "string", `.status.conditions[?(@.type=="Ready")].status`},
		{"Workloads", "integer", ".status.workloads"},
		{"Skewed", "integer", ".status.skewed"},
		{"Uncovered", "integer", ".status.uncovered"},
		{"Priority", "integer", ".spec.priority"},
		{"Action", "string", ".spec.validation.action"},
		{"Age", "date", ".metadata.creationTimestamp"},
	}
	tests := []struct {
		kind, plural      string
		scope             apiextensionsv1.ResourceScope
		namespaceSelector bool
	}{
		{kind: "SpreadPolicy", plural: "spreadpolicies", scope: apiextensionsv1.NamespaceScoped},
		{kind: "ClusterSpreadPolicy", plural: "clusterspreadpolicies", scope: apiextensionsv1.ClusterScoped, namespaceSelector: true},
	}
	for _, tt := range tests {
		t.Run(tt.kind+" is "+string(tt.scope)+" in spreadguard.io/v1alpha1", func(t *testing.T) {
			crd := readCRD(t, tt.kind)
			if crd.Name != tt.plural+".spreadguard.io" || crd.Spec.Group != v1alpha1.GroupName ||
				crd.Spec.Names.Kind != tt.kind || crd.Spec.Names.Plural != tt.plural || crd.Spec.Scope != tt.scope {
				t.Errorf("got %s: group %s, kind %s, plural %s, scope %s", crd.Name, crd.Spec.Group, crd.Spec.Names.Kind, crd.Spec.Names.Plural, crd.Spec.Scope)
			}
			v := crd.Spec.Versions[0]
			// The status subresource: the audit patches status alone, and a
			// spec edit never overwrites what it wrote.
			if v.Name != v1alpha1.GroupVersion.Version || !v.Served || !v.Storage || v.Subresources == nil || v.Subresources.Status == nil {
				t.Errorf("version %s: served %t, storage %t, subresources %v; want v1alpha1, served, storage, a status subresource", v.Name, v.Served, v.Storage, v.Subresources)
			}
			for _, f := range []string{"observedGeneration", "conditions", "workloads", "spread", "skewed", "uncovered"} {
				if _, ok := prop(t, v.Schema.OpenAPIV3Schema, "status").Properties[f]; !ok {
					t.Errorf("status.%s is missing from the schema", f)
				}
			}
			var gotColumns []column
			for _, c := range v.AdditionalPrinterColumns {
				gotColumns = append(gotColumns, column{c.Name, c.Type, c.JSONPath})
			}
			if diff := cmp.Diff(wantColumns, gotColumns); diff != "" {
				t.Errorf("printer columns (-want +got):\n%s", diff)
			}

			root := openAPISchema(t, crd)
			if _, ok := prop(t, root, "spec").Properties["namespaceSelector"]; ok != tt.namespaceSelector {
				t.Errorf("spec.namespaceSelector present = %t, want %t", ok, tt.namespaceSelector)
			}
			if got := prop(t, root, "spec").Required; !slices.Contains(got, "constraints") {
				t.Errorf("spec.required = %v, want constraints in it", got)
			}
			if d := prop(t, root, "spec", "priority").Default; d == nil || string(d.Raw) != "0" {
				t.Errorf("spec.priority default = %v, want 0", d)
			}
			if got := enumOf(prop(t, root, "spec", "validation", "action")); !slices.Equal(got, []string{"Deny", "Warn", "Audit"}) {
				t.Errorf("spec.validation.action enum = %v", got)
			}

			constraints := prop(t, root, "spec", "constraints")
			if constraints.MinItems == nil || *constraints.MinItems != 1 || constraints.MaxItems == nil || *constraints.MaxItems != 8 {
				t.Errorf("spec.constraints items: min %v max %v, want 1 and 8", constraints.MinItems, constraints.MaxItems)
			}
			if constraints.XListType == nil || *constraints.XListType != "map" ||
				!slices.Equal(constraints.XListMapKeys, []string{"topologyKey", "whenUnsatisfiable"}) {
				t.Errorf("spec.constraints list type %v keys %v, want a map keyed by topologyKey and whenUnsatisfiable", constraints.XListType, constraints.XListMapKeys)
			}

			item := prop(t, constraints, "[]")
			type rule struct{ Rule, MessageStart string }
			var gotRules []rule
			for _, r := range item.XValidations {
				gotRules = append(gotRules, rule{r.Rule, r.Message[:min(len(r.Message), 40)]})
			}
			wantRules := []rule{
				{"!has(self.labelSelector)", "labelSelector must not be set: spreadgua"},
				{"!has(self.minDomains) || self.whenUnsatisfiable == 'DoNotSchedule'", "minDomains can only be used with whenUns"},
			}
			if diff := cmp.Diff(wantRules, gotRules); diff != "" {
				t.Errorf("CEL rules on spec.constraints[*] (-want +got):\n%s", diff)
			}
			if _, ok := item.Properties["labelSelector"]; !ok {
				t.Errorf("spec.constraints[*].labelSelector must stay in the schema, or it is pruned instead of refused")
			}
			for _, f := range []string{"maxSkew", "minDomains"} {
				if m := prop(t, item, f).Minimum; m == nil || *m != 1 {
					t.Errorf("spec.constraints[*].%s minimum = %v, want 1", f, m)
				}
			}
			if m := prop(t, item, "topologyKey").MinLength; m == nil || *m != 1 {
				t.Errorf("spec.constraints[*].topologyKey minLength = %v, want 1", m)
			}
			if got := enumOf(prop(t, item, "whenUnsatisfiable")); !slices.Equal(got, []string{"DoNotSchedule", "ScheduleAnyway"}) {
				t.Errorf("whenUnsatisfiable enum = %v", got)
			}
			for _, f := range []string{"nodeAffinityPolicy", "nodeTaintsPolicy"} {
				if got := enumOf(prop(t, item, f)); !slices.Equal(got, []string{"Honor", "Ignore"}) {
					t.Errorf("%s enum = %v", f, got)
				}
			}
			if lt := prop(t, item, "matchLabelKeys").XListType; lt == nil || *lt != "set" {
				t.Errorf("matchLabelKeys list type = %v, want set", lt)
			}
			if !slices.Equal(item.Required, []string{"maxSkew", "topologyKey", "whenUnsatisfiable"}) {
				t.Errorf("spec.constraints[*].required = %v", item.Required)
			}
		})
	}
}

// TestCRDsPassTheAPIServersCRDValidation runs the validation the apiserver
// applies when the CRD is created: structural schema, list-map keys, and
// that every CEL rule compiles within the cost budget.
func TestCRDsPassTheAPIServersCRDValidation(t *testing.T) {
	for kind := range crdFiles {
		t.Run(kind, func(t *testing.T) {
			crd := readCRD(t, kind)
			internal := &apiextensions.CustomResourceDefinition{}
			if err := apiextensionsv1.Convert_v1_CustomResourceDefinition_To_apiextensions_CustomResourceDefinition(crd, internal, nil); err != nil {
				t.Fatalf("converting: %v", err)
			}
			internal.Status.StoredVersions = []string{v1alpha1.GroupVersion.Version}
			if errs := crdvalidation.ValidateCustomResourceDefinition(t.Context(), internal); len(errs) > 0 {
				t.Errorf("the apiserver would refuse the CRD: %v", errs)
			}
		})
	}
}

// admitter validates objects as the apiserver does on create, minus
// admission: prune, default, then schema, list types and CEL.
type admitter struct {
	structural *structuralschema.Structural
	schema     schemavalidation.SchemaCreateValidator
	cel        *cel.Validator
}

func newAdmitter(t *testing.T, kind string) *admitter {
	t.Helper()
	internal := &apiextensions.JSONSchemaProps{}
	if err := apiextensionsv1.Convert_v1_JSONSchemaProps_To_apiextensions_JSONSchemaProps(openAPISchema(t, readCRD(t, kind)), internal, nil); err != nil {
		t.Fatalf("converting the schema: %v", err)
	}
	structural, err := structuralschema.NewStructural(internal)
	if err != nil {
		t.Fatalf("the schema is not structural: %v", err)
	}
	sv, _, err := schemavalidation.NewSchemaValidator(internal)
	if err != nil {
		t.Fatalf("building the schema validator: %v", err)
	}
	return &admitter{structural: structural, schema: sv, cel: cel.NewValidator(structural, true, celconfig.PerCallLimit)}
}

func (a *admitter) admit(t *testing.T, doc string) (map[string]any, field.ErrorList) {
	t.Helper()
	// Decode as the apiserver does: JSON numbers without a fraction become
	// int64, which the CEL and OpenAPI validators expect.
	data, err := yaml.YAMLToJSON([]byte(doc))
	if err != nil {
		t.Fatalf("test object does not parse: %v", err)
	}
	var obj map[string]any
	if err := utiljson.Unmarshal(data, &obj); err != nil {
		t.Fatalf("test object does not parse: %v", err)
	}
	pruning.Prune(obj, a.structural, true)
	defaulting.Default(obj, a.structural)
	errs := schemavalidation.ValidateCustomResource(nil, obj, a.schema)
	errs = append(errs, listtype.ValidateListSetsAndMaps(nil, a.structural, obj)...)
	celErrs, _ := a.cel.Validate(t.Context(), nil, a.structural, obj, nil, celconfig.RuntimeCELCostBudget)
	return obj, append(errs, celErrs...)
}

func TestCRDSchemaAdmitsAndRefuses(t *testing.T) {
	const zone = "{maxSkew: 1, topologyKey: topology.kubernetes.io/zone, whenUnsatisfiable: DoNotSchedule}"
	var keys []string
	for i := range 9 {
		keys = append(keys, fmt.Sprintf("{maxSkew: 1, topologyKey: example.com/level-%d, whenUnsatisfiable: DoNotSchedule}", i))
	}
	nineConstraints := "{constraints: [" + strings.Join(keys, ", ") + "]}"
	tests := []struct {
		name string
		kind string
		spec string
		// want are substrings, one per expected error, in order; none means
		// the object is admitted.
		want []string
	}{
		{name: "one zone constraint -> admitted", kind: "SpreadPolicy", spec: "{constraints: [" + zone + "]}"},
		{name: "every field set -> admitted", kind: "ClusterSpreadPolicy", spec: `{priority: -2, validation: {action: Audit},
			namespaceSelector: {matchLabels: {env: prod}}, podSelector: {matchExpressions: [{key: app, operator: Exists}]},
			constraints: [{maxSkew: 2, topologyKey: topology.kubernetes.io/zone, whenUnsatisfiable: DoNotSchedule, minDomains: 3,
			               nodeAffinityPolicy: Ignore, nodeTaintsPolicy: Honor, matchLabelKeys: [pod-template-hash]},
			              {maxSkew: 1, topologyKey: topology.kubernetes.io/zone, whenUnsatisfiable: ScheduleAnyway}]}`},
		{name: "labelSelector set -> refused by CEL, saying it is derived", kind: "SpreadPolicy",
			spec: "{constraints: [{maxSkew: 1, topologyKey: zone, whenUnsatisfiable: DoNotSchedule, labelSelector: {matchLabels: {app: web}}}]}",
			want: []string{"spec.constraints[0]: Invalid value: labelSelector must not be set: spreadguard derives"}},
		{name: "empty labelSelector {} -> refused as well", kind: "ClusterSpreadPolicy",
			spec: "{constraints: [{maxSkew: 1, topologyKey: zone, whenUnsatisfiable: DoNotSchedule, labelSelector: {}}]}",
			want: []string{"labelSelector must not be set"}},
		{name: "minDomains 2 with ScheduleAnyway -> refused by CEL", kind: "SpreadPolicy",
			spec: "{constraints: [{maxSkew: 1, topologyKey: zone, whenUnsatisfiable: ScheduleAnyway, minDomains: 2}]}",
			want: []string{"spec.constraints[0]: Invalid value: minDomains can only be used with whenUnsatisfiable: DoNotSchedule"}},
		{name: "maxSkew 0 -> below the minimum", kind: "SpreadPolicy",
			spec: "{constraints: [{maxSkew: 0, topologyKey: zone, whenUnsatisfiable: DoNotSchedule}]}",
			want: []string{"spec.constraints[0].maxSkew: Invalid value: 0: spec.constraints[0].maxSkew in body should be greater than or equal to 1"}},
		{name: "minDomains 0 -> below the minimum", kind: "SpreadPolicy",
			spec: "{constraints: [{maxSkew: 1, topologyKey: zone, whenUnsatisfiable: DoNotSchedule, minDomains: 0}]}",
			want: []string{"spec.constraints[0].minDomains: Invalid value: 0"}},
		{name: "empty topologyKey -> too short, and not a label key", kind: "SpreadPolicy",
			spec: "{constraints: [{maxSkew: 1, topologyKey: '', whenUnsatisfiable: DoNotSchedule}]}",
			want: []string{"spec.constraints[0].topologyKey: Invalid value: \"\"", "topologyKey must be a node label key"}},
		{name: "whenUnsatisfiable Sometimes -> unsupported", kind: "SpreadPolicy",
			spec: "{constraints: [{maxSkew: 1, topologyKey: zone, whenUnsatisfiable: Sometimes}]}",
			want: []string{"spec.constraints[0].whenUnsatisfiable: Unsupported value: \"Sometimes\""}},
		{name: "nodeTaintsPolicy Always -> unsupported", kind: "ClusterSpreadPolicy",
			spec: "{constraints: [{maxSkew: 1, topologyKey: zone, whenUnsatisfiable: DoNotSchedule, nodeTaintsPolicy: Always}]}",
			want: []string{"spec.constraints[0].nodeTaintsPolicy: Unsupported value: \"Always\""}},
		{name: "action Block -> unsupported", kind: "SpreadPolicy", spec: "{validation: {action: Block}, constraints: [" + zone + "]}",
			want: []string{"spec.validation.action: Unsupported value: \"Block\""}},
		{name: "no constraints -> at least 1", kind: "SpreadPolicy", spec: "{constraints: []}",
			want: []string{"spec.constraints: Invalid value: 0: spec.constraints in body should have at least 1 items"}},
		{name: "constraints missing -> required", kind: "ClusterSpreadPolicy", spec: "{priority: 1}",
			want: []string{"spec.constraints: Required value"}},
		{name: "9 constraints -> at most 8", kind: "SpreadPolicy", spec: nineConstraints,
			want: []string{"spec.constraints: Too many: 9: must have at most 8 items"}},
		{name: "{zone, DoNotSchedule} twice -> duplicate map key", kind: "SpreadPolicy", spec: "{constraints: [" + zone + ", " + zone + "]}",
			want: []string{"spec.constraints[1]: Duplicate value"}},
		{name: "topologyKey with a space -> refused by the qualified-name pattern", kind: "SpreadPolicy",
			spec: "{constraints: [{maxSkew: 1, topologyKey: 'zone a', whenUnsatisfiable: DoNotSchedule}]}",
			want: []string{"topologyKey must be a node label key"}},
		{name: "topologyKey with two slashes -> refused", kind: "ClusterSpreadPolicy",
			spec: "{constraints: [{maxSkew: 1, topologyKey: a/b/c, whenUnsatisfiable: DoNotSchedule}]}",
			want: []string{"topologyKey must be a node label key"}},
		{name: "topologyKey of a 64-character name -> refused", kind: "SpreadPolicy",
			spec: "{constraints: [{maxSkew: 1, topologyKey: example.com/" + strings.Repeat("n", 64) + ", whenUnsatisfiable: DoNotSchedule}]}",
			want: []string{"topologyKey must be a node label key"}},
		{name: "podSelector operator 'in' in lower case -> refused, naming the operators", kind: "SpreadPolicy",
			spec: "{podSelector: {matchExpressions: [{key: app, operator: in, values: [web]}]}, constraints: [" + zone + "]}",
			want: []string{"spec.podSelector: Invalid value: every matchExpressions operator must be In, NotIn, Exists or DoesNotExist"}},
		{name: "namespaceSelector In without values -> refused", kind: "ClusterSpreadPolicy",
			spec: "{namespaceSelector: {matchExpressions: [{key: env, operator: In}]}, constraints: [" + zone + "]}",
			want: []string{"spec.namespaceSelector: Invalid value: In and NotIn need at least one value"}},
		{name: "podSelector Exists with values -> refused", kind: "ClusterSpreadPolicy",
			spec: "{podSelector: {matchExpressions: [{key: app, operator: Exists, values: [web]}]}, constraints: [" + zone + "]}",
			want: []string{"spec.podSelector: Invalid value: In and NotIn need at least one value; Exists and DoesNotExist take none"}},
		{name: "matchLabelKeys [a, a] -> duplicate set item", kind: "SpreadPolicy",
			spec: "{constraints: [{maxSkew: 1, topologyKey: zone, whenUnsatisfiable: DoNotSchedule, matchLabelKeys: [a, a]}]}",
			want: []string{"spec.constraints[0].matchLabelKeys[1]: Duplicate value: \"a\""}},
		{name: "fallback with after 30s and 2 domains -> admitted", kind: "SpreadPolicy",
			spec: "{fallback: {after: 30s, maxDomains: 2}, constraints: [" + zone + "]}"},
		{name: "fallback after 5s -> refused by CEL, naming the minimum", kind: "ClusterSpreadPolicy",
			spec: "{fallback: {after: 5s}, constraints: [" + zone + "]}",
			want: []string{"spec.fallback.after: Invalid value: \"5s\": after must be a duration of at least 10s"}},
		{name: "fallback after soon -> refused, not a duration", kind: "SpreadPolicy",
			spec: "{fallback: {after: soon}, constraints: [" + zone + "]}",
			want: []string{"spec.fallback.after"}},
		{name: "fallback maxDomains 0 -> below the minimum", kind: "SpreadPolicy",
			spec: "{fallback: {maxDomains: 0}, constraints: [" + zone + "]}",
			want: []string{"spec.fallback.maxDomains: Invalid value: 0: spec.fallback.maxDomains in body should be greater than or equal to 1"}},
		{name: "a GPU node group scaled to zero, labels and a taint -> admitted", kind: "NodeTemplate",
			spec: "{labels: {topology.kubernetes.io/zone: c, gpu: 'true'}, taints: [{key: gpu, value: 'true', effect: NoSchedule}]}"},
		{name: "a taint without a key or effect -> refused", kind: "NodeTemplate",
			spec: "{taints: [{value: x}]}",
			want: []string{"spec.taints[0].effect: Required value", "spec.taints[0].key: Required value"}},
	}
	admitters := map[string]*admitter{}
	for kind := range crdFiles {
		admitters[kind] = newAdmitter(t, kind)
	}
	for _, tt := range tests {
		t.Run(tt.kind+": "+tt.name, func(t *testing.T) {
			doc := "{apiVersion: spreadguard.io/v1alpha1, kind: " + tt.kind + ", metadata: {name: p}, spec: " + tt.spec + "}"
			_, errs := admitters[tt.kind].admit(t, doc)
			if len(errs) != len(tt.want) {
				t.Fatalf("got %d errors, want %d: %v", len(errs), len(tt.want), errs)
			}
			for i, want := range tt.want {
				if !strings.Contains(errs[i].Error(), want) {
					t.Errorf("error %d = %q, want it to contain %q", i, errs[i].Error(), want)
				}
			}
		})
	}
}

func TestCRDSchemaDefaultsAndPrunes(t *testing.T) {
	a := newAdmitter(t, v1alpha1.KindSpreadPolicy)
	obj, errs := a.admit(t, `{apiVersion: spreadguard.io/v1alpha1, kind: SpreadPolicy, metadata: {name: p},
		spec: {namespaceSelector: {matchLabels: {env: prod}}, unknown: 1,
		       constraints: [{maxSkew: 1, topologyKey: zone, whenUnsatisfiable: DoNotSchedule}]}}`)
	if len(errs) > 0 {
		t.Fatalf("admit: %v", errs)
	}
	want := map[string]any{
		"priority":     int64(0),
		"deletionCost": "Enabled",
		"constraints":  []any{map[string]any{"maxSkew": int64(1), "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule"}},
	}
	// A namespaceSelector means nothing on a namespaced policy; the schema
	// drops it (and kubectl warns about the unknown field).
	if diff := cmp.Diff(want, obj["spec"]); diff != "" {
		t.Errorf("spec after pruning and defaulting (-want +got):\n%s", diff)
	}

	// An empty fallback is on, with its defaults written in.
	obj, errs = a.admit(t, `{apiVersion: spreadguard.io/v1alpha1, kind: SpreadPolicy, metadata: {name: p},
		spec: {fallback: {}, constraints: [{maxSkew: 1, topologyKey: zone, whenUnsatisfiable: DoNotSchedule}]}}`)
	if len(errs) > 0 {
		t.Fatalf("admit: %v", errs)
	}
	if diff := cmp.Diff(map[string]any{"after": "10m", "maxDomains": int64(1)}, obj["spec"].(map[string]any)["fallback"]); diff != "" {
		t.Errorf("spec.fallback after defaulting (-want +got):\n%s", diff)
	}
}
