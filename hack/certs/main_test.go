package main

import (
	"bytes"
	"crypto/x509"
	"encoding/pem"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func at(t time.Time) func() time.Time { return func() time.Time { return t } }

// files reads the four files of dir; a missing file reads as nil.
func files(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	for _, name := range []string{caCertFile, caKeyFile, tlsCertFile, tlsKeyFile} {
		data, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil && !os.IsNotExist(err) {
			t.Fatalf("read %s: %v", name, err)
		}
		out[name] = data
	}
	return out
}

func parseCert(t *testing.T, data []byte) *x509.Certificate {
	t.Helper()
	block, _ := pem.Decode(data)
	if block == nil {
		t.Fatalf("not PEM: %q", data)
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatalf("parse certificate: %v", err)
	}
	return cert
}

func hostsOf(cert *x509.Certificate) []string {
	out := slices.Clone(cert.DNSNames)
	for _, ip := range cert.IPAddresses {
		out = append(out, ip.String())
	}
	return out
}

func mustRun(t *testing.T, now time.Time, args ...string) string {
	t.Helper()
	var out bytes.Buffer
	if err := run(args, &out, at(now)); err != nil {
		t.Fatalf("run %v: %v", args, err)
	}
	return out.String()
}

func TestFirstRunWritesACAAndAServingCertificateItSigned(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "dev")
	mustRun(t, t0, "-dir", dir)

	got := files(t, dir)
	ca := parseCert(t, got[caCertFile])
	serving := parseCert(t, got[tlsCertFile])
	if !ca.IsCA {
		t.Errorf("ca.crt is not a CA")
	}
	if diff := cmp.Diff([]string{"localhost", "127.0.0.1", "::1"}, hostsOf(serving)); diff != "" {
		t.Errorf("serving certificate hosts (-want +got):\n%s", diff)
	}
	roots := x509.NewCertPool()
	roots.AddCert(ca)
	for _, host := range []string{"localhost", "127.0.0.1", "::1"} {
		if _, err := serving.Verify(x509.VerifyOptions{DNSName: host, Roots: roots, CurrentTime: t0}); err != nil {
			t.Errorf("serving certificate does not verify for %s against ca.crt: %v", host, err)
		}
	}
	if _, _, err := readPair(filepath.Join(dir, tlsCertFile), filepath.Join(dir, tlsKeyFile)); err != nil {
		t.Errorf("tls.crt and tls.key do not belong together: %v", err)
	}
	info, err := os.Stat(filepath.Join(dir, tlsKeyFile))
	if err != nil {
		t.Fatal(err)
	}
	if mode := info.Mode().Perm(); mode != 0o600 {
		t.Errorf("tls.key mode = %v, want 0600", mode)
	}
}

func TestSecondRun(t *testing.T) {
	tests := []struct {
		name string
		// damage changes the directory after the first run at t0.
		damage func(t *testing.T, dir string)
		// later is when the second run happens.
		later time.Duration
		args  []string
		// wantKept lists the files the second run must leave byte for byte.
		wantKept []string
		wantOut  string
	}{
		{
			name:     "nothing changed, a day later -> every file kept",
			later:    24 * time.Hour,
			wantKept: []string{caCertFile, caKeyFile, tlsCertFile, tlsKeyFile},
			wantOut:  "ca.crt: kept\ntls.crt: kept for localhost, 127.0.0.1, ::1\n",
		},
		{
			name:     "serving certificate within a day of expiry -> reissued by the same CA",
			later:    365*24*time.Hour - time.Hour,
			wantKept: []string{caCertFile, caKeyFile},
			wantOut:  "ca.crt: kept\ntls.crt: written for localhost, 127.0.0.1, ::1\n",
		},
		{
			name:     "-renew of a good certificate -> serving certificate reissued, CA kept",
			args:     []string{"-renew"},
			wantKept: []string{caCertFile, caKeyFile},
			wantOut:  "ca.crt: kept\ntls.crt: written for localhost, 127.0.0.1, ::1\n",
		},
		{
			name:     "a host added -> serving certificate reissued, CA kept",
			args:     []string{"-hosts", "localhost,127.0.0.1,::1,webhook.test"},
			wantKept: []string{caCertFile, caKeyFile},
			wantOut:  "ca.crt: kept\ntls.crt: written for localhost, 127.0.0.1, ::1, webhook.test\n",
		},
		{
			name:     "tls.key deleted -> serving certificate reissued, CA kept",
			damage:   func(t *testing.T, dir string) { remove(t, dir, tlsKeyFile) },
			wantKept: []string{caCertFile, caKeyFile},
			wantOut:  "ca.crt: kept\ntls.crt: written for localhost, 127.0.0.1, ::1\n",
		},
		{
			name:    "ca.key deleted -> CA and serving certificate both new",
			damage:  func(t *testing.T, dir string) { remove(t, dir, caKeyFile) },
			wantOut: "ca.crt: written\ntls.crt: written for localhost, 127.0.0.1, ::1\n",
		},
		{
			name: "ca.crt is not PEM -> CA and serving certificate both new",
			damage: func(t *testing.T, dir string) {
				if err := os.WriteFile(filepath.Join(dir, caCertFile), []byte("garbage"), 0o644); err != nil {
					t.Fatal(err)
				}
			},
			wantOut: "ca.crt: written\ntls.crt: written for localhost, 127.0.0.1, ::1\n",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			mustRun(t, t0, "-dir", dir)
			before := files(t, dir)
			if tc.damage != nil {
				tc.damage(t, dir)
			}
			out := mustRun(t, t0.Add(tc.later), append([]string{"-dir", dir}, tc.args...)...)
			if diff := cmp.Diff(tc.wantOut, strings.ReplaceAll(out, dir+string(filepath.Separator), "")); diff != "" {
				t.Errorf("output (-want +got):\n%s", diff)
			}
			after := files(t, dir)
			var kept []string
			for _, name := range []string{caCertFile, caKeyFile, tlsCertFile, tlsKeyFile} {
				if bytes.Equal(before[name], after[name]) {
					kept = append(kept, name)
				}
			}
			if diff := cmp.Diff(tc.wantKept, kept); diff != "" {
				t.Errorf("files left unchanged (-want +got):\n%s", diff)
			}
			// Whatever was kept or rewritten, the result must be a valid chain.
			ca, serving := parseCert(t, after[caCertFile]), parseCert(t, after[tlsCertFile])
			roots := x509.NewCertPool()
			roots.AddCert(ca)
			if _, err := serving.Verify(x509.VerifyOptions{DNSName: "127.0.0.1", Roots: roots, CurrentTime: t0.Add(tc.later)}); err != nil {
				t.Errorf("after the second run tls.crt does not verify against ca.crt: %v", err)
			}
		})
	}
}

func remove(t *testing.T, dir, name string) {
	t.Helper()
	if err := os.Remove(filepath.Join(dir, name)); err != nil {
		t.Fatal(err)
	}
}

func TestBadFlags(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		wantErr string
	}{
		{name: "empty -hosts -> refused", args: []string{"-hosts", " , "}, wantErr: "-hosts is empty"},
		{name: "-days 0 -> refused", args: []string{"-days", "0"}, wantErr: "-days is 0"},
		{name: "a positional argument -> refused", args: []string{"certs/dev"}, wantErr: `unexpected argument "certs/dev"`},
		{name: "an unknown flag -> refused", args: []string{"-out", "x"}, wantErr: "flag provided but not defined: -out"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			args := append([]string{"-dir", t.TempDir()}, tc.args...)
			err := run(args, &bytes.Buffer{}, at(t0))
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("run(%v) error = %v, want one containing %q", args, err, tc.wantErr)
			}
		})
	}
}
