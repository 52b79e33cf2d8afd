package config

import (
	"bytes"
	"fmt"
	"math"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/go-logr/logr"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/yaml"
)

// ConfigAPIVersion and ConfigKind identify a WebhookConfiguration file.
const (
	ConfigAPIVersion = "config.spreadguard.io/v1alpha1"
	ConfigKind       = "WebhookConfiguration"
)

// Log levels accepted by logLevel besides a plain verbosity number.
const (
	LogLevelError = "error"
	LogLevelInfo  = "info"
	LogLevelDebug = "debug"
)

// maxVerbosity bounds a numeric log level; logr verbosity beyond it only
// hides typos.
const maxVerbosity = 10

// WebhookConfiguration is the file spreadguard-webhook reads with --config:
// the server's settings and the engine's. The Helm chart renders it into
// the ConfigMap <fullname>-config, under ConfigMapKey.
type WebhookConfiguration struct {
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

	// Decisions holds the settings that change a decision, which
	// kubectl-spread shares.
	Decisions `json:",inline"`

	// RefuseUntilSynced denies pods while the caches are still filling;
	// otherwise they are allowed with a warning.
	RefuseUntilSynced bool `json:"refuseUntilSynced"`
	// FailurePolicy is the failurePolicy of the pod webhook configurations.
	// The server answers a fault of its own the way the API server treats
	// a failed call under that policy: Ignore admits the pod unchecked (with
	// a warning), Fail refuses it.
	FailurePolicy admissionregistrationv1.FailurePolicyType `json:"failurePolicy"`
	// LogLevel is error, info, debug or a logr verbosity number.
	LogLevel string `json:"logLevel"`
	// Health runs the controller of spread health on the replica that
	// holds its Lease: policy status and reports. The key audit, its name
	// before, is still read (Decode), with a warning.
	Health bool `json:"health"`
	// LeaderElectionNamespace holds the Leases; empty means the pod's own
	// namespace (in a cluster).
	LeaderElectionNamespace string `json:"leaderElectionNamespace,omitempty"`
	// HealthCoalesceDelay is how long the controller of spread health gathers the changes that
	// follow a first one before it runs a pass, so that a rollout of a
	// hundred pods costs one pass. Shorter, the status and Reports follow
	// the cluster more closely, at the cost of more passes.
	// The key auditCoalesceDelay, its name before, is still read, with a
	// warning.
	HealthCoalesceDelay metav1.Duration `json:"healthCoalesceDelay"`
	// ShutdownDelay is how long a replica told to stop goes on answering
	// admission requests after its readiness has failed, before it closes
	// its listeners and drains the requests in flight: long enough for the
	// Service to stop sending it new connections. 0 (a process run on a
	// laptop, a test) stops at once; the chart sets it.
	ShutdownDelay metav1.Duration `json:"shutdownDelay,omitempty"`
	// DeletionCost runs the keeper of deletion costs on the replica that
	// holds its Lease: controller.kubernetes.io/pod-deletion-cost on the
	// pods of constrained ReplicaSets and ReplicationControllers, so that
	// a scale-down keeps their spread (docs/deletion-cost.md).
	DeletionCost bool `json:"deletionCost"`
	// DeletionCostQPS and DeletionCostBurst cap the keeper's patches, for
	// the whole cluster: a token bucket of DeletionCostBurst tokens refilled
	// DeletionCostQPS times a second.
	DeletionCostQPS   float64 `json:"deletionCostQPS"`
	DeletionCostBurst int     `json:"deletionCostBurst"`
	// Deprecations names the keys Decode read under a name that is going
	// away, each with the name that replaces it; WarnDeprecated logs them.
	Deprecations []string `json:"-"`
}

// renamedKeys are the keys read under their old names for one minor
// version after their rename: each old name with its new one.
var renamedKeys = []struct{ old, new string }{
	{"audit", "health"},
	{"auditCoalesceDelay", "healthCoalesceDelay"},
}

// oldKeys holds the values of the renamed keys under their old names.
type oldKeys struct {
	Audit              *bool            `json:"audit,omitempty"`
	AuditCoalesceDelay *metav1.Duration `json:"auditCoalesceDelay,omitempty"`
}

// withOldKeys is what Decode reads: the configuration and the old names,
// so that a strict decoder accepts both.
type withOldKeys struct {
	WebhookConfiguration `json:",inline"`
	oldKeys              `json:",inline"`
}

// WarnDeprecated logs one warning for each key the file set under its old
// name.
func (c *WebhookConfiguration) WarnDeprecated(log logr.Logger) {
	for _, d := range c.Deprecations {
		log.Info("deprecated configuration key: "+d, "deprecated", true)
	}
}

// NewWebhookConfiguration returns the configuration with every default set.
// The defaults live here only: flags take them from the struct.
func NewWebhookConfiguration() WebhookConfiguration {
	return WebhookConfiguration{
		TypeMeta:               metav1.TypeMeta{APIVersion: ConfigAPIVersion, Kind: ConfigKind},
		Port:                   9443,
		CertDir:                "/tmp/k8s-webhook-server/serving-certs",
		MetricsBindAddress:     ":8080",
		MetricsSecure:          true,
		HealthProbeBindAddress: ":8081",
		Decisions:              NewDecisions(),
		FailurePolicy:          admissionregistrationv1.Ignore,
		LogLevel:               LogLevelInfo,
		Health:                 true,
		HealthCoalesceDelay:    metav1.Duration{Duration: 10 * time.Second},
		DeletionCost:           true,
		DeletionCostQPS:        20,
		DeletionCostBurst:      40,
	}
}

// Decode reads a WebhookConfiguration from data over the defaults: the one
// decoder of the webhook's --config file and of the release configuration
// kubectl-spread reads. Unknown fields are errors, so that a typo is not
// silently ignored, and the type must be stated, so that another kind of
// file given by mistake is refused. source names where data came from
// ("config file PATH"), at the start of every error.
func Decode(source string, data []byte) (*WebhookConfiguration, error) {
	in := withOldKeys{WebhookConfiguration: NewWebhookConfiguration()}
	// Absent fields keep their defaults.
	in.TypeMeta = metav1.TypeMeta{}
	if len(bytes.TrimSpace(data)) > 0 {
		if err := yaml.UnmarshalStrict(data, &in); err != nil {
			return nil, fmt.Errorf("%s: %w", source, err)
		}
		var keys map[string]any
		if err := yaml.Unmarshal(data, &keys); err != nil {
			return nil, fmt.Errorf("%s: %w", source, err)
		}
		for _, k := range renamedKeys {
			if _, ok := keys[k.old]; !ok {
				continue
			}
			_, both := keys[k.new]
			switch {
			case both:
				in.Deprecations = append(in.Deprecations, fmt.Sprintf("%s is ignored: %s is set, its new name", k.old, k.new))
			case k.old == "audit" && in.Audit != nil:
				in.Health = *in.Audit
			case k.old == "auditCoalesceDelay" && in.AuditCoalesceDelay != nil:
				in.HealthCoalesceDelay = *in.AuditCoalesceDelay
			}
			if !both {
				in.Deprecations = append(in.Deprecations, fmt.Sprintf("%s is renamed %s, and the old name is read for one minor version only", k.old, k.new))
			}
		}
	}
	cfg := in.WebhookConfiguration
	if cfg.APIVersion != ConfigAPIVersion || cfg.Kind != ConfigKind {
		return nil, fmt.Errorf("%s: apiVersion %q, kind %q: want apiVersion %q, kind %q",
			source, cfg.APIVersion, cfg.Kind, ConfigAPIVersion, ConfigKind)
	}
	return &cfg, nil
}

// LoadFile decodes the WebhookConfiguration file at path.
func LoadFile(path string) (*WebhookConfiguration, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading the config file: %w", err)
	}
	return Decode("config file "+path, data)
}

// Validate checks every field before anything starts; each error's path is
// the field's name in the file.
func (c *WebhookConfiguration) Validate() field.ErrorList {
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
	errs = append(errs, c.Decisions.Validate()...)
	policies := []string{string(admissionregistrationv1.Ignore), string(admissionregistrationv1.Fail)}
	if !slices.Contains(policies, string(c.FailurePolicy)) {
		errs = append(errs, field.NotSupported(field.NewPath("failurePolicy"), c.FailurePolicy, policies))
	}
	if _, err := ParseLogLevel(c.LogLevel); err != nil {
		errs = append(errs, field.Invalid(field.NewPath("logLevel"), c.LogLevel, err.Error()))
	}
	if c.HealthCoalesceDelay.Duration <= 0 {
		errs = append(errs, field.Invalid(field.NewPath("healthCoalesceDelay"), c.HealthCoalesceDelay.String(), "must be a positive duration"))
	}
	if c.ShutdownDelay.Duration < 0 {
		errs = append(errs, field.Invalid(field.NewPath("shutdownDelay"), c.ShutdownDelay.String(), "must not be negative"))
	}
	if !(c.DeletionCostQPS > 0) || math.IsInf(c.DeletionCostQPS, 0) {
		errs = append(errs, field.Invalid(field.NewPath("deletionCostQPS"), c.DeletionCostQPS, "must be a number of patches a second above 0"))
	}
	if c.DeletionCostBurst < 1 {
		errs = append(errs, field.Invalid(field.NewPath("deletionCostBurst"), c.DeletionCostBurst, "must be at least 1"))
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

// ParseLogLevel turns a log level into a logr verbosity: error is -1 (only
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
