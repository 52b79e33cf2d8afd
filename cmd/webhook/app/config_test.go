package app

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/spf13/pflag"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/spreadguard/spreadguard/pkg/apis/spreadguard/v1alpha1"
	"github.com/spreadguard/spreadguard/pkg/spread"
)

// configWith returns the defaults changed by fn.
func configWith(fn func(c *Config)) *Config {
	c := NewConfig()
	fn(c)
	return c
}

// writeFile writes content into a temporary file and returns its path.
func writeFile(t *testing.T, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

const fullFile = `apiVersion: config.spreadguard.io/v1alpha1
kind: WebhookConfiguration
port: 10250
certDir: /etc/spreadguard/certs
metricsBindAddress: 127.0.0.1:9090
metricsSecure: false
healthProbeBindAddress: :9091
defaultAction: Warn
excludedNamespaces: [spreadguard-system, monitoring]
refuseUntilSynced: true
failurePolicy: Fail
messageDetail: nodes
logLevel: debug
`

func TestParseConfig(t *testing.T) {
	full := writeFile(t, fullFile)
	partial := writeFile(t, "apiVersion: config.spreadguard.io/v1alpha1\nkind: WebhookConfiguration\nport: 10250\ndefaultAction: Audit\n")
	typo := writeFile(t, "apiVersion: config.spreadguard.io/v1alpha1\nkind: WebhookConfiguration\ndefaultActon: Warn\n")
	otherKind := writeFile(t, "apiVersion: v1\nkind: ConfigMap\n")
	noType := writeFile(t, "port: 10250\n")
	notYAML := writeFile(t, "port: [\n")

	tests := []struct {
		name    string
		args    []string
		want    *Config
		wantErr string
	}{
		{
			name: "no flags -> every default",
			want: NewConfig(),
		},
		{
			name: "every flag given -> every field set from its flag",
			args: []string{"--port=10250", "--cert-dir=/certs", "--metrics-bind-address=0",
				"--health-probe-bind-address=127.0.0.1:9091", "--default-action=Audit",
				"--excluded-namespaces=a,b", "--refuse-until-synced", "--failure-policy=Fail", "--message-detail=nodes", "--log-level=4", "--kubeconfig=/kc",
				"--deletion-cost=false", "--deletion-cost-qps=2.5", "--deletion-cost-burst=5"},
			want: configWith(func(c *Config) {
				c.Port = 10250
				c.CertDir = "/certs"
				c.MetricsBindAddress = "0"
				c.HealthProbeBindAddress = "127.0.0.1:9091"
				c.DefaultAction = v1alpha1.ActionAudit
				c.ExcludedNamespaces = []string{"a", "b"}
				c.RefuseUntilSynced = true
				c.FailurePolicy = admissionregistrationv1.Fail
				c.MessageDetail = spread.DetailNodes
				c.LogLevel = "4"
				c.Kubeconfig = "/kc"
				c.DeletionCost = false
				c.DeletionCostQPS = 2.5
				c.DeletionCostBurst = 5
			}),
		},
		{
			name: "--audit-coalesce-delay=1s -> the audit's delay 1s, the 10s default replaced",
			args: []string{"--audit-coalesce-delay=1s"},
			want: configWith(func(c *Config) { c.HealthCoalesceDelay = metav1.Duration{Duration: time.Second} }),
		},
		{
			name: "--shutdown-delay=1500ms -> a stopping replica answers 1.5s after it stops being ready",
			args: []string{"--shutdown-delay=1500ms"},
			want: configWith(func(c *Config) { c.ShutdownDelay = metav1.Duration{Duration: 1500 * time.Millisecond} }),
		},
		{
			name: "--excluded-namespaces given twice -> both lists, the default replaced",
			args: []string{"--excluded-namespaces=a", "--excluded-namespaces=b,c"},
			want: configWith(func(c *Config) { c.ExcludedNamespaces = []string{"a", "b", "c"} }),
		},
		{
			name: "config file with every field -> every field from the file",
			args: []string{"--config", full},
			want: configWith(func(c *Config) {
				c.ConfigFile = full
				c.Port = 10250
				c.CertDir = "/etc/spreadguard/certs"
				c.MetricsBindAddress = "127.0.0.1:9090"
				c.MetricsSecure = false
				c.HealthProbeBindAddress = ":9091"
				c.DefaultAction = v1alpha1.ActionWarn
				c.ExcludedNamespaces = []string{"spreadguard-system", "monitoring"}
				c.RefuseUntilSynced = true
				c.FailurePolicy = admissionregistrationv1.Fail
				c.MessageDetail = spread.DetailNodes
				c.LogLevel = "debug"
			}),
		},
		{
			name: "config file with some fields -> the others keep their defaults",
			args: []string{"--config", partial},
			want: configWith(func(c *Config) {
				c.ConfigFile = partial
				c.Port = 10250
				c.DefaultAction = v1alpha1.ActionAudit
			}),
		},
		{
			name: "flags before and after --config -> flags win over the file",
			args: []string{"--default-action=Deny", "--config", full, "--excluded-namespaces=x", "--refuse-until-synced=false"},
			want: configWith(func(c *Config) {
				c.ConfigFile = full
				c.Port = 10250
				c.CertDir = "/etc/spreadguard/certs"
				c.MetricsBindAddress = "127.0.0.1:9090"
				c.MetricsSecure = false
				c.HealthProbeBindAddress = ":9091"
				c.DefaultAction = v1alpha1.ActionDeny
				c.ExcludedNamespaces = []string{"x"}
				c.RefuseUntilSynced = false
				c.FailurePolicy = admissionregistrationv1.Fail
				c.MessageDetail = spread.DetailNodes
				c.LogLevel = "debug"
			}),
		},
		{
			name:    "config file with a misspelt field -> error naming the field",
			args:    []string{"--config", typo},
			wantErr: `unknown field "defaultActon"`,
		},
		{
			name:    "config file of another kind -> error naming the expected kind",
			args:    []string{"--config", otherKind},
			wantErr: `want apiVersion "config.spreadguard.io/v1alpha1", kind "WebhookConfiguration"`,
		},
		{
			name:    "config file without apiVersion and kind -> error",
			args:    []string{"--config", noType},
			wantErr: `apiVersion "", kind ""`,
		},
		{
			name:    "config file that is not YAML -> error naming the file",
			args:    []string{"--config", notYAML},
			wantErr: "config file " + notYAML,
		},
		{
			name:    "config file that does not exist -> error naming the path",
			args:    []string{"--config", "/nonexistent/spreadguard.yaml"},
			wantErr: "/nonexistent/spreadguard.yaml",
		},
		{
			name:    "unknown flag -> error naming it",
			args:    []string{"--prot=1"},
			wantErr: "unknown flag: --prot",
		},
		{
			name:    "port that is not a number -> error naming the flag",
			args:    []string{"--port=https"},
			wantErr: `invalid argument "https" for "--port"`,
		},
		{
			name:    "positional argument -> error",
			args:    []string{"serve"},
			wantErr: `unexpected arguments ["serve"]`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseConfig(tt.args)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("ParseConfig(%q) error = %v, want one containing %q", tt.args, err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("ParseConfig(%q): %v", tt.args, err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("ParseConfig(%q) (-want +got):\n%s", tt.args, diff)
			}
		})
	}
}

func TestValidate(t *testing.T) {
	tests := []struct {
		name string
		cfg  *Config
		want field.ErrorList
	}{
		{name: "defaults -> valid", cfg: NewConfig()},
		{
			name: "metrics and probes turned off with 0 -> valid",
			cfg:  configWith(func(c *Config) { c.MetricsBindAddress = "0"; c.HealthProbeBindAddress = "0" }),
		},
		{
			name: "log level 10 -> valid",
			cfg:  configWith(func(c *Config) { c.LogLevel = "10" }),
		},
		{
			name: "host 127.0.0.1 -> valid",
			cfg:  configWith(func(c *Config) { c.Host = "127.0.0.1" }),
		},
		{
			name: "three fields wrong -> three errors in field order",
			cfg: configWith(func(c *Config) {
				c.Port = -1
				c.DefaultAction = ""
				c.LogLevel = "-1"
			}),
			want: field.ErrorList{
				field.Invalid(field.NewPath("port"), -1, ""),
				field.NotSupported(field.NewPath("defaultAction"), v1alpha1.ValidationAction(""), []string(nil)),
				field.Invalid(field.NewPath("logLevel"), "-1", ""),
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := tt.cfg.Validate()
			if diff := cmp.Diff(tt.want, got, ignoreDetail, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("Validate() (-want +got):\n%s", diff)
			}
		})
	}
}

// ignoreDetail compares validation errors by kind and field: the detail
// wording is checked by TestCommandReportsEveryInvalidFlag.
var ignoreDetail = cmpopts.IgnoreFields(field.Error{}, "Detail", "BadValue")

func TestEveryInvalidFlagIsNamedInItsError(t *testing.T) {
	tests := []struct {
		name  string
		arg   string // one flag, set to a value Validate refuses
		field string // the field path of the one error
		typ   field.ErrorType
	}{
		{"host with a port in it -> host invalid", "--host=127.0.0.1:9443", "host", field.ErrorTypeInvalid},
		{"port 0 -> port out of range", "--port=0", "port", field.ErrorTypeInvalid},
		{"port 65536 -> port out of range", "--port=65536", "port", field.ErrorTypeInvalid},
		{"blank cert dir -> certDir required", "--cert-dir= ", "certDir", field.ErrorTypeRequired},
		{"metrics address without a port -> metricsBindAddress invalid", "--metrics-bind-address=localhost", "metricsBindAddress", field.ErrorTypeInvalid},
		{"probe port 70000 -> healthProbeBindAddress invalid", "--health-probe-bind-address=:70000", "healthProbeBindAddress", field.ErrorTypeInvalid},
		{"lowercase action deny -> defaultAction not supported", "--default-action=deny", "defaultAction", field.ErrorTypeNotSupported},
		{"failure policy ignore in lowercase -> failurePolicy not supported", "--failure-policy=ignore", "failurePolicy", field.ErrorTypeNotSupported},
		{"message detail all -> messageDetail not supported", "--message-detail=all", "messageDetail", field.ErrorTypeNotSupported},
		{"second excluded namespace with capitals -> excludedNamespaces[1] invalid", "--excluded-namespaces=ok,Not-OK", "excludedNamespaces[1]", field.ErrorTypeInvalid},
		{"log level verbose -> logLevel invalid", "--log-level=verbose", "logLevel", field.ErrorTypeInvalid},
		{"log level 11 -> logLevel invalid", "--log-level=11", "logLevel", field.ErrorTypeInvalid},
		{"audit coalesce delay 0s -> healthCoalesceDelay invalid", "--audit-coalesce-delay=0s", "healthCoalesceDelay", field.ErrorTypeInvalid},
		{"negative shutdown delay -> shutdownDelay invalid", "--shutdown-delay=-1s", "shutdownDelay", field.ErrorTypeInvalid},
		{"deletion cost rate 0 -> deletionCostQPS invalid", "--deletion-cost-qps=0", "deletionCostQPS", field.ErrorTypeInvalid},
		{"deletion cost rate NaN -> deletionCostQPS invalid", "--deletion-cost-qps=NaN", "deletionCostQPS", field.ErrorTypeInvalid},
		{"deletion cost burst 0 -> deletionCostBurst invalid", "--deletion-cost-burst=0", "deletionCostBurst", field.ErrorTypeInvalid},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := ParseConfig([]string{tt.arg})
			if err != nil {
				t.Fatalf("ParseConfig(%q): %v", tt.arg, err)
			}
			errs := cfg.Validate()
			if diff := cmp.Diff(field.ErrorList{{Type: tt.typ, Field: tt.field}}, errs, ignoreDetail); diff != "" {
				t.Errorf("Validate() (-want +got):\n%s", diff)
			}
			flag, _, _ := strings.Cut(tt.arg, "=")
			if got, want := FormatErrors(errs), "\n  "+flag+" ("+tt.field+"): "; !strings.Contains(got, want) {
				t.Errorf("FormatErrors = %q, want it to name the flag: %q", got, want)
			}
		})
	}
}

func TestEveryConfigFieldHasOneFlag(t *testing.T) {
	// The fields of the file, by JSON name, and the flag-only ones.
	var fileFields, flagOnly []string
	var walk func(typ reflect.Type)
	walk = func(typ reflect.Type) {
		for i := range typ.NumField() {
			f := typ.Field(i)
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			switch {
			case f.Type == reflect.TypeFor[metav1.TypeMeta]():
				// The config file's apiVersion and kind.
			case f.Name == "Deprecations":
				// What Decode read under old names: neither a key nor a flag.
			case f.Anonymous:
				walk(f.Type)
			case name == "-":
				flagOnly = append(flagOnly, f.Name)
			default:
				fileFields = append(fileFields, name)
			}
		}
	}
	walk(reflect.TypeFor[Config]())
	fs := NewFlagSet(NewConfig())
	flags := map[string]string{}
	for _, field := range fileFields {
		flag, ok := flagOfField[field]
		if !ok {
			t.Errorf("config field %s has no flag", field)
			continue
		}
		if other, ok := flags[flag]; ok {
			t.Errorf("config fields %s and %s are both bound by %s", other, field, flag)
		}
		flags[flag] = field
		if fs.Lookup(strings.TrimPrefix(flag, "--")) == nil {
			t.Errorf("config field %s names the flag %s, which does not exist", field, flag)
		}
	}
	n := 0
	fs.VisitAll(func(*pflag.Flag) { n++ })
	if want := len(fileFields) + len(flagOnly); n != want {
		t.Errorf("%d flags for %d config fields (%d in the file, %d flag-only %v), want one each",
			n, want, len(fileFields), len(flagOnly), flagOnly)
	}
}
