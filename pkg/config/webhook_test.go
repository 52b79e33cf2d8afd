package config

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/spreadguard/spreadguard/pkg/apis/spreadguard/v1alpha1"
	"github.com/spreadguard/spreadguard/pkg/spread"
)

func TestDecode(t *testing.T) {
	const header = "apiVersion: config.spreadguard.io/v1alpha1\nkind: WebhookConfiguration\n"
	with := func(fn func(c *WebhookConfiguration)) *WebhookConfiguration {
		c := NewWebhookConfiguration()
		fn(&c)
		return &c
	}
	tests := []struct {
		name    string
		data    string
		want    *WebhookConfiguration
		wantErr string
	}{
		{
			name: "the type alone -> every default",
			data: header,
			want: with(func(*WebhookConfiguration) {}),
		},
		{
			name: "server and engine fields -> each read into its field, the others defaulted",
			data: header + "port: 10250\nfailurePolicy: Fail\ndefaultAction: Warn\nexcludedNamespaces: [tools]\n" +
				"messageDetail: nodes\nautoscalerKarpenter: \"false\"\nnodeGroupLabel: pool\nautoscalerZones: [eu-west-1a, eu-west-1b]\nclusterAutoscalerStatus: \"\"\n" +
				"healthCoalesceDelay: 2s\nshutdownDelay: 5s\n",
			want: with(func(c *WebhookConfiguration) {
				c.Port, c.FailurePolicy = 10250, admissionregistrationv1.Fail
				c.HealthCoalesceDelay = metav1.Duration{Duration: 2 * time.Second}
				c.ShutdownDelay = metav1.Duration{Duration: 5 * time.Second}
				c.Decisions = Decisions{DefaultAction: v1alpha1.ActionWarn, ExcludedNamespaces: []string{"tools"},
					MessageDetail: spread.DetailNodes, AutoscalerKarpenter: ToggleFalse, NodeGroupLabel: "pool",
					AutoscalerZones: []string{"eu-west-1a", "eu-west-1b"}, ClusterAutoscalerStatus: ""}
			}),
		},
		{
			name: "the old names audit and auditCoalesceDelay -> read into health and healthCoalesceDelay, each deprecation named",
			data: header + "audit: false\nauditCoalesceDelay: 3s\n",
			want: with(func(c *WebhookConfiguration) {
				c.Health = false
				c.HealthCoalesceDelay = metav1.Duration{Duration: 3 * time.Second}
				c.Deprecations = []string{
					"audit is renamed health, and the old name is read for one minor version only",
					"auditCoalesceDelay is renamed healthCoalesceDelay, and the old name is read for one minor version only",
				}
			}),
		},
		{
			name: "an old name beside its new one -> the new one wins, the old one named as ignored",
			data: header + "audit: false\nhealth: true\n",
			want: with(func(c *WebhookConfiguration) {
				c.Deprecations = []string{"audit is ignored: health is set, its new name"}
			}),
		},
		{
			name:    "a misspelt field -> the source and the field named",
			data:    header + "defaultActon: Warn\n",
			wantErr: `ConfigMap spreadguard-system/spreadguard-config key config.yaml: error unmarshaling JSON: while decoding JSON: json: unknown field "defaultActon"`,
		},
		{
			name:    "another kind -> the kind wanted",
			data:    "apiVersion: v1\nkind: ConfigMap\n",
			wantErr: `ConfigMap spreadguard-system/spreadguard-config key config.yaml: apiVersion "v1", kind "ConfigMap": want apiVersion "config.spreadguard.io/v1alpha1", kind "WebhookConfiguration"`,
		},
		{
			name:    "empty -> refused: the type is not stated",
			data:    "\n",
			wantErr: `ConfigMap spreadguard-system/spreadguard-config key config.yaml: apiVersion "", kind "": want apiVersion "config.spreadguard.io/v1alpha1", kind "WebhookConfiguration"`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Decode("ConfigMap spreadguard-system/spreadguard-config key config.yaml", []byte(tt.data))
			if gotErr := errString(err); gotErr != tt.wantErr {
				t.Fatalf("Decode() error = %q, want %q", gotErr, tt.wantErr)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Decode() (-want +got):\n%s", diff)
			}
		})
	}
}

func TestValidateNamesEachFieldAsTheFileDoes(t *testing.T) {
	c := NewWebhookConfiguration()
	c.Port, c.DefaultAction, c.FailurePolicy, c.LogLevel = 0, "Block", "ignore", "verbose"
	c.HealthCoalesceDelay = metav1.Duration{Duration: -time.Second}
	c.ShutdownDelay = metav1.Duration{Duration: -time.Second}
	want := field.ErrorList{
		field.Invalid(field.NewPath("port"), nil, ""),
		field.NotSupported[string](field.NewPath("defaultAction"), nil, nil),
		field.NotSupported[string](field.NewPath("failurePolicy"), nil, nil),
		field.Invalid(field.NewPath("logLevel"), nil, ""),
		field.Invalid(field.NewPath("healthCoalesceDelay"), nil, ""),
		field.Invalid(field.NewPath("shutdownDelay"), nil, ""),
	}
	if diff := cmp.Diff(want, c.Validate(), ignoreDetail); diff != "" {
		t.Errorf("Validate() (-want +got):\n%s", diff)
	}
}

func TestFlagNamesFindTheFieldsOfEmbeddedStructs(t *testing.T) {
	type inner struct {
		Detail string `json:"detail"`
	}
	type outer struct {
		inner `json:",inline"`
		Port  int    `json:"port"`
		Path  string `json:"-"`
	}
	flags := []Flag[outer]{
		{Name: "path", Field: func(o *outer) any { return &o.Path }},
		{Name: "port", Field: func(o *outer) any { return &o.Port }},
		{Name: "message-detail", Field: func(o *outer) any { return &o.Detail }},
	}
	want := map[string]string{"port": "--port", "detail": "--message-detail"}
	if diff := cmp.Diff(want, FlagNames(flags)); diff != "" {
		t.Errorf("FlagNames() (-want +got):\n%s", diff)
	}
	err := field.Invalid(field.NewPath("detail").Index(2), "x", "bad")
	if got, want := FormatError(err, FlagNames(flags)), `--message-detail (detail[2]): Invalid value: "x": bad`; got != want {
		t.Errorf("FormatError() = %q, want %q", got, want)
	}
}

func TestParseLogLevel(t *testing.T) {
	tests := []struct {
		in      string
		want    int
		wantErr bool
	}{
		{in: "error", want: -1},
		{in: "info", want: 0},
		{in: "INFO", want: 0},
		{in: "debug", want: 1},
		{in: "4", want: 4},
		{in: "trace", wantErr: true},
		{in: "-2", wantErr: true},
	}
	for _, tt := range tests {
		t.Run("log level "+tt.in, func(t *testing.T) {
			got, err := ParseLogLevel(tt.in)
			if (err != nil) != tt.wantErr {
				t.Fatalf("ParseLogLevel(%q) error = %v, want error %v", tt.in, err, tt.wantErr)
			}
			if !tt.wantErr && got != tt.want {
				t.Errorf("ParseLogLevel(%q) = %d, want %d", tt.in, got, tt.want)
			}
		})
	}
}
