// Command noopwebhook is the baseline of hack/bench-scale.sh: an admission
// webhook that allows every review at once, so that what spreadguard adds to
// a pod create can be told apart from what any webhook adds.
//
//	noopwebhook --port 9443 --cert-dir DIR --metrics-bind-address 127.0.0.1:8080
//
// It serves the way spreadguard-webhook does, so that only the work behind
// the handler differs: the certificate and key of DIR/tls.crt and
// DIR/tls.key through controller-runtime's certificate watcher, TLS 1.2 at
// least, HTTP/1.1 only, and the http.Server timeouts of controller-runtime's
// webhook server. Every path answers; of the AdmissionReview it reads only
// request.uid. It shares no code with spreadguard's admission handlers.
//
// On --metrics-bind-address, over plain HTTP, /metrics prints two counters in
// the Prometheus text format: noopwebhook_admission_requests_total (reviews
// answered: the probe that tells it is registered) and
// noopwebhook_tls_handshakes_total (one per new connection: whether the API
// server keeps its connections alive).
package main

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"syscall"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/certwatcher"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "noopwebhook:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("noopwebhook", flag.ContinueOnError)
	host := fs.String("host", "127.0.0.1", "address to serve the webhook on")
	port := fs.Int("port", 9443, "port of the webhook (HTTPS)")
	certDir := fs.String("cert-dir", "", "directory holding tls.crt and tls.key")
	metricsAddress := fs.String("metrics-bind-address", "127.0.0.1:8080", "address of /metrics (plain HTTP)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *certDir == "" {
		return errors.New("--cert-dir is required")
	}
	certs, err := certwatcher.New(filepath.Join(*certDir, "tls.crt"), filepath.Join(*certDir, "tls.key"))
	if err != nil {
		return fmt.Errorf("loading the serving certificate from --cert-dir %s: %w", *certDir, err)
	}
	go func() {
		if err := certs.Start(ctx); err != nil {
			fmt.Fprintln(os.Stderr, "noopwebhook: certificate watcher:", err)
		}
	}()

	var c counters
	cfg := &tls.Config{
		MinVersion:     tls.VersionTLS12,
		NextProtos:     []string{"http/1.1"},
		GetCertificate: certs.GetCertificate,
		// Once per ClientHello, as spreadguard-webhook counts them.
		GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
			c.handshakes.Add(1)
			return nil, nil
		},
	}
	ln, err := tls.Listen("tcp", net.JoinHostPort(*host, strconv.Itoa(*port)), cfg)
	if err != nil {
		return err
	}
	metricsLn, err := net.Listen("tcp", *metricsAddress)
	if err != nil {
		ln.Close()
		return err
	}
	webhook := newServer(ctx, http.HandlerFunc(c.allow))
	metrics := newServer(ctx, http.HandlerFunc(c.metrics))
	errs := make(chan error, 2)
	go func() { errs <- webhook.Serve(ln) }()
	go func() { errs <- metrics.Serve(metricsLn) }()
	select {
	case err := <-errs:
		return err
	case <-ctx.Done():
	}
	shutdown, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return errors.Join(webhook.Shutdown(shutdown), metrics.Shutdown(shutdown))
}

// newServer has the settings of controller-runtime's webhook server
// (pkg/internal/httpserver): the idle timeout decides how long a kept-alive
// connection from the API server survives between bursts.
func newServer(ctx context.Context, h http.Handler) *http.Server {
	return &http.Server{
		BaseContext:       func(net.Listener) context.Context { return ctx },
		Handler:           h,
		MaxHeaderBytes:    1 << 20,
		IdleTimeout:       90 * time.Second,
		ReadHeaderTimeout: 32 * time.Second,
	}
}

type counters struct {
	requests, handshakes atomic.Int64
}

// review is the one field of an AdmissionReview the answer needs.
type review struct {
	Request struct {
		UID string `json:"uid"`
	} `json:"request"`
}

type response struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Response   struct {
		UID     string `json:"uid"`
		Allowed bool   `json:"allowed"`
	} `json:"response"`
}

// allow answers every review with allowed, echoing its uid.
func (c *counters) allow(w http.ResponseWriter, r *http.Request) {
	var in review
	if err := json.NewDecoder(r.Body).Decode(&in); err != nil || in.Request.UID == "" {
		http.Error(w, "the body is not an AdmissionReview with a request uid", http.StatusBadRequest)
		return
	}
	out := response{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"}
	out.Response.UID, out.Response.Allowed = in.Request.UID, true
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(out)
	c.requests.Add(1)
}

func (c *counters) metrics(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/plain; version=0.0.4")
	fmt.Fprintf(w, "# TYPE noopwebhook_admission_requests_total counter\nnoopwebhook_admission_requests_total %d\n", c.requests.Load())
	fmt.Fprintf(w, "# TYPE noopwebhook_tls_handshakes_total counter\nnoopwebhook_tls_handshakes_total %d\n", c.handshakes.Load())
}
