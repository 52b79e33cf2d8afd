package server

import (
	"crypto/tls"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/go-logr/logr"
	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/spreadguard/spreadguard/test/pki"
)

// tlsServer accepts connections on 127.0.0.1 with cfg and reports the
// outcome of each server-side handshake.
type tlsServer struct {
	addr    string
	results chan error
}

func startTLSServer(t *testing.T, cfg *tls.Config) *tlsServer {
	t.Helper()
	l, err := tls.Listen("tcp", "127.0.0.1:0", cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	s := &tlsServer{addr: l.Addr().String(), results: make(chan error)}
	go func() {
		for {
			conn, err := l.Accept()
			if err != nil {
				return
			}
			err = conn.(*tls.Conn).HandshakeContext(t.Context())
			conn.Close()
			s.results <- err
		}
	}()
	return s
}

// accepts reports whether a new connection presenting cert gets through the
// server's handshake.
func (s *tlsServer) accepts(t *testing.T, cert tls.Certificate) bool {
	t.Helper()
	conn, err := tls.Dial("tcp", s.addr, &tls.Config{InsecureSkipVerify: true, Certificates: []tls.Certificate{cert}})
	if err == nil {
		conn.Close()
	}
	return <-s.results == nil
}

func TestClientCAsFollowTheFileAcrossARotation(t *testing.T) {
	old, next := pki.NewCA("client-ca-old"), pki.NewCA("client-ca-new")
	certs := map[string]tls.Certificate{
		"old": old.ClientCert("kube-apiserver"),
		"new": next.ClientCert("kube-apiserver"),
	}
	path := filepath.Join(t.TempDir(), "client-ca.crt")
	// write replaces the file as the kubelet updates a mounted ConfigMap:
	// a new file renamed into place.
	write := func(data string) func(t *testing.T) {
		return func(t *testing.T) {
			tmp := path + ".tmp"
			if err := os.WriteFile(tmp, []byte(data), 0o600); err != nil {
				t.Fatal(err)
			}
			if err := os.Rename(tmp, path); err != nil {
				t.Fatal(err)
			}
		}
	}
	remove := func(t *testing.T) {
		if err := os.Remove(path); err != nil {
			t.Fatal(err)
		}
	}
	brokenCert := "-----BEGIN CERTIFICATE-----\nbm90IGEgY2VydGlmaWNhdGU=\n-----END CERTIFICATE-----\n"

	write(string(old.PEM))(t)
	reg := prometheus.NewRegistry()
	handshakes, err := countHandshakes(reg)
	if err != nil {
		t.Fatal(err)
	}
	cas, err := newClientCAs(path, logr.Discard(), reg)
	if err != nil {
		t.Fatal(err)
	}
	reads := 0
	cas.read = func(p string) ([]byte, error) { reads++; return os.ReadFile(p) }
	serving := pki.NewCA("serving").ServerCert()
	cfg := &tls.Config{Certificates: []tls.Certificate{serving}}
	// As New applies them: the handshake counter, then the client CAs.
	handshakes(cfg)
	cas.tlsOption(cfg)
	srv := startTLSServer(t, cfg)

	steps := []struct {
		name  string
		apply func(*testing.T)
		// accepted says, per certificate, whether a new connection
		// presenting it gets through.
		accepted map[string]bool
		// reads is how many times the file was read in this step;
		// loaded and failed the reload counter's totals after it.
		reads          int
		loaded, failed float64
	}{
		{
			name:     "the old CA alone, as read at start -> the old certificate accepted, the new one refused, the file not read again",
			accepted: map[string]bool{"old": true, "new": false},
		},
		{
			name:     "a bundle of the old and the new CA -> read once, both certificates accepted",
			apply:    write(string(old.PEM) + string(next.PEM)),
			accepted: map[string]bool{"old": true, "new": true},
			reads:    1, loaded: 1,
		},
		{
			name:     "the new CA alone -> the old certificate refused",
			apply:    write(string(next.PEM)),
			accepted: map[string]bool{"old": false, "new": true},
			reads:    1, loaded: 2,
		},
		{
			name:     "a bundle whose second certificate does not parse -> the new CA alone kept, one failure counted",
			apply:    write(string(old.PEM) + brokenCert),
			accepted: map[string]bool{"old": false, "new": true},
			reads:    1, loaded: 2, failed: 1,
		},
		{
			name:     "a file that holds no certificate -> kept, counted",
			apply:    write("ca.crt: not a PEM file\n"),
			accepted: map[string]bool{"old": false, "new": true},
			reads:    1, loaded: 2, failed: 2,
		},
		{
			name:     "the file removed -> kept, counted once over every handshake",
			apply:    remove,
			accepted: map[string]bool{"old": false, "new": true},
			loaded:   2, failed: 3,
		},
		{
			name:     "the old CA back -> the old certificate accepted again",
			apply:    write(string(old.PEM)),
			accepted: map[string]bool{"old": true, "new": false},
			reads:    1, loaded: 3, failed: 3,
		},
	}
	total := 0
	for _, step := range steps {
		t.Run(step.name, func(t *testing.T) {
			reads = 0
			if step.apply != nil {
				step.apply(t)
			}
			got := map[string]bool{}
			for name := range step.accepted {
				// Twice: a file that did not change is not read again.
				got[name] = srv.accepts(t, certs[name])
				if again := srv.accepts(t, certs[name]); again != got[name] {
					t.Errorf("the %s certificate: accepted %v, then %v", name, got[name], again)
				}
				total += 2
			}
			if diff := cmp.Diff(step.accepted, got); diff != "" {
				t.Errorf("certificates accepted (-want +got):\n%s", diff)
			}
			if reads != step.reads {
				t.Errorf("the file was read %d times, want %d", reads, step.reads)
			}
			for result, want := range map[string]float64{clientCALoaded: step.loaded, clientCAFailed: step.failed} {
				if got := testutil.ToFloat64(cas.reloads.WithLabelValues(result)); got != want {
					t.Errorf("spreadguard_webhook_client_ca_reloads_total{result=%q} = %v, want %v", result, got, want)
				}
			}
		})
	}
	// The handshake counter still sees every handshake.
	if got := gathered(t, reg, "spreadguard_webhook_tls_handshakes_total"); got != float64(total) {
		t.Errorf("spreadguard_webhook_tls_handshakes_total = %v, want %d", got, total)
	}
}

// gathered reads the value of the counter name, without labels, from reg.
func gathered(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() == name {
			return f.GetMetric()[0].GetCounter().GetValue()
		}
	}
	t.Fatalf("no %s registered", name)
	return 0
}

func TestClientCAsRefuseABadFileAtStart(t *testing.T) {
	dir := t.TempDir()
	tests := []struct {
		name    string
		content *string
		wantErr string
	}{
		{name: "a missing file -> the server does not start", wantErr: "reading --client-ca-file"},
		{name: "a file with no PEM certificate -> the server does not start", content: new("hello"), wantErr: "holds no PEM certificate"},
		{
			name:    "a certificate that does not parse -> the server does not start, naming it",
			content: new("-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n"),
			wantErr: "certificate 1:",
		},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(dir, string(rune('a'+i))+".crt")
			if tt.content != nil {
				if err := os.WriteFile(path, []byte(*tt.content), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			_, err := newClientCAs(path, logr.Discard(), prometheus.NewRegistry())
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("newClientCAs = %v, want an error containing %q", err, tt.wantErr)
			}
		})
	}
}
