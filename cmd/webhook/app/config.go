package app

import (
	"fmt"
	"maps"

	"github.com/spf13/pflag"

	"github.com/spreadguard/spreadguard/pkg/config"
	"github.com/spreadguard/spreadguard/pkg/controller/deletioncost"
	"github.com/spreadguard/spreadguard/pkg/controller/spreadhealth"
)

// KubeSystem is excluded whatever the configuration says (config.KubeSystem).
const KubeSystem = config.KubeSystem

// Config is the whole configuration of spreadguard-webhook: the
// WebhookConfiguration its --config file holds, and the two settings that
// are flags only. Flags bind straight into the same fields and win over the
// file.
type Config struct {
	config.WebhookConfiguration

	// ConfigFile is the path given by --config.
	ConfigFile string `json:"-"`
	// Kubeconfig is the path given by --kubeconfig. Empty means in-cluster,
	// then $KUBECONFIG, then ~/.kube/config.
	Kubeconfig string `json:"-"`
}

// NewConfig returns the configuration with every default set
// (config.NewWebhookConfiguration).
func NewConfig() *Config {
	return &Config{WebhookConfiguration: config.NewWebhookConfiguration()}
}

// settings lists the server's options in the order --help shows them, the
// engine's (config.Decisions.AddFlags) after them.
var settings = []config.Flag[Config]{
	{Name: "config", Usage: "Path to a " + config.ConfigKind + " file (" + config.ConfigAPIVersion + "). Flags given on the command line win over it.",
		Field: func(c *Config) any { return &c.ConfigFile }},
	{Name: "kubeconfig", Usage: "Path to a kubeconfig. Empty: in-cluster configuration, then $KUBECONFIG, then ~/.kube/config.",
		Field: func(c *Config) any { return &c.Kubeconfig }},
	{Name: "host", Usage: "Address the admission webhook endpoints listen on. Empty: every interface.",
		Field: func(c *Config) any { return &c.Host }},
	{Name: "port", Usage: "HTTPS port of the admission webhook endpoints.",
		Field: func(c *Config) any { return &c.Port }},
	{Name: "cert-dir", Usage: "Directory holding tls.crt and tls.key; they are reloaded when they change.",
		Field: func(c *Config) any { return &c.CertDir }},
	{Name: "client-ca-file", Usage: "PEM file of the CAs whose client certificates may call the admission endpoints (the API server's); empty accepts any caller.",
		Field: func(c *Config) any { return &c.ClientCAFile }},
	{Name: "metrics-bind-address", Usage: `Address of the Prometheus /metrics endpoint; "0" turns it off.`,
		Field: func(c *Config) any { return &c.MetricsBindAddress }},
	{Name: "metrics-secure", Usage: "Serve /metrics over HTTPS to callers the API server authenticates and authorizes (GET on the non-resource URL /metrics); false serves plain HTTP to anyone.",
		Field: func(c *Config) any { return &c.MetricsSecure }},
	{Name: "health-probe-bind-address", Usage: `Address of the /healthz and /readyz endpoints; "0" turns them off.`,
		Field: func(c *Config) any { return &c.HealthProbeBindAddress }},
	{Name: "refuse-until-synced", Usage: "Deny pods until the caches have synced, instead of allowing them with a warning.",
		Field: func(c *Config) any { return &c.RefuseUntilSynced }},
	{Name: "failure-policy", Usage: "The failurePolicy of the pod webhook configurations (Ignore or Fail): an internal error admits the pod with a warning under Ignore and refuses it under Fail.",
		Field: func(c *Config) any { return &c.FailurePolicy }},
	{Name: "log-level", Usage: "Log level: error, info, debug, or a verbosity number (4 and above log per-node detail).",
		Field: func(c *Config) any { return &c.LogLevel }},
	{Name: "audit", Usage: "Audit the spread of the workloads policies select on the replica holding the Lease " + spreadhealth.LeaseName + ", and write policy status.",
		Field: func(c *Config) any { return &c.Health }},
	{Name: "leader-election-namespace", Usage: "Namespace of the Leases of the audit and the deletion cost keeper; empty: the pod's own namespace.",
		Field: func(c *Config) any { return &c.LeaderElectionNamespace }},
	{Name: "audit-coalesce-delay", Usage: "How long the audit gathers the changes that follow a first one before it runs a pass, so that a rollout costs one pass.",
		Field: func(c *Config) any { return &c.HealthCoalesceDelay }},
	{Name: "shutdown-delay", Usage: "How long a replica told to stop (SIGTERM) answers requests after it stops being ready, before it closes its listeners and drains: long enough for the Service to drop it. 0 stops at once.",
		Field: func(c *Config) any { return &c.ShutdownDelay }},
	{Name: "deletion-cost", Usage: "Keep controller.kubernetes.io/pod-deletion-cost on the pods of ReplicaSets and ReplicationControllers whose pods carry spread constraints, on the replica holding the Lease " + deletioncost.LeaseName + ", so that scale-downs keep their spread.",
		Field: func(c *Config) any { return &c.DeletionCost }},
	{Name: "deletion-cost-qps", Usage: "Deletion cost patches a second, for the whole cluster.",
		Field: func(c *Config) any { return &c.DeletionCostQPS }},
	{Name: "deletion-cost-burst", Usage: "Deletion cost patches that may be sent at once, above the rate of --deletion-cost-qps.",
		Field: func(c *Config) any { return &c.DeletionCostBurst }},
}

// AddFlags binds every flag to its field of c; the current values of c are
// the defaults shown in --help.
func (c *Config) AddFlags(fs *pflag.FlagSet) {
	config.AddFlags(fs, c, settings)
	c.Decisions.AddFlags(fs)
}

// flagOfField names the flag of each config file field (by its JSON name),
// so that an error reads the same to whoever set it either way. It is
// derived from the flags, never written by hand.
var flagOfField = func() map[string]string {
	out := config.FlagNames(settings)
	maps.Copy(out, config.DecisionFlagNames())
	return out
}()

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

// LoadConfigFile reads a WebhookConfiguration file over the defaults
// (config.LoadFile).
func LoadConfigFile(path string) (*Config, error) {
	file, err := config.LoadFile(path)
	if err != nil {
		return nil, err
	}
	return &Config{WebhookConfiguration: *file, ConfigFile: path}, nil
}
