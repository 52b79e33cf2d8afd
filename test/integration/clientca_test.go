//go:build integration

package integration

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/spreadguard/spreadguard/cmd/webhook/app"
)

// clientCA is a CA and one client certificate it signed, for the API
// server's side of --client-ca-file.
type clientCA struct {
	pem    []byte
	client tls.Certificate
}

func newClientCA(t *testing.T) clientCA {
	t.Helper()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "apiserver-client-ca"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		t.Fatal(err)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.CreateCertificate(rand.Reader, &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "kube-apiserver"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	return clientCA{
		pem:    pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}),
		client: tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key},
	}
}

func TestClientCAFileAdmitsOnlyTheAPIServersCertificate(t *testing.T) {
	trusted, other := newClientCA(t), newClientCA(t)
	caFile := filepath.Join(t.TempDir(), "client-ca.crt")
	if err := os.WriteFile(caFile, trusted.pem, 0o600); err != nil {
		t.Fatal(err)
	}
	port, _, _ := runServer(t, "webhook-client-ca", func(cfg *app.Config) {
		cfg.ClientCAFile = caFile
		cfg.MetricsSecure = false
	})
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(suite.caPEM)
	post := func(certs ...tls.Certificate) error {
		c := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{
			RootCAs: roots, Certificates: certs, MinVersion: tls.VersionTLS12,
		}}}
		resp, err := c.Post(fmt.Sprintf("https://127.0.0.1:%d%s", port, app.PathValidatePod), "application/json",
			bytes.NewReader([]byte(`{}`)))
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest {
			return fmt.Errorf("status %d, want 400 for an empty review", resp.StatusCode)
		}
		return nil
	}
	if err := post(); err == nil {
		t.Error("a caller without a client certificate was answered")
	}
	if err := post(other.client); err == nil {
		t.Error("a caller with a certificate from another CA was answered")
	}
	if err := post(trusted.client); err != nil {
		t.Errorf("the API server's certificate was refused: %v", err)
	}
}
