// Package pki makes the certificates the tests need: CAs, and the server and
// client certificates they sign, with ECDSA P-256 keys valid for an hour
// around now. Generating a key or a certificate fails only when the system's
// random source does, so its functions panic then rather than return an
// error every caller would have to check.
package pki

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"time"
)

// CA is a certificate authority.
type CA struct {
	// PEM is the CA's certificate, PEM-encoded: what a bundle of trusted
	// CAs holds.
	PEM  []byte
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
}

// NewCA returns a self-signed CA named name.
func NewCA(name string) *CA {
	key := newKey()
	tmpl := &x509.Certificate{
		SerialNumber: serial(), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	der := must(x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key))
	cert := must(x509.ParseCertificate(der))
	return &CA{PEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), cert: cert, key: key}
}

// ClientCert returns a client certificate for commonName signed by ca.
func (ca *CA) ClientCert(commonName string) tls.Certificate {
	return ca.issue(&x509.Certificate{
		Subject:     pkix.Name{CommonName: commonName},
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	})
}

// ServerCert returns a serving certificate for 127.0.0.1 signed by ca.
func (ca *CA) ServerCert() tls.Certificate {
	return ca.issue(&x509.Certificate{
		Subject:     pkix.Name{CommonName: "127.0.0.1"},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	})
}

func (ca *CA) issue(tmpl *x509.Certificate) tls.Certificate {
	key := newKey()
	tmpl.SerialNumber = serial()
	tmpl.NotBefore, tmpl.NotAfter = time.Now().Add(-time.Hour), time.Now().Add(time.Hour)
	der := must(x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key))
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

// PEM encodes cert's certificate and key in one file, as a kubeconfig's
// client-certificate and client-key may both name: one rename replaces
// both at once.
func PEM(cert tls.Certificate) []byte {
	key := must(x509.MarshalPKCS8PrivateKey(cert.PrivateKey))
	out := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: cert.Certificate[0]})
	return append(out, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: key})...)
}

func newKey() *ecdsa.PrivateKey {
	return must(ecdsa.GenerateKey(elliptic.P256(), rand.Reader))
}

func serial() *big.Int {
	return must(rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62)))
}

func must[T any](v T, err error) T {
	if err != nil {
		panic("pki: " + err.Error())
	}
	return v
}
