//go:build integration

package integration

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	authenticationv1 "k8s.io/api/authentication/v1"
	v1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/spreadguard/spreadguard/cmd/webhook/app"
)

func TestMetricsAreServedOnlyToAuthorizedCallers(t *testing.T) {
	_, metricsPort, _ := runServer(t, "webhook-secure-metrics", func(cfg *app.Config) { cfg.MetricsSecure = true })
	url := fmt.Sprintf("https://127.0.0.1:%d/metrics", metricsPort)
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(suite.caPEM)
	c := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}}
	get := func(token string) (int, string) {
		t.Helper()
		req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, url, nil)
		if err != nil {
			t.Fatal(err)
		}
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := c.Do(req)
		if err != nil {
			t.Fatalf("GET %s over TLS with the serving certificate: %v", url, err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}

	ns := newNamespace(t, "metrics")
	cs, err := kubernetes.NewForConfig(suite.restConfig)
	if err != nil {
		t.Fatal(err)
	}
	// Two ServiceAccounts: the server caches a denial for a while, so the
	// one without RBAC is never the one granted it later.
	tokenOf := func(sa string) string {
		t.Helper()
		create(t, &v1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: sa}})
		tr, err := cs.CoreV1().ServiceAccounts(ns).CreateToken(t.Context(), sa, &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("requesting a token for %s: %v", sa, err)
		}
		return tr.Status.Token
	}
	stranger, token := tokenOf("stranger"), tokenOf("prometheus")

	if code, _ := get(""); code != http.StatusUnauthorized {
		t.Errorf("without a token: %d, want 401", code)
	}
	if code, _ := get(stranger); code != http.StatusForbidden {
		t.Errorf("with a token that may not GET /metrics: %d, want 403", code)
	}

	reader := &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: ns + "-metrics-reader"},
		Rules:      []rbacv1.PolicyRule{{NonResourceURLs: []string{"/metrics"}, Verbs: []string{"get"}}},
	}
	create(t, reader)
	create(t, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: ns + "-metrics-reader"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: reader.Name},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: "prometheus"}},
	})
	eventually(t, "the metrics-reader token gets the metrics", func(context.Context) (bool, error) {
		code, body := get(token)
		return code == http.StatusOK && strings.Contains(body, "controller_runtime_"), nil
	})
}
