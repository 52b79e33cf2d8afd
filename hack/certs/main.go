// Command certs writes the certificates a spreadguard webhook server needs when
// it runs outside a cluster, during development and in the local e2e: a CA and
// a serving certificate for localhost and 127.0.0.1 signed by it.
//
//	go run ./hack/certs [-dir certs/dev] [-hosts localhost,127.0.0.1,::1] [-days 365] [-renew]
//
// It writes ca.crt, ca.key, tls.crt and tls.key into the directory; tls.crt and
// tls.key are what the server's --cert-dir expects, and ca.crt, base64-encoded,
// is the chart's webhook.caBundle. A second run keeps what is there and still
// good, so that a caBundle registered in a cluster stays valid: the CA is kept
// unless it is missing, unreadable or expiring, and the serving certificate is
// kept unless it is missing, expiring, no longer signed by the CA or does not
// cover every host.
//
// Only the standard library is used, so the program builds anywhere Go does.
package main

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// File names inside the output directory.
const (
	caCertFile  = "ca.crt"
	caKeyFile   = "ca.key"
	tlsCertFile = "tls.crt"
	tlsKeyFile  = "tls.key"
)

// renewWithin is how close to its expiry a certificate is replaced rather than
// kept: a development session must not outlive the certificate it started with.
const renewWithin = 24 * time.Hour

func main() {
	if err := run(os.Args[1:], os.Stdout, time.Now); err != nil {
		fmt.Fprintf(os.Stderr, "certs: %v\n", err)
		os.Exit(1)
	}
}

// options are the command's flags.
type options struct {
	dir   string
	hosts []string
	days  int
	// renew reissues a good serving certificate, as cert-manager does when
	// two thirds of its life have passed; the CA is kept.
	renew bool
}

func parseFlags(args []string) (options, error) {
	fset := flag.NewFlagSet("certs", flag.ContinueOnError)
	fset.SetOutput(io.Discard)
	dir := fset.String("dir", "certs/dev", "directory to write ca.crt, ca.key, tls.crt and tls.key into")
	hosts := fset.String("hosts", "localhost,127.0.0.1,::1", "comma-separated DNS names and IP addresses of the serving certificate")
	days := fset.Int("days", 365, "validity of the serving certificate in days (the CA gets ten times as long)")
	renew := fset.Bool("renew", false, "issue a new serving key and certificate even when the current ones are good, keeping the CA")
	if err := fset.Parse(args); err != nil {
		return options{}, fmt.Errorf("parse flags: %w", err)
	}
	if fset.NArg() > 0 {
		return options{}, fmt.Errorf("unexpected argument %q: every setting is a flag (-dir, -hosts, -days)", fset.Arg(0))
	}
	o := options{dir: *dir, days: *days, renew: *renew}
	for h := range strings.SplitSeq(*hosts, ",") {
		if h = strings.TrimSpace(h); h != "" {
			o.hosts = append(o.hosts, h)
		}
	}
	if len(o.hosts) == 0 {
		return options{}, errors.New("-hosts is empty: name at least one DNS name or IP address")
	}
	if o.days < 1 {
		return options{}, fmt.Errorf("-days is %d: it must be at least 1", o.days)
	}
	if o.dir == "" {
		return options{}, errors.New("-dir is empty: name the directory to write the certificates into")
	}
	return o, nil
}

func run(args []string, out io.Writer, now func() time.Time) error {
	o, err := parseFlags(args)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(o.dir, 0o755); err != nil {
		return fmt.Errorf("create output directory: %w", err)
	}
	t := now()
	ca, caKey, caKept, err := loadOrCreateCA(o, t)
	if err != nil {
		return err
	}
	servingKept := false
	if caKept && !o.renew {
		servingKept = servingStillGood(o, ca, t)
	}
	if !servingKept {
		if err := issueServing(o, ca, caKey, t); err != nil {
			return err
		}
	}
	fmt.Fprintf(out, "%s: %s\n", filepath.Join(o.dir, caCertFile), verdict(caKept))
	fmt.Fprintf(out, "%s: %s for %s\n", filepath.Join(o.dir, tlsCertFile), verdict(servingKept), strings.Join(o.hosts, ", "))
	return nil
}

func verdict(kept bool) string {
	if kept {
		return "kept"
	}
	return "written"
}

// loadOrCreateCA returns the CA in the directory when it is readable, a CA and
// not expiring; otherwise it writes a new one. kept says which.
func loadOrCreateCA(o options, now time.Time) (cert *x509.Certificate, key crypto.Signer, kept bool, err error) {
	cert, key, err = readPair(filepath.Join(o.dir, caCertFile), filepath.Join(o.dir, caKeyFile))
	if err == nil && cert.IsCA && now.Add(renewWithin).Before(cert.NotAfter) {
		return cert, key, true, nil
	}
	key, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, false, fmt.Errorf("generate CA key: %w", err)
	}
	tmpl := &x509.Certificate{
		Subject:               pkix.Name{CommonName: "spreadguard development CA"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(time.Duration(10*o.days) * 24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
	}
	cert, err = sign(tmpl, tmpl, key.Public(), key)
	if err != nil {
		return nil, nil, false, fmt.Errorf("sign CA: %w", err)
	}
	if err := writePair(filepath.Join(o.dir, caCertFile), filepath.Join(o.dir, caKeyFile), cert, key); err != nil {
		return nil, nil, false, err
	}
	return cert, key, false, nil
}

// servingStillGood reports whether the serving certificate in the directory
// can be kept: it loads with its key, was signed by ca, covers every host and
// is not expiring.
func servingStillGood(o options, ca *x509.Certificate, now time.Time) bool {
	cert, _, err := readPair(filepath.Join(o.dir, tlsCertFile), filepath.Join(o.dir, tlsKeyFile))
	if err != nil || !now.Add(renewWithin).Before(cert.NotAfter) {
		return false
	}
	roots := x509.NewCertPool()
	roots.AddCert(ca)
	for _, h := range o.hosts {
		if _, err := cert.Verify(x509.VerifyOptions{
			DNSName:     h,
			Roots:       roots,
			CurrentTime: now,
			KeyUsages:   []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		}); err != nil {
			return false
		}
	}
	return true
}

func issueServing(o options, ca *x509.Certificate, caKey crypto.Signer, now time.Time) error {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return fmt.Errorf("generate serving key: %w", err)
	}
	tmpl := &x509.Certificate{
		Subject:     pkix.Name{CommonName: o.hosts[0]},
		NotBefore:   now.Add(-time.Hour),
		NotAfter:    now.Add(time.Duration(o.days) * 24 * time.Hour),
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	for _, h := range o.hosts {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	cert, err := sign(tmpl, ca, key.Public(), caKey)
	if err != nil {
		return fmt.Errorf("sign serving certificate: %w", err)
	}
	return writePair(filepath.Join(o.dir, tlsCertFile), filepath.Join(o.dir, tlsKeyFile), cert, key)
}

func sign(tmpl, parent *x509.Certificate, pub crypto.PublicKey, signer crypto.Signer) (*x509.Certificate, error) {
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 128))
	if err != nil {
		return nil, fmt.Errorf("generate serial number: %w", err)
	}
	tmpl.SerialNumber = serial
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, pub, signer)
	if err != nil {
		return nil, err
	}
	return x509.ParseCertificate(der)
}

// readPair loads a PEM certificate and its PKCS#8 key and checks that they
// belong together.
func readPair(certPath, keyPath string) (*x509.Certificate, crypto.Signer, error) {
	certPEM, err := os.ReadFile(certPath)
	if err != nil {
		return nil, nil, err
	}
	keyPEM, err := os.ReadFile(keyPath)
	if err != nil {
		return nil, nil, err
	}
	certBlock, _ := pem.Decode(certPEM)
	keyBlock, _ := pem.Decode(keyPEM)
	if certBlock == nil || keyBlock == nil {
		return nil, nil, fmt.Errorf("%s or %s is not PEM", certPath, keyPath)
	}
	cert, err := x509.ParseCertificate(certBlock.Bytes)
	if err != nil {
		return nil, nil, fmt.Errorf("parse %s: %w", certPath, err)
	}
	parsed, err := x509.ParsePKCS8PrivateKey(keyBlock.Bytes)
	if err != nil {
		return nil, nil, fmt.Errorf("parse %s: %w", keyPath, err)
	}
	key, ok := parsed.(crypto.Signer)
	if !ok {
		return nil, nil, fmt.Errorf("%s holds a %T, not a signing key", keyPath, parsed)
	}
	pub, ok := cert.PublicKey.(interface{ Equal(crypto.PublicKey) bool })
	if !ok || !pub.Equal(key.Public()) {
		return nil, nil, fmt.Errorf("%s does not hold the key of %s", keyPath, certPath)
	}
	return cert, key, nil
}

// writePair writes the key before the certificate, each through a temporary
// file renamed into place, so that an interrupted run never leaves a
// certificate next to a key that is not its own.
func writePair(certPath, keyPath string, cert *x509.Certificate, key crypto.Signer) error {
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return fmt.Errorf("encode %s: %w", keyPath, err)
	}
	if err := writeFile(keyPath, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), 0o600); err != nil {
		return err
	}
	return writeFile(certPath, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: cert.Raw}), 0o644)
}

func writeFile(path string, data []byte, mode fs.FileMode) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := os.Chmod(tmp.Name(), mode); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}
