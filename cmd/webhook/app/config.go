package app

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"github.com/spf13/pflag"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/yaml"

	"github.com/spreadguard/spreadguard/pkg/apis/spreadguard/v1alpha1"
	"github.com/spreadguard/spreadguard/pkg/spread"
)

// ConfigAPIVersion and ConfigKind identify the configuration file given by
// --config.
const (
	ConfigAPIVersion = "config.spreadguard.io/v1alpha1"
	ConfigKind       = "WebhookConfiguration"
)

// KubeSystem is excluded whatever the configuration says: the control plane's
// own pods must never wait on this webhook.
const KubeSystem = "kube-system"

// Log levels accepted by --log-level besides a plain verbosity number.
const (
	LogLevelError = "error"
	LogLevelInfo  = "info"
	LogLevelDebug = "debug"
)

// maxVerbosity bounds a numeric --log-level; logr verbosity beyond it only
// hides typos.
const maxVerbosity = 10

// Config is the whole configuration of spreadguard-webhook. The fields with a
// JSON name are also the fields of the --config file; flags bind straight
// into the same fields and win over the file.
type Config struct {
	metav1.TypeMeta `json:",inline"`

	// Host is the address the admission endpoints listen on; empty means
	// every interface (a pod's), 127.0.0.1 suits a process run on a laptop.
	Host string `json:"host,omitempty"`
	// Port is the HTTPS port of the admission endpoints.
	Port int `json:"port"`
	// CertDir holds tls.crt and tls.key; both are reloaded when they change.
	CertDir string `json:"certDir"`
	// ClientCAFile, when set, makes the admission endpoints require a client
	// certificate signed by one of the CAs in this PEM file: the one the API
	// server presents when an AdmissionConfiguration gives it one for this
	// webhook. Read at start.
	ClientCAFile string `json:"clientCAFile,omitempty"`
	// MetricsBindAddress serves /metrics; "0" turns it off.
	MetricsBindAddress string `json:"metricsBindAddress"`
	// MetricsSecure serves /metrics over HTTPS with the serving certificate,
	// to callers the API server authenticates (TokenReview) and authorizes
	// (SubjectAccessReview for GET /metrics). Off, metrics are plain HTTP
	// for anyone who can reach the port: for a process on a laptop.
	MetricsSecure bool `json:"metricsSecure"`
	// HealthProbeBindAddress serves /healthz and /readyz; "0" turns it off.
	HealthProbeBindAddress string `json:"healthProbeBindAddress"`
	// DefaultAction applies to unsatisfiable pods whose policy sets none.
	DefaultAction v1alpha1.ValidationAction `json:"defaultAction"`
	// ExcludedNamespaces are never mutated nor validated; kube-system is
	// always among them.
	ExcludedNamespaces []string `json:"excludedNamespaces"`
	// RefuseUntilSynced denies pods while the caches are still filling;
	// otherwise they are allowed with a warning.
	RefuseUntilSynced bool `json:"refuseUntilSynced"`
	// FailurePolicy is the failurePolicy of the pod webhook configurations.
	// The server answers a fault of its own the way the API server treats
	// a failed call under that policy: Ignore admits the pod unchecked (with
	// a warning), Fail refuses it.
	FailurePolicy admissionregistrationv1.FailurePolicyType `json:"failurePolicy"`
	// MessageDetail is what a denial shown to the pod's creator may name:
	// "domains" (per-domain counts and reasons, no node names, labels or
	// taints) or "nodes" (everything, for single-tenant clusters).
	MessageDetail spread.MessageDetail `json:"messageDetail"`
	// LogLevel is error, info, debug or a logr verbosity number.
	LogLevel string `json:"logLevel"`
	// AutoscalerKarpenter says whether Karpenter's NodePools are read as
	// templates of the nodes an autoscaler can add: auto (when the
	// karpenter.sh/v1 NodePool API is served at start), true or false.
	AutoscalerKarpenter Toggle `json:"autoscalerKarpenter"`
	// NodeGroupLabel is the node label that names a node's group
	// (eks.amazonaws.com/nodegroup, cloud.google.com/gke-nodepool,
	// kubernetes.azure.com/agentpool): each group and zone seen on a node
	// is a template of a node the cluster autoscaler can add. Empty: none.
	NodeGroupLabel string `json:"nodeGroupLabel,omitempty"`
	// Audit runs the audit of spread health on the replica that holds the
	// Lease LeaderElectionID: policy status and reports.
	Audit bool `json:"audit"`
	// LeaderElectionNamespace holds the Lease; empty means the pod's own
	// namespace (in a cluster).
	LeaderElectionNamespace string `json:"leaderElectionNamespace,omitempty"`
	// ShutdownDelay is how long a replica told to stop goes on answering
	// admission requests after its readiness has failed, before it closes
	// its listeners and drains the requests in flight: long enough for the
	// Service to stop sending it new connections. 0 (a process run on a
	// laptop, a test) stops at once; the chart sets it.
	ShutdownDelay metav1.Duration `json:"shutdownDelay,omitempty"`

	// ConfigFile is the path given by --config; flag only.
	ConfigFile string `json:"-"`
	// Kubeconfig is the path given by --kubeconfig; flag only. Empty means
	// in-cluster, then $KUBECONFIG, then ~/.kube/config.
	Kubeconfig string `json:"-"`
}

// NewConfig returns the configuration with every default set. The defaults
// live here only: flags take them from the struct.
func NewConfig() *Config {
	return &Config{
		TypeMeta:               metav1.TypeMeta{APIVersion: ConfigAPIVersion, Kind: ConfigKind},
		Port:                   9443,
		CertDir:                "/tmp/k8s-webhook-server/serving-certs",
		MetricsBindAddress:     ":8080",
		MetricsSecure:          true,
		HealthProbeBindAddress: ":8081",
		DefaultAction:          v1alpha1.ActionDeny,
		ExcludedNamespaces:     []string{KubeSystem},
		FailurePolicy:          admissionregistrationv1.Ignore,
		MessageDetail:          spread.DetailDomains,
		LogLevel:               LogLevelInfo,
		AutoscalerKarpenter:    ToggleAuto,
		Audit:                  true,
	}
}

// Toggle is a setting that can also be decided from the cluster at start.
type Toggle string

// The values of a Toggle.
const (
	ToggleAuto  Toggle = "auto"
	ToggleTrue  Toggle = "true"
	ToggleFalse Toggle = "false"
)

// option is one setting of spreadguard-webhook, defined here once: its flag,
// the help text and the Config field the flag binds. The default is that
// field's value in NewConfig, and its name in the --config file is the
// field's JSON name, so neither is repeated here, and the flag an error
// names (FormatErrors) is derived from the field the error is about.
type option struct {
	flag  string
	usage string
	field func(c *Config) any
}

// settings lists every option in the order --help shows them.
var settings = []option{
	{"config", "Path to a " + ConfigKind + " file (" + ConfigAPIVersion + "). Flags given on the command line win over it.",
		func(c *Config) any { return &c.ConfigFile }},
	{"kubeconfig", "Path to a kubeconfig. Empty: in-cluster configuration, then $KUBECONFIG, then ~/.kube/config.",
		func(c *Config) any { return &c.Kubeconfig }},
	{"host", "Address the admission webhook endpoints listen on. Empty: every interface.",
		func(c *Config) any { return &c.Host }},
	{"port", "HTTPS port of the admission webhook endpoints.",
		func(c *Config) any { return &c.Port }},
	{"cert-dir", "Directory holding tls.crt and tls.key; they are reloaded when they change.",
		func(c *Config) any { return &c.CertDir }},
	{"client-ca-file", "PEM file of the CAs whose client certificates may call the admission endpoints (the API server's); empty accepts any caller.",
		func(c *Config) any { return &c.ClientCAFile }},
	{"metrics-bind-address", `Address of the Prometheus /metrics endpoint; "0" turns it off.`,
		func(c *Config) any { return &c.MetricsBindAddress }},
	{"metrics-secure", "Serve /metrics over HTTPS to callers the API server authenticates and authorizes (GET on the non-resource URL /metrics); false serves plain HTTP to anyone.",
		func(c *Config) any { return &c.MetricsSecure }},
	{"health-probe-bind-address", `Address of the /healthz and /readyz endpoints; "0" turns them off.`,
		func(c *Config) any { return &c.HealthProbeBindAddress }},
	{"default-action", "What to do with a pod whose hard spread constraints cannot be met when its policy sets no action: Deny, Warn or Audit.",
		func(c *Config) any { return &c.DefaultAction }},
	{"excluded-namespaces", "Comma-separated namespaces whose pods are never mutated nor validated; kube-system is always added.",
		func(c *Config) any { return &c.ExcludedNamespaces }},
	{"refuse-until-synced", "Deny pods until the caches have synced, instead of allowing them with a warning.",
		func(c *Config) any { return &c.RefuseUntilSynced }},
	{"failure-policy", "The failurePolicy of the pod webhook configurations (Ignore or Fail): an internal error admits the pod with a warning under Ignore and refuses it under Fail.",
		func(c *Config) any { return &c.FailurePolicy }},
	{"message-detail", "What a denial may name: domains (counts and reasons per domain, no node names, labels or taints) or nodes.",
		func(c *Config) any { return &c.MessageDetail }},
	{"log-level", "Log level: error, info, debug, or a verbosity number (4 and above log per-node detail).",
		func(c *Config) any { return &c.LogLevel }},
	{"autoscaler-karpenter", "Read Karpenter's NodePools as nodes an autoscaler can add: auto (when the karpenter.sh/v1 NodePool API is served at start), true or false.",
		func(c *Config) any { return &c.AutoscalerKarpenter }},
	{"node-group-label", "Node label naming a node's group (eks.amazonaws.com/nodegroup, cloud.google.com/gke-nodepool, kubernetes.azure.com/agentpool): each group and zone seen on a node is a node the autoscaler can add. Empty: none.",
		func(c *Config) any { return &c.NodeGroupLabel }},
	{"audit", "Audit the spread of the workloads policies select on the replica holding the Lease " + LeaderElectionID + ", and write policy status.",
		func(c *Config) any { return &c.Audit }},
	{"leader-election-namespace", "Namespace of the audit's Lease; empty: the pod's own namespace.",
		func(c *Config) any { return &c.LeaderElectionNamespace }},
	{"shutdown-delay", "How long a replica told to stop (SIGTERM) answers requests after it stops being ready, before it closes its listeners and drains: long enough for the Service to drop it. 0 stops at once.",
		func(c *Config) any { return &c.ShutdownDelay }},
}

// AddFlags binds every flag to its field of c; the current values of c are
// the defaults shown in --help.
func (c *Config) AddFlags(fs *pflag.FlagSet) {
	for _, o := range settings {
		switch p := o.field(c).(type) {
		case *string:
			fs.StringVar(p, o.flag, *p, o.usage)
		case *int:
			fs.IntVar(p, o.flag, *p, o.usage)
		case *bool:
			fs.BoolVar(p, o.flag, *p, o.usage)
		case *[]string:
			fs.StringSliceVar(p, o.flag, *p, o.usage)
		case *v1alpha1.ValidationAction:
			fs.Var(enumFlag[v1alpha1.ValidationAction]{p, "action"}, o.flag, o.usage)
		case *admissionregistrationv1.FailurePolicyType:
			fs.Var(enumFlag[admissionregistrationv1.FailurePolicyType]{p, "policy"}, o.flag, o.usage)
		case *spread.MessageDetail:
			fs.Var(enumFlag[spread.MessageDetail]{p, "detail"}, o.flag, o.usage)
		case *Toggle:
			fs.Var(enumFlag[Toggle]{p, "auto|true|false"}, o.flag, o.usage)
		case *metav1.Duration:
			fs.DurationVar(&p.Duration, o.flag, p.Duration, o.usage)
		default:
			panic(fmt.Sprintf("option --%s binds a %T, which AddFlags cannot bind", o.flag, p))
		}
	}
}

// flagOfField names the flag of each config file field (by its JSON name),
// so that an error reads the same to whoever set it either way. It is
// derived from settings, never written by hand.
var flagOfField = func() map[string]string {
	out := map[string]string{}
	c := NewConfig()
	for _, o := range settings {
		if name, _, _ := strings.Cut(o.structField(c).Tag.Get("json"), ","); name != "" && name != "-" {
			out[name] = "--" + o.flag
		}
	}
	return out
}()

// structField returns the field of Config that o binds, found by its
// address in c.
func (o option) structField(c *Config) reflect.StructField {
	p := reflect.ValueOf(o.field(c))
	v := reflect.ValueOf(c).Elem()
	for i := range v.NumField() {
		// The type check tells a field from the embedded struct at the
		// same address (TypeMeta, first).
		if f := v.Field(i); f.Addr().Pointer() == p.Pointer() && f.Type() == p.Type().Elem() {
			return v.Type().Field(i)
		}
	}
	panic(fmt.Sprintf("option --%s binds no field of Config", o.flag))
}

// enumFlag lets a flag bind straight to a field of a string type (an
// action, a failure policy, a message detail); Validate checks the value.
type enumFlag[T ~string] struct {
	p   *T
	typ string
}

func (f enumFlag[T]) String() string {
	if f.p == nil {
		return ""
	}
	return string(*f.p)
}
func (f enumFlag[T]) Set(s string) error { *f.p = T(s); return nil }
func (f enumFlag[T]) Type() string       { return f.typ }

// ParseConfig builds the configuration from the command line: the defaults,
// then the --config file when one is named, then the flags again so that
// they win over the file.
func ParseConfig(args []string) (*Config, error) {
	cfg := NewConfig()
	fs := NewFlagSet(cfg)
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected arguments %q: every setting is a flag", fs.Args())
	}
	if cfg.ConfigFile == "" {
		return cfg, nil
	}
	fromFile, err := LoadConfigFile(cfg.ConfigFile)
	if err != nil {
		return nil, err
	}
	if err := NewFlagSet(fromFile).Parse(args); err != nil {
		return nil, err
	}
	return fromFile, nil
}

// NewFlagSet returns the flag set of spreadguard-webhook bound to cfg.
func NewFlagSet(cfg *Config) *pflag.FlagSet {
	fs := pflag.NewFlagSet("spreadguard-webhook", pflag.ContinueOnError)
	// The command prints errors and usage itself, once.
	fs.SetOutput(discard{})
	fs.SortFlags = false
	cfg.AddFlags(fs)
	return fs
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }

// LoadConfigFile reads a WebhookConfiguration file over the defaults. Unknown
// fields are errors, so that a typo is not silently ignored.
func LoadConfigFile(path string) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading the config file: %w", err)
	}
	cfg := NewConfig()
	// Absent fields keep their defaults; the type must be stated, so that
	// another kind of file given by mistake is refused.
	cfg.TypeMeta = metav1.TypeMeta{}
	if len(bytes.TrimSpace(data)) > 0 {
		if err := yaml.UnmarshalStrict(data, cfg); err != nil {
			return nil, fmt.Errorf("config file %s: %w", path, err)
		}
	}
	if cfg.APIVersion != ConfigAPIVersion || cfg.Kind != ConfigKind {
		return nil, fmt.Errorf("config file %s: apiVersion %q, kind %q: want apiVersion %q, kind %q",
			path, cfg.APIVersion, cfg.Kind, ConfigAPIVersion, ConfigKind)
	}
	cfg.ConfigFile = path
	return cfg, nil
}

// Validate checks every field before anything starts; each error names the
// flag (and config field) that is wrong.
func (c *Config) Validate() field.ErrorList {
	var errs field.ErrorList
	if c.Host != "" && net.ParseIP(c.Host) == nil && !validHostname(c.Host) {
		errs = append(errs, field.Invalid(field.NewPath("host"), c.Host, "must be an IP address or a host name"))
	}
	if c.Port < 1 || c.Port > 65535 {
		errs = append(errs, field.Invalid(field.NewPath("port"), c.Port, "must be between 1 and 65535"))
	}
	if strings.TrimSpace(c.CertDir) == "" {
		errs = append(errs, field.Required(field.NewPath("certDir"), "the directory holding tls.crt and tls.key"))
	}
	errs = append(errs, validateBindAddress(field.NewPath("metricsBindAddress"), c.MetricsBindAddress)...)
	errs = append(errs, validateBindAddress(field.NewPath("healthProbeBindAddress"), c.HealthProbeBindAddress)...)
	actions := []string{string(v1alpha1.ActionDeny), string(v1alpha1.ActionWarn), string(v1alpha1.ActionAudit)}
	if !slices.Contains(actions, string(c.DefaultAction)) {
		errs = append(errs, field.NotSupported(field.NewPath("defaultAction"), c.DefaultAction, actions))
	}
	policies := []string{string(admissionregistrationv1.Ignore), string(admissionregistrationv1.Fail)}
	if !slices.Contains(policies, string(c.FailurePolicy)) {
		errs = append(errs, field.NotSupported(field.NewPath("failurePolicy"), c.FailurePolicy, policies))
	}
	details := []string{string(spread.DetailDomains), string(spread.DetailNodes)}
	if !slices.Contains(details, string(c.MessageDetail)) {
		errs = append(errs, field.NotSupported(field.NewPath("messageDetail"), c.MessageDetail, details))
	}
	for i, ns := range c.ExcludedNamespaces {
		for _, msg := range validation.IsDNS1123Label(ns) {
			errs = append(errs, field.Invalid(field.NewPath("excludedNamespaces").Index(i), ns, msg))
		}
	}
	toggles := []string{string(ToggleAuto), string(ToggleTrue), string(ToggleFalse)}
	if !slices.Contains(toggles, string(c.AutoscalerKarpenter)) {
		errs = append(errs, field.NotSupported(field.NewPath("autoscalerKarpenter"), c.AutoscalerKarpenter, toggles))
	}
	if c.NodeGroupLabel != "" {
		for _, msg := range validation.IsQualifiedName(c.NodeGroupLabel) {
			errs = append(errs, field.Invalid(field.NewPath("nodeGroupLabel"), c.NodeGroupLabel, msg))
		}
	}
	if _, err := ParseLogLevel(c.LogLevel); err != nil {
		errs = append(errs, field.Invalid(field.NewPath("logLevel"), c.LogLevel, err.Error()))
	}
	if c.ShutdownDelay.Duration < 0 {
		errs = append(errs, field.Invalid(field.NewPath("shutdownDelay"), c.ShutdownDelay.Duration.String(), "must not be negative"))
	}
	return errs
}

func validateBindAddress(path *field.Path, addr string) field.ErrorList {
	if addr == "0" {
		return nil
	}
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return field.ErrorList{field.Invalid(path, addr, `must be host:port, :port or "0" to turn it off`)}
	}
	if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 {
		return field.ErrorList{field.Invalid(path, addr, "port must be a number between 0 and 65535")}
	}
	return nil
}

// ExcludedNamespaceSet returns the namespaces to exclude, kube-system first
// and without duplicates.
func (c *Config) ExcludedNamespaceSet() []string {
	out := []string{KubeSystem}
	for _, ns := range c.ExcludedNamespaces {
		if !slices.Contains(out, ns) {
			out = append(out, ns)
		}
	}
	return out
}

// ParseLogLevel turns a --log-level into a logr verbosity: error is -1 (only
// errors), info 0, debug 1, or the number given.
func ParseLogLevel(s string) (int, error) {
	switch strings.ToLower(s) {
	case LogLevelError:
		return -1, nil
	case LogLevelInfo, "":
		return 0, nil
	case LogLevelDebug:
		return 1, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 || n > maxVerbosity {
		return 0, fmt.Errorf("must be error, info, debug or a number from 0 to %d", maxVerbosity)
	}
	return n, nil
}

// validHostname accepts the names net.Listen can resolve, such as localhost.
func validHostname(h string) bool {
	return len(validation.IsDNS1123Subdomain(h)) == 0
}
