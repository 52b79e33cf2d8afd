package valuesdoc

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParse(t *testing.T) {
	tests := []struct {
		name             string
		yaml             string
		want             []Value
		wantUndocumented []string
	}{
		{
			name: "a documented scalar -> one row with its type and JSON default",
			yaml: "# -- How many.\nreplicaCount: 2\n",
			want: []Value{{Key: "replicaCount", Type: "int", Default: "2", Description: "How many."}},
		},
		{
			name: "a description over several lines -> joined by spaces; lines above `# --` dropped",
			yaml: "# Section header.\n#\n# -- First line,\n# second line.\nname: \"\"\n",
			want: []Value{{Key: "name", Type: "string", Default: `""`, Description: "First line, second line."}},
		},
		{
			name:             "a blank line between comment and key -> the comment documents nothing",
			yaml:             "# -- Orphan.\n\nname: x\n",
			wantUndocumented: []string{"name"},
		},
		{
			name:             "nested keys -> dotted paths; an undocumented parent needs documented children",
			yaml:             "image:\n  # -- Repository.\n  repository: ghcr.io/x\n  tag: \"\"\n",
			want:             []Value{{Key: "image.repository", Type: "string", Default: `"ghcr.io/x"`, Description: "Repository."}},
			wantUndocumented: []string{"image.tag"},
		},
		{
			name: "a documented map -> covers its children, which may still have rows of their own",
			yaml: "# -- Resources.\nresources:\n  requests:\n    cpu: 100m\n  # -- Limits.\n  limits: {}\n",
			want: []Value{
				{Key: "resources", Type: "object", Default: `{"limits":{},"requests":{"cpu":"100m"}}`, Description: "Resources."},
				{Key: "resources.limits", Type: "object", Default: `{}`, Description: "Limits."},
			},
		},
		{
			name: "a type and a default given in the comment -> used as written",
			yaml: "# -- (duration) How long.\n# @default -- one year\nduration: 8760h\n",
			want: []Value{{Key: "duration", Type: "duration", Default: "one year", Description: "How long."}},
		},
		{
			name: "a list of maps -> type list, compact JSON without HTML escaping",
			yaml: "# -- Constraints <first>.\nconstraints:\n  - {maxSkew: 1, whenUnsatisfiable: ScheduleAnyway}\n",
			want: []Value{{Key: "constraints", Type: "list", Default: `[{"maxSkew":1,"whenUnsatisfiable":"ScheduleAnyway"}]`, Description: "Constraints <first>."}},
		},
		{
			name: "bools and empty lists -> their types",
			yaml: "# -- On.\nenabled: true\n# -- None yet.\nitems: []\n",
			want: []Value{
				{Key: "enabled", Type: "bool", Default: "true", Description: "On."},
				{Key: "items", Type: "list", Default: "[]", Description: "None yet."},
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Parse([]byte(tc.yaml))
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			if diff := cmp.Diff(tc.want, got.Documented); diff != "" {
				t.Errorf("documented (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantUndocumented, got.Undocumented); diff != "" {
				t.Errorf("undocumented (-want +got):\n%s", diff)
			}
		})
	}
}

func TestParseRefusesBadInput(t *testing.T) {
	tests := []struct {
		name    string
		yaml    string
		wantErr string
	}{
		{name: "not YAML -> refused", yaml: "a: [b\n", wantErr: "parse values"},
		{name: "a list at the top -> refused", yaml: "- a\n", wantErr: "the top level is a list, want a map"},
		{name: "an empty `# --` comment -> refused, naming the key", yaml: "# --\nname: x\n", wantErr: "values: name: the `# --` comment has no text"},
		{name: "an unclosed type -> refused", yaml: "# -- (int How many.\nn: 1\n", wantErr: "unclosed type"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tc.yaml))
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("Parse error = %v, want one containing %q", err, tc.wantErr)
			}
		})
	}
}

func TestTableEscapesPipes(t *testing.T) {
	got := Table([]Value{{Key: "a", Type: "string", Default: `"x|y"`, Description: "Either | or."}})
	want := "| Key | Type | Default | Description |\n" +
		"|-----|------|---------|-------------|\n" +
		"| `a` | string | `\"x\\|y\"` | Either \\| or. |\n"
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Table (-want +got):\n%s", diff)
	}
}

func TestREADMERefusesUnknownFields(t *testing.T) {
	_, err := README([]byte("{{ .Nope }}"), Chart{Name: "c"}, nil)
	if err == nil || !strings.Contains(err.Error(), "Nope") {
		t.Errorf("README error = %v, want one naming the unknown field Nope", err)
	}
}
