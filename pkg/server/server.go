// Package server serves spreadguard's admission endpoints over HTTPS in the
// webhook's manager: the serving certificate reloaded from its directory,
// the API server's client CAs reloaded from their file, every TLS handshake
// counted, /metrics behind the same certificate, the probes, and a shutdown
// that loses no request.
package server

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net/http"
	"path/filepath"
	"slices"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/certwatcher"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/metrics/filters"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/webhook"
)

// Config is what the server reads of the webhook's configuration; each
// field is the flag of the same name.
type Config struct {
	// Host and Port are where the admission endpoints listen (--host,
	// --port); an empty Host is every interface.
	Host string
	Port int
	// CertDir holds tls.crt and tls.key, reloaded when they change
	// (--cert-dir).
	CertDir string
	// ClientCAFile holds the CAs the API server's client certificate must
	// chain to, reloaded when it changes (--client-ca-file); empty accepts
	// any caller.
	ClientCAFile string
	// MetricsBindAddress serves /metrics; "0" turns it off. With
	// MetricsSecure it is HTTPS with the serving certificate, behind the
	// API server's authentication and authorization.
	MetricsBindAddress string
	MetricsSecure      bool
	// HealthProbeBindAddress serves /healthz and /readyz; "0" turns them
	// off.
	HealthProbeBindAddress string
	// ShutdownDelay is how long a replica told to stop answers requests
	// after it stops being ready (shutdown.go).
	ShutdownDelay time.Duration
}

// Server is the webhook's HTTPS serving, for one manager.
type Server struct {
	cfg   Config
	log   logr.Logger
	certs *certwatcher.CertWatcher
	// serving are the TLS settings of every HTTPS server: the admission
	// endpoints and the secure metrics present the same certificate;
	// webhookTLS adds, for the admission endpoints, the handshake counter
	// and the client CAs.
	serving, webhookTLS []func(*tls.Config)
	stop                *shutdown
}

// New reads the serving certificate now, so that a missing or broken one is
// a clear error at start rather than a failed TLS handshake later, and the
// client CAs of cfg.ClientCAFile; it registers the server's metrics with
// reg.
func New(cfg Config, log logr.Logger, reg prometheus.Registerer) (*Server, error) {
	certs, err := certwatcher.New(filepath.Join(cfg.CertDir, "tls.crt"), filepath.Join(cfg.CertDir, "tls.key"))
	if err != nil {
		return nil, fmt.Errorf("loading the serving certificate from --cert-dir %s: %w", cfg.CertDir, err)
	}
	serving := []func(*tls.Config){secureTLS, func(c *tls.Config) { c.GetCertificate = certs.GetCertificate }}
	handshakes, err := countHandshakes(reg)
	if err != nil {
		return nil, err
	}
	webhookTLS := append(slices.Clone(serving), handshakes)
	if cfg.ClientCAFile != "" {
		cas, err := newClientCAs(cfg.ClientCAFile, log.WithName("client-ca"), reg)
		if err != nil {
			return nil, err
		}
		webhookTLS = append(webhookTLS, cas.tlsOption)
	}
	return &Server{cfg: cfg, log: log, certs: certs, serving: serving, webhookTLS: webhookTLS,
		stop: newShutdown(cfg.ShutdownDelay)}, nil
}

// Serving returns the context the manager runs under: it ends
// Config.ShutdownDelay after ctx does, and the replica stops being ready as
// ctx ends. cancel ends it at once (the manager failed on its own).
func (s *Server) Serving(ctx context.Context) (context.Context, context.CancelFunc) {
	return s.stop.serving(ctx, s.log)
}

// ManagerOptions sets the servers of o: the admission endpoints', the
// metrics' and the probes' address.
func (s *Server) ManagerOptions(o *ctrl.Options) {
	o.Metrics = metricsserver.Options{BindAddress: s.cfg.MetricsBindAddress}
	if s.cfg.MetricsSecure {
		// As kubebuilder's scaffold does: the counts of denials per
		// namespace are not for anyone who can reach the pod.
		o.Metrics.SecureServing = true
		o.Metrics.FilterProvider = filters.WithAuthenticationAndAuthorization
		o.Metrics.TLSOpts = s.serving
	}
	o.HealthProbeBindAddress = s.cfg.HealthProbeBindAddress
	o.WebhookServer = webhook.NewServer(webhook.Options{
		Host: s.cfg.Host, Port: s.cfg.Port, CertDir: s.cfg.CertDir, TLSOpts: s.webhookTLS,
	})
}

// Register adds the server to mgr, built with ManagerOptions: the
// certificate watcher, each endpoint at its path (closing its connections
// once the replica is stopping), /healthz, and /readyz, which passes once
// ready does and the webhook server has started, until the replica is
// told to stop.
func (s *Server) Register(mgr manager.Manager, endpoints map[string]http.Handler, ready func() bool) error {
	if err := mgr.Add(s.certs); err != nil {
		return fmt.Errorf("adding the certificate watcher: %w", err)
	}
	srv := mgr.GetWebhookServer()
	for path, h := range endpoints {
		srv.Register(path, s.stop.closeWhenStopping(h))
	}
	if err := mgr.AddHealthzCheck("ping", healthz.Ping); err != nil {
		return fmt.Errorf("adding the health check: %w", err)
	}
	checks := []struct {
		name  string
		check healthz.Checker
	}{
		{"caches", func(*http.Request) error {
			if !ready() {
				return errors.New("the informer caches have not synced yet")
			}
			return nil
		}},
		{"webhook", srv.StartedChecker()},
		{"shutdown", s.stop.readyz},
	}
	for _, c := range checks {
		if err := mgr.AddReadyzCheck(c.name, c.check); err != nil {
			return fmt.Errorf("adding the readiness check: %w", err)
		}
	}
	return nil
}

// secureTLS sets TLS 1.2 as the minimum and turns HTTP/2 off: HTTP/2's
// stream handling has been the subject of denial-of-service advisories
// (CVE-2023-44487, CVE-2023-39325), and the apiserver speaks HTTP/1.1 to
// webhooks just as well.
func secureTLS(c *tls.Config) {
	c.MinVersion = tls.VersionTLS12
	c.NextProtos = []string{"http/1.1"}
}
