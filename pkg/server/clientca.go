package server

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"sync"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
)

// Results of a read of --client-ca-file, the "result" label of
// spreadguard_webhook_client_ca_reloads_total.
const (
	clientCALoaded = "loaded"
	clientCAFailed = "failed"
)

// clientCAs holds the CAs of --client-ca-file, which the API server's
// client certificate must chain to, and keeps them current: the file is
// checked at every TLS handshake (a stat) and read again only when it
// changed (another inode, size or modification time), as the serving
// certificate is reloaded from --cert-dir. A CA is rotated by publishing a
// bundle that holds the old and the new CA, then moving the API server to
// a certificate of the new one, then dropping the old: read once at start,
// the bundle would leave every connection the API server opens after the
// second step failing TLS until a restart, and under failurePolicy Ignore
// nothing would say that spreadguard had stopped enforcing.
//
// A file that cannot be read or holds a certificate that does not parse
// keeps the last good pool: the error is logged and counted once per
// change of the file, and the API server stays trusted as it was. A
// half-written bundle is read again at the next handshake once its writer
// has finished (the modification time moves); the kubelet, which writes a
// mounted ConfigMap, swaps a symlink and never leaves one half-written.
//
// Connections already established stay open: TLS verifies a client
// certificate once, at the handshake, and the API server reconnects when
// its own certificate changes.
type clientCAs struct {
	path    string
	log     logr.Logger
	reloads *prometheus.CounterVec
	// read reads the file; a test counts the reads through it.
	read func(string) ([]byte, error)

	mu sync.Mutex
	// seen is the file as it was when last read, successfully or not;
	// statErr the last failure to stat it, so that a missing file is
	// reported once and not at every handshake.
	seen    os.FileInfo
	statErr string
	pool    *x509.CertPool
	// config is base with the current pool, built once per pool and
	// base: what GetConfigForClient hands crypto/tls.
	config, base *tls.Config
}

// newClientCAs reads path, which must hold at least one PEM certificate,
// and registers the reload counter with reg.
func newClientCAs(path string, log logr.Logger, reg prometheus.Registerer) (*clientCAs, error) {
	cas := &clientCAs{
		path: path,
		log:  log,
		reloads: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "spreadguard_webhook_client_ca_reloads_total",
			Help: "Reads of --client-ca-file after it changed, by result (loaded, failed: the previous CAs are kept).",
		}, []string{"result"}),
		read: os.ReadFile,
	}
	info, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("reading --client-ca-file: %w", err)
	}
	if err := cas.load(info); err != nil {
		return nil, err
	}
	if err := reg.Register(cas.reloads); err != nil {
		return nil, fmt.Errorf("registering the client CA reload counter: %w", err)
	}
	return cas, nil
}

// tlsOption makes a server require a client certificate signed by one of
// the current CAs. It keeps the GetConfigForClient already set (the
// handshake counter) and runs it first.
func (cas *clientCAs) tlsOption(c *tls.Config) {
	cas.mu.Lock()
	c.ClientCAs, c.ClientAuth = cas.pool, tls.RequireAndVerifyClientCert
	cas.mu.Unlock()
	next := c.GetConfigForClient
	c.GetConfigForClient = func(hello *tls.ClientHelloInfo) (*tls.Config, error) {
		base := c
		if next != nil {
			cfg, err := next(hello)
			if err != nil {
				return nil, err
			}
			if cfg != nil {
				base = cfg
			}
		}
		return cas.configFor(base), nil
	}
}

// configFor returns base with the CAs of the file as it is now.
func (cas *clientCAs) configFor(base *tls.Config) *tls.Config {
	cas.mu.Lock()
	defer cas.mu.Unlock()
	cas.refresh()
	if cas.config == nil || cas.base != base {
		cfg := base.Clone()
		// crypto/tls asks only the listener's config for a config per
		// client; this one is final.
		cfg.GetConfigForClient = nil
		cfg.ClientCAs, cfg.ClientAuth = cas.pool, tls.RequireAndVerifyClientCert
		cas.config, cas.base = cfg, base
	}
	return cas.config
}

// refresh reads the file again when it changed since it was last read.
// The caller holds mu.
func (cas *clientCAs) refresh() {
	info, err := os.Stat(cas.path)
	if err != nil {
		if err.Error() != cas.statErr {
			cas.statErr = err.Error()
			cas.failed(fmt.Errorf("reading --client-ca-file: %w", err))
		}
		return
	}
	cas.statErr = ""
	if cas.seen != nil && os.SameFile(cas.seen, info) && info.Size() == cas.seen.Size() && info.ModTime().Equal(cas.seen.ModTime()) {
		return
	}
	if err := cas.load(info); err != nil {
		cas.failed(err)
		return
	}
	cas.reloads.WithLabelValues(clientCALoaded).Inc()
	cas.log.Info("reloaded the client CAs of --client-ca-file", "path", cas.path)
}

// load reads the file, whose stat is info, into a new pool; on an error
// the current pool stays. Either way the file as it is now counts as seen.
func (cas *clientCAs) load(info os.FileInfo) error {
	cas.seen = info
	data, err := cas.read(cas.path)
	if err != nil {
		return fmt.Errorf("reading --client-ca-file: %w", err)
	}
	pool, err := parseCAs(data)
	if err != nil {
		return fmt.Errorf("--client-ca-file %s: %w", cas.path, err)
	}
	cas.pool, cas.config = pool, nil
	return nil
}

func (cas *clientCAs) failed(err error) {
	cas.reloads.WithLabelValues(clientCAFailed).Inc()
	cas.log.Error(err, "keeping the client CAs read before; the API server's certificate is checked against those")
}

// parseCAs parses every PEM certificate of data. Unlike
// x509.CertPool.AppendCertsFromPEM, which skips a block it cannot parse,
// it refuses a bundle with a broken certificate: a bundle that lost its new
// CA to a typo would otherwise be taken, and the rotation fail later.
func parseCAs(data []byte) (*x509.CertPool, error) {
	pool := x509.NewCertPool()
	n := 0
	for block, rest := pem.Decode(data); block != nil; block, rest = pem.Decode(rest) {
		if block.Type != "CERTIFICATE" {
			continue
		}
		cert, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			return nil, fmt.Errorf("certificate %d: %w", n+1, err)
		}
		pool.AddCert(cert)
		n++
	}
	if n == 0 {
		return nil, errors.New("holds no PEM certificate")
	}
	return pool, nil
}
