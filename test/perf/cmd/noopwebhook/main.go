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
// On --metrics-bind-address, over plain HTTP, /metrics prints counters in
// the Prometheus text format: noopwebhook_admission_requests_total (reviews
// answered: the probe that tells it is registered),
// noopwebhook_tls_handshakes_total (one per new connection: whether the API
// server keeps its connections alive), and its CPU time and garbage
// collections under the names spreadguard's /metrics gives them
// (process_cpu_seconds_total, go_gc_duration_seconds_count), and
// /debug/pprof/ serves the Go
// runtime's profiles (net/http/pprof), so that a CPU profile of a burst can
// be taken.
//
// With --mutate-patch FILE it answers the reviews of --mutate-path (the
// chart's mutating webhook, /mutate-v1-pod) with the JSON Patch of FILE,
// base64 in response.patch with patchType JSONPatch, as spreadguard answers
// a pod it mutates: the API server then applies the patch and sends the
// validating webhook the patched pod, so that this baseline costs the API
// server what spreadguard's answer costs it. The patch is sent as it is,
// whatever the pod; every other path is allowed without one.
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
	"net/http/pprof"
	"os"
	"os/signal"
	"path/filepath"
	runtimemetrics "runtime/metrics"
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
	metricsAddress := fs.String("metrics-bind-address", "127.0.0.1:8080", "address of /metrics and /debug/pprof/ (plain HTTP)")
	patchFile := fs.String("mutate-patch", "", "a JSON Patch document to answer the reviews of --mutate-path with")
	mutatePath := fs.String("mutate-path", "/mutate-v1-pod", "the path of the mutating webhook, which --mutate-patch answers")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *certDir == "" {
		return errors.New("--cert-dir is required")
	}
	h := &handler{mutatePath: *mutatePath}
	if *patchFile != "" {
		var err error
		if h.patch, err = readPatch(*patchFile); err != nil {
			return fmt.Errorf("--mutate-patch: %w", err)
		}
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

	cfg := &tls.Config{
		MinVersion:     tls.VersionTLS12,
		NextProtos:     []string{"http/1.1"},
		GetCertificate: certs.GetCertificate,
		// Once per ClientHello, as spreadguard-webhook counts them.
		GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
			h.handshakes.Add(1)
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
	webhook := newServer(ctx, http.HandlerFunc(h.allow))
	metrics := newServer(ctx, h.metricsMux())
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

// handler answers the reviews and counts them.
type handler struct {
	requests, handshakes atomic.Int64
	// mutatePath is the path whose reviews get patch, when there is one.
	mutatePath string
	patch      []byte
}

// readPatch reads a JSON Patch document: an array of operations, each with
// an op and a path. An empty one is refused: a baseline that patches
// nothing is the plain no-op, and asking for it this way is a mistake.
func readPatch(path string) ([]byte, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var ops []struct {
		Op   string `json:"op"`
		Path string `json:"path"`
	}
	if err := json.Unmarshal(data, &ops); err != nil {
		return nil, fmt.Errorf("%s is not a JSON Patch document: %w", path, err)
	}
	if len(ops) == 0 {
		return nil, fmt.Errorf("%s holds no operation", path)
	}
	for i, op := range ops {
		if op.Op == "" || op.Path == "" {
			return nil, fmt.Errorf("%s: operation %d has no op or no path", path, i)
		}
	}
	return data, nil
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
		// Patch is base64 in JSON, as encoding/json writes a []byte.
		Patch     []byte `json:"patch,omitempty"`
		PatchType string `json:"patchType,omitempty"`
	} `json:"response"`
}

// allow answers every review with allowed, echoing its uid, and with the
// patch on the mutating path.
func (h *handler) allow(w http.ResponseWriter, r *http.Request) {
	var in review
	if err := json.NewDecoder(r.Body).Decode(&in); err != nil || in.Request.UID == "" {
		http.Error(w, "the body is not an AdmissionReview with a request uid", http.StatusBadRequest)
		return
	}
	out := response{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"}
	out.Response.UID, out.Response.Allowed = in.Request.UID, true
	if h.patch != nil && r.URL.Path == h.mutatePath {
		out.Response.Patch, out.Response.PatchType = h.patch, "JSONPatch"
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(out)
	h.requests.Add(1)
}

func (h *handler) metrics(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/plain; version=0.0.4")
	fmt.Fprintf(w, "# TYPE noopwebhook_admission_requests_total counter\nnoopwebhook_admission_requests_total %d\n", h.requests.Load())
	fmt.Fprintf(w, "# TYPE noopwebhook_tls_handshakes_total counter\nnoopwebhook_tls_handshakes_total %d\n", h.handshakes.Load())
	// The names Prometheus' process and Go collectors give these in
	// spreadguard's /metrics, so that perfload reads both alike.
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err == nil {
		cpu := time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
		fmt.Fprintf(w, "# TYPE process_cpu_seconds_total counter\nprocess_cpu_seconds_total %g\n", cpu.Seconds())
	}
	gc := []runtimemetrics.Sample{{Name: "/gc/cycles/total:gc-cycles"}}
	runtimemetrics.Read(gc)
	if gc[0].Value.Kind() == runtimemetrics.KindUint64 {
		fmt.Fprintf(w, "# TYPE go_gc_duration_seconds summary\ngo_gc_duration_seconds_count %d\n", gc[0].Value.Uint64())
	}
}

// metricsMux serves /metrics and the runtime's profiles.
func (h *handler) metricsMux() *http.ServeMux {
	mux := http.NewServeMux()
	mux.HandleFunc("/metrics", h.metrics)
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	return mux
}
