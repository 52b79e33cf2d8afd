package server

import (
	"crypto/tls"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// countHandshakes returns a TLS option that counts, in
// spreadguard_webhook_tls_handshakes_total, every TLS handshake the admission
// server begins. Each new connection costs one, so the count per burst of
// creates tells whether the API server reuses its connections to the webhook
// (HTTP/1.1 keep-alive) or pays a handshake per review. The server's own
// readiness check dials it too, once per /readyz.
func countHandshakes(reg prometheus.Registerer) (func(*tls.Config), error) {
	handshakes := prometheus.NewCounter(prometheus.CounterOpts{
		Name: "spreadguard_webhook_tls_handshakes_total",
		Help: "TLS handshakes begun by the admission server (one per new connection).",
	})
	if err := reg.Register(handshakes); err != nil {
		return nil, fmt.Errorf("registering the handshake counter: %w", err)
	}
	return func(c *tls.Config) {
		// GetConfigForClient runs once per ClientHello; nil keeps c as it is.
		c.GetConfigForClient = func(*tls.ClientHelloInfo) (*tls.Config, error) {
			handshakes.Inc()
			return nil, nil
		}
	}, nil
}
