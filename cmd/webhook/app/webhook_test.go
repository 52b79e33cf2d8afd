package app

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/rest"
)

func TestRunRefusesToStart(t *testing.T) {
	// Nothing listens there: Run must fail before it would connect.
	unreachable := &rest.Config{Host: "https://127.0.0.1:1"}
	emptyDir := t.TempDir()
	garbageDir := t.TempDir()
	for _, f := range []string{"tls.crt", "tls.key"} {
		if err := os.WriteFile(filepath.Join(garbageDir, f), []byte("not PEM"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		name    string
		cfg     *Config
		wantErr string
	}{
		{
			name:    "invalid configuration -> the field errors, nothing started",
			cfg:     configWith(func(c *Config) { c.DefaultAction = "Block" }),
			wantErr: `defaultAction: Unsupported value: "Block"`,
		},
		{
			name:    "cert dir without certificates -> error naming --cert-dir",
			cfg:     configWith(func(c *Config) { c.CertDir = emptyDir }),
			wantErr: "loading the serving certificate from --cert-dir " + emptyDir,
		},
		{
			name:    "certificates that are not PEM -> error naming --cert-dir",
			cfg:     configWith(func(c *Config) { c.CertDir = garbageDir }),
			wantErr: "loading the serving certificate from --cert-dir " + garbageDir,
		},
		{
			name:    "kubeconfig that does not exist -> error naming it",
			cfg:     configWith(func(c *Config) { c.Kubeconfig = "/nonexistent/kubeconfig" }),
			wantErr: "loading --kubeconfig /nonexistent/kubeconfig",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			opts := []Option{WithLogger(logr.Discard()), WithMetricsRegistry(prometheus.NewRegistry())}
			if tt.cfg.Kubeconfig == "" {
				opts = append(opts, WithRESTConfig(unreachable))
			}
			err := Run(t.Context(), tt.cfg, opts...)
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("Run() = %v, want an error containing %q", err, tt.wantErr)
			}
		})
	}
}
