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
shutdownDelay: 5s
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
				"--shutdown-delay=1500ms"},
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
				c.ShutdownDelay = metav1.Duration{Duration: 1500 * time.Millisecond}
			}),
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
				c.ShutdownDelay = metav1.Duration{Duration: 5 * time.Second}
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
				c.ShutdownDelay = metav1.Duration{Duration: 5 * time.Second}
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
		{"negative shutdown delay -> shutdownDelay invalid", "--shutdown-delay=-1s", "shutdownDelay", field.ErrorTypeInvalid},
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
	c := NewConfig()
	flags := map[string][]string{}
	for _, o := range settings {
		f := o.structField(c)
		flags[f.Name] = append(flags[f.Name], "--"+o.flag)
	}
	typ := reflect.TypeFor[Config]()
	for i := range typ.NumField() {
		f := typ.Field(i)
		if f.Anonymous {
			continue // TypeMeta: the config file's apiVersion and kind
		}
		if len(flags[f.Name]) != 1 {
			t.Errorf("Config.%s is bound by the flags %q, want exactly one", f.Name, flags[f.Name])
		}
	}
	fs := NewFlagSet(NewConfig())
	for file, flag := range flagOfField {
		if fs.Lookup(strings.TrimPrefix(flag, "--")) == nil {
			t.Errorf("config field %s names the flag %s, which does not exist", file, flag)
		}
	}
}

func TestExcludedNamespaceSet(t *testing.T) {
	tests := []struct {
		name     string
		excluded []string
		want     []string
	}{
		{name: "none configured -> kube-system alone", want: []string{"kube-system"}},
		{name: "others configured -> kube-system added first", excluded: []string{"a", "b"}, want: []string{"kube-system", "a", "b"}},
		{name: "kube-system and duplicates configured -> each once", excluded: []string{"a", "kube-system", "a"}, want: []string{"kube-system", "a"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := configWith(func(c *Config) { c.ExcludedNamespaces = tt.excluded })
			if diff := cmp.Diff(tt.want, c.ExcludedNamespaceSet()); diff != "" {
				t.Errorf("ExcludedNamespaceSet() (-want +got):\n%s", diff)
			}
		})
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
