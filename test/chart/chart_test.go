package chart_test

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	networkingv1 "k8s.io/api/networking/v1"

	cmapi "github.com/cert-manager/cert-manager/pkg/apis/certmanager/v1"
	cmmeta "github.com/cert-manager/cert-manager/pkg/apis/meta/v1"
	"github.com/google/go-cmp/cmp"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	sigsyaml "sigs.k8s.io/yaml"

	"github.com/spreadguard/spreadguard/cmd/webhook/app"
	"github.com/spreadguard/spreadguard/pkg/apis/spreadguard/v1alpha1"
	"github.com/spreadguard/spreadguard/pkg/cache"
	"github.com/spreadguard/spreadguard/pkg/policy"
)

func TestRenderedObjects(t *testing.T) {
	t.Parallel()
	common := []string{
		"ClusterRole/" + fullname,
		"ClusterRoleBinding/" + fullname,
		"ClusterSpreadPolicy/" + fullname + "-default",
		"ConfigMap/" + releaseNamespace + "/" + fullname + "-config",
		"MutatingWebhookConfiguration/" + fullname,
		"ServiceAccount/" + releaseNamespace + "/" + fullname,
		"ValidatingWebhookConfiguration/" + fullname,
		"ValidatingWebhookConfiguration/" + fullname + "-workloads",
		"ClusterRole/" + fullname + "-metrics-auth",
		"ClusterRole/" + fullname + "-metrics-reader",
		"ClusterRoleBinding/" + fullname + "-metrics-auth",
		"Role/" + releaseNamespace + "/" + fullname + "-audit",
		"RoleBinding/" + releaseNamespace + "/" + fullname + "-audit",
		"Role/kube-system/" + fullname + "-cluster-autoscaler-status",
		"RoleBinding/kube-system/" + fullname + "-cluster-autoscaler-status",
		"CustomResourceDefinition/clusterspreadpolicies.spreadguard.io",
		"CustomResourceDefinition/nodetemplates.spreadguard.io",
		"CustomResourceDefinition/spreadpolicies.spreadguard.io",
	}
	server := []string{
		"Deployment/" + releaseNamespace + "/" + fullname,
		"PodDisruptionBudget/" + releaseNamespace + "/" + fullname,
		"Service/" + releaseNamespace + "/" + fullname,
		"Service/" + releaseNamespace + "/" + fullname + "-metrics",
	}
	generatedCert := []string{"Secret/" + releaseNamespace + "/" + fullname + "-tls"}
	want := map[string][]string{
		"default-values.yaml": concat(common, server, generatedCert),
		"self-signed-values.yaml": concat(common, server, generatedCert,
			[]string{"NetworkPolicy/" + releaseNamespace + "/" + fullname}),
		"cert-manager-values.yaml": concat(common, server,
			[]string{
				"Certificate/" + releaseNamespace + "/" + fullname + "-ca",
				"Certificate/" + releaseNamespace + "/" + fullname + "-serving",
				"Issuer/" + releaseNamespace + "/" + fullname + "-ca",
				"Issuer/" + releaseNamespace + "/" + fullname + "-selfsigned",
				"ServiceMonitor/" + releaseNamespace + "/" + fullname,
				"ServiceAccount/" + releaseNamespace + "/" + fullname + "-metrics-scraper",
				"Secret/" + releaseNamespace + "/" + fullname + "-metrics-scraper-token",
				"ClusterRoleBinding/" + fullname + "-metrics-scraper",
				"PrometheusRule/" + releaseNamespace + "/" + fullname,
				"ConfigMap/" + releaseNamespace + "/" + fullname + "-dashboard",
			}),
		"namespace-defaults-values.yaml": concat(common, server, generatedCert,
			[]string{
				"SpreadPolicy/batch/" + fullname + "-default",
				"SpreadPolicy/payments/" + fullname + "-default",
			}),
		// No server, Services, PodDisruptionBudget nor certificate: the
		// server runs elsewhere. The ConfigMap stays for it.
		"external-url-values.yaml": common,
	}
	for _, f := range ciFiles {
		t.Run(f.name, func(t *testing.T) {
			got := ids(render(t, ciValues(t, f.file)).objects)
			w := slices.Clone(want[f.file])
			slices.Sort(w)
			if diff := cmp.Diff(w, got); diff != "" {
				t.Errorf("rendered objects (-want +got):\n%s", diff)
			}
		})
	}
}

func concat(lists ...[]string) []string {
	var out []string
	for _, l := range lists {
		out = append(out, l...)
	}
	return out
}

// podWebhooks returns the namespaceSelector of the pod webhook of each
// configuration, keyed by webhook name.
func podWebhookSelectors(t *testing.T, r release) map[string]*metav1.LabelSelector {
	t.Helper()
	m := find[*mutatingConfig](t, r.objects, fullname)
	v := find[*validatingConfig](t, r.objects, fullname)
	out := map[string]*metav1.LabelSelector{}
	for _, w := range m.Webhooks {
		out[w.Name] = w.NamespaceSelector
	}
	for _, w := range v.Webhooks {
		if slices.Contains(w.Rules[0].Resources, "pods") {
			out[w.Name] = w.NamespaceSelector
		}
	}
	return out
}

func TestNamespaceSelectorsLeaveOutTheSystemTheReleaseAndIgnoredNamespaces(t *testing.T) {
	t.Parallel()
	exclusions := func(names ...string) []metav1.LabelSelectorRequirement {
		return []metav1.LabelSelectorRequirement{
			{Key: "kubernetes.io/metadata.name", Operator: metav1.LabelSelectorOpNotIn, Values: names},
			{Key: "spreadguard.io/ignore", Operator: metav1.LabelSelectorOpNotIn, Values: []string{"true"}},
		}
	}
	defaultSelector := &metav1.LabelSelector{MatchExpressions: exclusions("kube-system", releaseNamespace)}
	// Namespaces as the API server labels them, and whether each one's pods
	// reach the webhooks.
	namespaces := []struct {
		name   string
		labels map[string]string
	}{
		{"kube-system", nil},
		{releaseNamespace, nil},
		{"team-ignored", map[string]string{"spreadguard.io/ignore": "true", "environment": "production"}},
		{"monitoring", map[string]string{"environment": "production"}},
		{"team-prod", map[string]string{"environment": "production"}},
		{"team-dev", map[string]string{"environment": "development"}},
		{"cert-manager", map[string]string{"environment": "production"}},
		{"security", nil},
	}
	tests := []struct {
		file         string
		vals         map[string]any
		wantSelector *metav1.LabelSelector
		wantSent     []string
	}{
		{file: "default-values.yaml", wantSelector: defaultSelector, wantSent: []string{"monitoring", "team-prod", "team-dev", "cert-manager", "security"}},
		{
			// cert-manager issues the webhook's certificate: its pods must
			// never wait on the webhook.
			file:         "cert-manager-values.yaml",
			wantSelector: &metav1.LabelSelector{MatchExpressions: exclusions("kube-system", releaseNamespace, "cert-manager")},
			wantSent:     []string{"monitoring", "team-prod", "team-dev", "security"},
		},
		{
			file:         "cert-manager in namespace security",
			vals:         valuesYAML(t, "certManager: {enabled: true, namespace: security}"),
			wantSelector: &metav1.LabelSelector{MatchExpressions: exclusions("kube-system", releaseNamespace, "security")},
			wantSent:     []string{"monitoring", "team-prod", "team-dev", "cert-manager"},
		},
		{file: "namespace-defaults-values.yaml", wantSelector: defaultSelector, wantSent: []string{"monitoring", "team-prod", "team-dev", "cert-manager", "security"}},
		{file: "external-url-values.yaml", wantSelector: defaultSelector, wantSent: []string{"monitoring", "team-prod", "team-dev", "cert-manager", "security"}},
		{
			// More exclusions and an extra condition narrow the selector;
			// the fixed exclusions stay first.
			file: "self-signed-values.yaml",
			wantSelector: &metav1.LabelSelector{MatchExpressions: append(
				exclusions("kube-system", releaseNamespace, "monitoring", "cert-manager"),
				metav1.LabelSelectorRequirement{Key: "environment", Operator: metav1.LabelSelectorOpIn, Values: []string{"production", "staging"}},
			)},
			wantSent: []string{"team-prod"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.file, func(t *testing.T) {
			vals := tc.vals
			if vals == nil {
				vals = ciValues(t, tc.file)
			}
			selectors := podWebhookSelectors(t, render(t, vals))
			if diff := cmp.Diff([]string{"gated-pods.validate.spreadguard.io", "pods.mutate.spreadguard.io", "pods.validate.spreadguard.io"}, sortedKeys(selectors)); diff != "" {
				t.Fatalf("pod webhooks (-want +got):\n%s", diff)
			}
			for name, sel := range selectors {
				if diff := cmp.Diff(tc.wantSelector, sel); diff != "" {
					t.Errorf("%s namespaceSelector (-want +got):\n%s", name, diff)
				}
				s, err := metav1.LabelSelectorAsSelector(sel)
				if err != nil {
					t.Fatalf("%s namespaceSelector: %v", name, err)
				}
				var sent []string
				for _, ns := range namespaces {
					l := labels.Set{"kubernetes.io/metadata.name": ns.name}
					for k, v := range ns.labels {
						l[k] = v
					}
					if s.Matches(l) {
						sent = append(sent, ns.name)
					}
				}
				if diff := cmp.Diff(tc.wantSent, sent); diff != "" {
					t.Errorf("%s: namespaces whose pods reach the webhook (-want +got):\n%s", name, diff)
				}
			}
			// The server serves the same namespaces (policy.Scope, which
			// the keeper and spread health ask too), from its config file.
			scope := serverScope(t, render(t, vals))
			var served []string
			for _, ns := range namespaces {
				l := map[string]string{"kubernetes.io/metadata.name": ns.name}
				maps.Copy(l, ns.labels)
				if scope.Serves(ns.name, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns.name, Labels: l}}) {
					served = append(served, ns.name)
				}
			}
			if diff := cmp.Diff(tc.wantSent, served); diff != "" {
				t.Errorf("namespaces the server's configuration serves (-want +got):\n%s", diff)
			}
		})
	}
}

// serverScope is the namespaces the server serves, from the excluded
// namespaces and the namespaceSelector of its config file.
func serverScope(t *testing.T, r release) policy.Scope {
	t.Helper()
	cfg := serverConfig(t, r)
	var scope policy.Scope
	for _, ns := range cfg["excludedNamespaces"].([]any) {
		scope.Excluded = append(scope.Excluded, ns.(string))
	}
	if s, ok := cfg["namespaceSelector"].(string); ok {
		sel, err := labels.Parse(s)
		if err != nil {
			t.Fatalf("config.yaml namespaceSelector %q: %v", s, err)
		}
		scope.Selector = sel
	}
	return scope
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// hook is what matters of one webhook for these tests.
type hook struct {
	Name           string
	Target         string // service namespace/name:port/path, or the URL
	Rules          []admissionregistrationv1.RuleWithOperations
	FailurePolicy  admissionregistrationv1.FailurePolicyType
	SideEffects    admissionregistrationv1.SideEffectClass
	MatchPolicy    admissionregistrationv1.MatchPolicyType
	Reinvocation   admissionregistrationv1.ReinvocationPolicyType
	TimeoutSeconds int32
	ReviewVersions []string
	HasNSSelector  bool
	// MatchConditions names the webhook's match conditions.
	MatchConditions []string
}

func target(c admissionregistrationv1.WebhookClientConfig) string {
	if c.URL != nil {
		return *c.URL
	}
	s := c.Service
	return s.Namespace + "/" + s.Name + ":" + strconv.Itoa(int(ptr.Deref(s.Port, 443))) + ptr.Deref(s.Path, "")
}

func hooks(t *testing.T, r release) []hook {
	t.Helper()
	var out []hook
	for _, w := range find[*mutatingConfig](t, r.objects, fullname).Webhooks {
		out = append(out, hook{
			Name: w.Name, Target: target(w.ClientConfig), Rules: w.Rules,
			FailurePolicy: ptr.Deref(w.FailurePolicy, ""), SideEffects: ptr.Deref(w.SideEffects, ""),
			MatchPolicy: ptr.Deref(w.MatchPolicy, ""), Reinvocation: ptr.Deref(w.ReinvocationPolicy, ""),
			TimeoutSeconds: ptr.Deref(w.TimeoutSeconds, 0), ReviewVersions: w.AdmissionReviewVersions,
			HasNSSelector: w.NamespaceSelector != nil,
		})
	}
	for _, w := range find[*validatingConfig](t, r.objects, fullname).Webhooks {
		h := hook{
			Name: w.Name, Target: target(w.ClientConfig), Rules: w.Rules,
			FailurePolicy: ptr.Deref(w.FailurePolicy, ""), SideEffects: ptr.Deref(w.SideEffects, ""),
			MatchPolicy:    ptr.Deref(w.MatchPolicy, ""),
			TimeoutSeconds: ptr.Deref(w.TimeoutSeconds, 0), ReviewVersions: w.AdmissionReviewVersions,
			HasNSSelector: w.NamespaceSelector != nil,
		}
		for _, c := range w.MatchConditions {
			h.MatchConditions = append(h.MatchConditions, c.Name)
		}
		out = append(out, h)
	}
	return out
}

func TestWebhookConfigurations(t *testing.T) {
	t.Parallel()
	rule := func(group, version, resource string, scope admissionregistrationv1.ScopeType, ops ...admissionregistrationv1.OperationType) []admissionregistrationv1.RuleWithOperations {
		return []admissionregistrationv1.RuleWithOperations{{
			Operations: ops,
			Rule: admissionregistrationv1.Rule{
				APIGroups: []string{group}, APIVersions: []string{version}, Resources: []string{resource}, Scope: ptr.To(scope),
			},
		}}
	}
	svc := releaseNamespace + "/" + fullname + ":443"
	// want lists the four webhooks; pods and policies have failure
	// policies of their own.
	want := func(base string, failure, policyFailure admissionregistrationv1.FailurePolicyType, timeout int32) []hook {
		common := hook{
			FailurePolicy: failure, SideEffects: admissionregistrationv1.SideEffectClassNone,
			MatchPolicy: admissionregistrationv1.Equivalent, TimeoutSeconds: timeout, ReviewVersions: []string{"v1"},
		}
		with := func(h hook, f func(*hook)) hook { f(&h); return h }
		create, update := admissionregistrationv1.Create, admissionregistrationv1.Update
		return []hook{
			with(common, func(h *hook) {
				h.Name, h.Target = "pods.mutate.spreadguard.io", base+"/mutate-v1-pod"
				h.Rules = rule("", "v1", "pods", admissionregistrationv1.NamespacedScope, create)
				h.Reinvocation, h.HasNSSelector = admissionregistrationv1.IfNeededReinvocationPolicy, true
			}),
			with(common, func(h *hook) {
				h.Name, h.Target = "pods.validate.spreadguard.io", base+"/validate-v1-pod"
				h.Rules = rule("", "v1", "pods", admissionregistrationv1.NamespacedScope, create)
				h.HasNSSelector = true
				// It records events on a refused pod's owners, none on
				// a dry run.
				h.SideEffects = admissionregistrationv1.SideEffectClassNoneOnDryRun
			}),
			with(common, func(h *hook) {
				// The UPDATE removing a pod's last scheduling gate is
				// never refused, so it never waits on an outage either,
				// whatever the pod CREATE's failurePolicy.
				h.Name, h.Target = "gated-pods.validate.spreadguard.io", base+"/validate-v1-pod"
				h.Rules = rule("", "v1", "pods", admissionregistrationv1.NamespacedScope, update)
				h.HasNSSelector = true
				h.MatchConditions = []string{"last-scheduling-gate-removed"}
				h.FailurePolicy = admissionregistrationv1.Ignore
				h.SideEffects = admissionregistrationv1.SideEffectClassNoneOnDryRun
			}),
			with(common, func(h *hook) {
				h.Name, h.Target = "spreadpolicies.validate.spreadguard.io", base+"/validate-spreadguard-io-v1alpha1-spreadpolicy"
				h.Rules = rule("spreadguard.io", "v1alpha1", "spreadpolicies", admissionregistrationv1.NamespacedScope, create, update)
				h.FailurePolicy = policyFailure
			}),
			with(common, func(h *hook) {
				h.Name, h.Target = "clusterspreadpolicies.validate.spreadguard.io", base+"/validate-spreadguard-io-v1alpha1-clusterspreadpolicy"
				h.Rules = rule("spreadguard.io", "v1alpha1", "clusterspreadpolicies", admissionregistrationv1.ClusterScope, create, update)
				h.FailurePolicy = policyFailure
			}),
		}
	}
	ignore, fail := admissionregistrationv1.Ignore, admissionregistrationv1.Fail
	tests := []struct {
		name string
		vals map[string]any
		want []hook
	}{
		{name: "defaults -> Ignore, 3s, the Service", vals: ciValues(t, "default-values.yaml"), want: want(svc, ignore, ignore, 3)},
		{name: "cert-manager mode -> Ignore, 3s, the Service", vals: ciValues(t, "cert-manager-values.yaml"), want: want(svc, ignore, ignore, 3)},
		{name: "strict settings -> Fail on pods, 5s; policies still Ignore", vals: ciValues(t, "self-signed-values.yaml"), want: want(svc, fail, ignore, 5)},
		{name: "external URL -> url + path on every webhook", vals: ciValues(t, "external-url-values.yaml"), want: want("https://127.0.0.1:9443", ignore, ignore, 3)},
		{
			name: "policy failurePolicy Fail when the chart renders no policy -> Fail on the policy webhooks",
			vals: valuesYAML(t, "{webhook: {policyFailurePolicy: Fail}, policy: {clusterDefault: {enabled: false}}}"),
			want: want(svc, ignore, fail, 3),
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, hooks(t, render(t, tc.vals))); diff != "" {
				t.Errorf("webhooks (-want +got):\n%s", diff)
			}
		})
	}

	t.Run("external URL with a trailing slash -> no double slash", func(t *testing.T) {
		r := render(t, valuesYAML(t, "webhook: {url: 'https://dev.example:8443/'}"))
		got := hooks(t, r)[0].Target
		if got != "https://dev.example:8443/mutate-v1-pod" {
			t.Errorf("mutate target = %q, want https://dev.example:8443/mutate-v1-pod", got)
		}
	})
}

func caBundles(t *testing.T, r release) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	for _, w := range find[*mutatingConfig](t, r.objects, fullname).Webhooks {
		out["mutating "+w.Name] = w.ClientConfig.CABundle
	}
	for _, w := range find[*validatingConfig](t, r.objects, fullname).Webhooks {
		out["validating "+w.Name] = w.ClientConfig.CABundle
	}
	return out
}

func injectAnnotations(t *testing.T, r release) map[string]string {
	t.Helper()
	return map[string]string{
		"mutating":   find[*mutatingConfig](t, r.objects, fullname).Annotations["cert-manager.io/inject-ca-from"],
		"validating": find[*validatingConfig](t, r.objects, fullname).Annotations["cert-manager.io/inject-ca-from"],
	}
}

func everyWebhook(b []byte) map[string][]byte {
	return map[string][]byte{
		"mutating pods.mutate.spreadguard.io":                      b,
		"validating pods.validate.spreadguard.io":                  b,
		"validating gated-pods.validate.spreadguard.io":            b,
		"validating spreadpolicies.validate.spreadguard.io":        b,
		"validating clusterspreadpolicies.validate.spreadguard.io": b,
	}
}

func TestCertificateModes(t *testing.T) {
	t.Parallel()
	for _, f := range ciFiles {
		t.Run(f.name, func(t *testing.T) {
			vals := ciValues(t, f.file)
			r := render(t, vals)
			switch f.mode {
			case certManager:
				want := releaseNamespace + "/" + fullname + "-serving"
				if diff := cmp.Diff(map[string]string{"mutating": want, "validating": want}, injectAnnotations(t, r)); diff != "" {
					t.Errorf("cert-manager.io/inject-ca-from (-want +got):\n%s", diff)
				}
				if diff := cmp.Diff(everyWebhook(nil), caBundles(t, r)); diff != "" {
					t.Errorf("caBundles, which cainjector fills (-want +got):\n%s", diff)
				}
				checkCertManagerChain(t, r)
			case selfSigned:
				if diff := cmp.Diff(map[string]string{"mutating": "", "validating": ""}, injectAnnotations(t, r)); diff != "" {
					t.Errorf("cert-manager.io/inject-ca-from outside cert-manager mode (-want +got):\n%s", diff)
				}
				s := find[*secret](t, r.objects, fullname+"-tls")
				if diff := cmp.Diff(everyWebhook(s.Data["ca.crt"]), caBundles(t, r)); diff != "" {
					t.Errorf("caBundles, which must be the generated CA (-want +got):\n%s", diff)
				}
				days := 3650
				if f.file == "self-signed-values.yaml" {
					days = 730
				}
				checkGeneratedSecret(t, s, days)
				if got := mountedSecret(t, r); got != s.Name {
					t.Errorf("the Deployment mounts Secret %q, want the generated %q", got, s.Name)
				}
			case externalURL:
				if diff := cmp.Diff(map[string]string{"mutating": "", "validating": ""}, injectAnnotations(t, r)); diff != "" {
					t.Errorf("cert-manager.io/inject-ca-from in URL mode (-want +got):\n%s", diff)
				}
				want, err := base64.StdEncoding.DecodeString(vals["webhook"].(map[string]any)["caBundle"].(string))
				if err != nil {
					t.Fatal(err)
				}
				if diff := cmp.Diff(everyWebhook(want), caBundles(t, r)); diff != "" {
					t.Errorf("caBundles, which must be webhook.caBundle (-want +got):\n%s", diff)
				}
			}
		})
	}
}

func mountedSecret(t *testing.T, r release) string {
	t.Helper()
	for _, v := range find[*deployment](t, r.objects, fullname).Spec.Template.Spec.Volumes {
		if v.Name == "certs" && v.Secret != nil {
			return v.Secret.SecretName
		}
	}
	t.Fatalf("the Deployment has no certs volume")
	return ""
}

// checkGeneratedSecret checks that the Secret holds a CA and a serving
// certificate it signed, for every name of the Service, valid for days.
func checkGeneratedSecret(t *testing.T, s *secret, days int) {
	t.Helper()
	if s.Type != corev1.SecretTypeTLS {
		t.Errorf("Secret type = %q, want %q", s.Type, corev1.SecretTypeTLS)
	}
	if _, err := tls.X509KeyPair(s.Data["tls.crt"], s.Data["tls.key"]); err != nil {
		t.Errorf("tls.crt and tls.key do not belong together: %v", err)
	}
	ca := parsePEMCert(t, s.Data["ca.crt"])
	serving := parsePEMCert(t, s.Data["tls.crt"])
	if !ca.IsCA {
		t.Errorf("ca.crt is not a CA")
	}
	roots := x509.NewCertPool()
	roots.AddCert(ca)
	for _, name := range []string{fullname, fullname + "." + releaseNamespace, fullname + "." + releaseNamespace + ".svc"} {
		if _, err := serving.Verify(x509.VerifyOptions{DNSName: name, Roots: roots}); err != nil {
			t.Errorf("tls.crt does not verify for %s against ca.crt: %v", name, err)
		}
	}
	if got, want := serving.NotAfter.Sub(serving.NotBefore), time.Duration(days)*24*time.Hour; got < want-24*time.Hour || got > want+24*time.Hour {
		t.Errorf("serving certificate valid for %v, want about %d days", got, days)
	}
}

func parsePEMCert(t *testing.T, data []byte) *x509.Certificate {
	t.Helper()
	block, _ := pem.Decode(data)
	if block == nil {
		t.Fatalf("not PEM: %q", data)
	}
	c, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// checkCertManagerChain follows the chain self-signed Issuer -> CA
// Certificate -> CA Issuer -> serving Certificate -> the Secret the
// Deployment mounts.
func checkCertManagerChain(t *testing.T, r release) {
	t.Helper()
	selfSignedIssuer := find[*cmapi.Issuer](t, r.objects, fullname+"-selfsigned")
	if selfSignedIssuer.Spec.SelfSigned == nil {
		t.Errorf("Issuer %s is not self-signed", selfSignedIssuer.Name)
	}
	caCert := find[*cmapi.Certificate](t, r.objects, fullname+"-ca")
	wantCA := cmapi.CertificateSpec{
		IsCA:       true,
		CommonName: fullname + "-ca",
		SecretName: fullname + "-ca",
		Duration:   &metav1.Duration{Duration: 87600 * time.Hour},
		PrivateKey: &cmapi.CertificatePrivateKey{Algorithm: cmapi.ECDSAKeyAlgorithm, Size: 256},
		IssuerRef:  cmmeta.IssuerReference{Group: "cert-manager.io", Kind: "Issuer", Name: selfSignedIssuer.Name},
	}
	if diff := cmp.Diff(wantCA, caCert.Spec); diff != "" {
		t.Errorf("CA Certificate (-want +got):\n%s", diff)
	}
	caIssuer := find[*cmapi.Issuer](t, r.objects, fullname+"-ca")
	if caIssuer.Spec.CA == nil || caIssuer.Spec.CA.SecretName != caCert.Spec.SecretName {
		t.Errorf("CA Issuer %s does not sign with the CA Certificate's Secret %q: %+v", caIssuer.Name, caCert.Spec.SecretName, caIssuer.Spec.IssuerConfig)
	}
	serving := find[*cmapi.Certificate](t, r.objects, fullname+"-serving")
	wantServing := cmapi.CertificateSpec{
		SecretName: fullname + "-serving-cert",
		Duration:   &metav1.Duration{Duration: 2160 * time.Hour},
		DNSNames:   []string{fullname, fullname + "." + releaseNamespace, fullname + "." + releaseNamespace + ".svc"},
		PrivateKey: &cmapi.CertificatePrivateKey{Algorithm: cmapi.ECDSAKeyAlgorithm, Size: 256, RotationPolicy: cmapi.RotationPolicyAlways},
		IssuerRef:  cmmeta.IssuerReference{Group: "cert-manager.io", Kind: "Issuer", Name: caIssuer.Name},
	}
	if diff := cmp.Diff(wantServing, serving.Spec); diff != "" {
		t.Errorf("serving Certificate (-want +got):\n%s", diff)
	}
	if got := mountedSecret(t, r); got != serving.Spec.SecretName {
		t.Errorf("the Deployment mounts Secret %q, want the serving Certificate's %q", got, serving.Spec.SecretName)
	}
}

// TestRBACReadsExactlyWhatTheServerReadsAndWritesOnlyEvents holds the
// ClusterRole to the server's table of kinds: get, list and watch on each
// kind it reads and nothing more, plus the Events it records, what the
// audit writes (the policies' status, Reports) and what the deletion cost
// keeper writes (pods, by a patch), and their Leases in the release
// namespace.
func TestRBACReadsExactlyWhatTheServerReadsAndWritesOnlyEvents(t *testing.T) {
	t.Parallel()
	events := rbacv1.PolicyRule{APIGroups: []string{"events.k8s.io"}, Resources: []string{"events"}, Verbs: []string{"create", "patch"}}
	audit := []rbacv1.PolicyRule{
		{APIGroups: []string{"spreadguard.io"}, Resources: []string{"spreadpolicies/status", "clusterspreadpolicies/status"}, Verbs: []string{"patch"}},
		{APIGroups: []string{"openreports.io"}, Resources: []string{"reports"}, Verbs: []string{"get", "list", "watch", "create", "update", "delete"}},
	}
	keeper := rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"patch"}}
	wantLease := []rbacv1.PolicyRule{{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, Verbs: []string{"get", "create", "update"}}}
	t.Run("deletionCost.enabled false -> no patch on pods", func(t *testing.T) {
		want := append(append(cache.ReadRules(nil), events), audit...)
		r := render(t, valuesYAML(t, "deletionCost: {enabled: false}"))
		if diff := cmp.Diff(want, find[*clusterRole](t, r.objects, fullname).Rules); diff != "" {
			t.Errorf("ClusterRole rules (-want +got):\n%s", diff)
		}
	})
	t.Run("health.enabled false, deletionCost.enabled true -> the pods' patch and the Lease, none of spread health's writes", func(t *testing.T) {
		want := append(cache.ReadRules(nil), events, keeper)
		r := render(t, valuesYAML(t, "health: {enabled: false}"))
		if diff := cmp.Diff(want, find[*clusterRole](t, r.objects, fullname).Rules); diff != "" {
			t.Errorf("ClusterRole rules (-want +got):\n%s", diff)
		}
		if diff := cmp.Diff(wantLease, find[*rbacv1.Role](t, r.objects, fullname+"-audit").Rules); diff != "" {
			t.Errorf("the Lease Role (-want +got):\n%s", diff)
		}
	})
	t.Run("health and deletionCost off -> no Lease Role", func(t *testing.T) {
		r := render(t, valuesYAML(t, "health: {enabled: false}\ndeletionCost: {enabled: false}"))
		// Only cluster-autoscaler's status Role stays, in its own namespace.
		for _, role := range all[*rbacv1.Role](r.objects) {
			if role.Namespace == releaseNamespace {
				t.Errorf("Role %s/%s rendered with neither the audit nor the keeper on", role.Namespace, role.Name)
			}
		}
		for _, b := range all[*rbacv1.RoleBinding](r.objects) {
			if b.Namespace == releaseNamespace {
				t.Errorf("RoleBinding %s/%s rendered with neither the audit nor the keeper on", b.Namespace, b.Name)
			}
		}
	})
	t.Run("autoscaler.karpenter false -> no NodePools", func(t *testing.T) {
		want := append(append(append(cache.ReadRules(func(k cache.InformedKind) bool { return k.GVK.Group != "karpenter.sh" }), events), audit...), keeper)
		r := render(t, valuesYAML(t, "autoscaler: {karpenter: false}"))
		if diff := cmp.Diff(want, find[*clusterRole](t, r.objects, fullname).Rules); diff != "" {
			t.Errorf("ClusterRole rules (-want +got):\n%s", diff)
		}
	})
	want := append(append(append(cache.ReadRules(nil), events), audit...), keeper)
	configMaps, _ := cache.KindFor(corev1.SchemeGroupVersion.WithKind("ConfigMap"))
	wantStatus := []rbacv1.PolicyRule{cache.NamedReadRule(configMaps, types.NamespacedName{Namespace: "kube-system", Name: "cluster-autoscaler-status"})}
	t.Run("autoscaler.clusterAutoscalerStatus elsewhere -> the Role there, on that name", func(t *testing.T) {
		r := render(t, valuesYAML(t, "autoscaler: {clusterAutoscalerStatus: autoscaling/ca-status}"))
		status := find[*rbacv1.Role](t, r.objects, fullname+"-cluster-autoscaler-status")
		want := []rbacv1.PolicyRule{cache.NamedReadRule(configMaps, types.NamespacedName{Namespace: "autoscaling", Name: "ca-status"})}
		if diff := cmp.Diff(want, status.Rules); diff != "" || status.Namespace != "autoscaling" {
			t.Errorf("cluster-autoscaler's status Role in %q (-want +got):\n%s", status.Namespace, diff)
		}
		if got := find[*rbacv1.RoleBinding](t, r.objects, fullname+"-cluster-autoscaler-status").Namespace; got != "autoscaling" {
			t.Errorf("its RoleBinding is in %q, want autoscaling", got)
		}
	})
	t.Run("autoscaler.clusterAutoscalerStatus empty -> no Role outside the release namespace", func(t *testing.T) {
		r := render(t, valuesYAML(t, "autoscaler: {clusterAutoscalerStatus: \"\"}"))
		for _, role := range all[*rbacv1.Role](r.objects) {
			if role.Namespace != releaseNamespace {
				t.Errorf("Role %s/%s rendered with no status to read", role.Namespace, role.Name)
			}
		}
		if got := serverConfig(t, r)["clusterAutoscalerStatus"]; got != "" {
			t.Errorf("config.yaml clusterAutoscalerStatus = %q, want empty: not read", got)
		}
	})
	for _, f := range ciFiles {
		t.Run(f.name, func(t *testing.T) {
			r := render(t, ciValues(t, f.file))
			if diff := cmp.Diff(want, find[*clusterRole](t, r.objects, fullname).Rules); diff != "" {
				t.Errorf("ClusterRole rules (-want +got):\n%s", diff)
			}
			if n := len(all[*rbacv1.Role](r.objects)) + len(all[*rbacv1.RoleBinding](r.objects)); n != 4 {
				t.Errorf("%d namespaced Roles or RoleBindings rendered, want the audit's Lease Role, cluster-autoscaler's status Role and their bindings", n)
			}
			if diff := cmp.Diff(wantLease, find[*rbacv1.Role](t, r.objects, fullname+"-audit").Rules); diff != "" {
				t.Errorf("the audit's Role (-want +got):\n%s", diff)
			}
			status := find[*rbacv1.Role](t, r.objects, fullname+"-cluster-autoscaler-status")
			if diff := cmp.Diff(wantStatus, status.Rules); diff != "" {
				t.Errorf("cluster-autoscaler's status Role (-want +got):\n%s", diff)
			}
			if status.Namespace != "kube-system" {
				t.Errorf("cluster-autoscaler's status Role is in namespace %q, want kube-system", status.Namespace)
			}
			statusBinding := find[*rbacv1.RoleBinding](t, r.objects, fullname+"-cluster-autoscaler-status")
			wantStatusRef := rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: status.Name}
			wantStatusSubjects := []rbacv1.Subject{{Kind: "ServiceAccount", Name: fullname, Namespace: releaseNamespace}}
			if statusBinding.Namespace != status.Namespace || !cmp.Equal(wantStatusRef, statusBinding.RoleRef) || !cmp.Equal(wantStatusSubjects, statusBinding.Subjects) {
				t.Errorf("cluster-autoscaler's status RoleBinding in %q binds %+v to %+v, want %q, %+v, %+v",
					statusBinding.Namespace, statusBinding.RoleRef, statusBinding.Subjects, status.Namespace, wantStatusRef, wantStatusSubjects)
			}
			b := find[*rbacv1.ClusterRoleBinding](t, r.objects, fullname)
			wantRef := rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: fullname}
			wantSubjects := []rbacv1.Subject{{Kind: "ServiceAccount", Name: fullname, Namespace: releaseNamespace}}
			if diff := cmp.Diff(wantRef, b.RoleRef); diff != "" {
				t.Errorf("roleRef (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(wantSubjects, b.Subjects); diff != "" {
				t.Errorf("subjects (-want +got):\n%s", diff)
			}
			if f.mode != externalURL {
				if got := find[*deployment](t, r.objects, fullname).Spec.Template.Spec.ServiceAccountName; got != fullname {
					t.Errorf("the Deployment runs as ServiceAccount %q, want %q", got, fullname)
				}
			}
		})
	}
}

func TestNetworkPolicyAdmitsOnlyTheAPIServerAndTheScrapers(t *testing.T) {
	t.Parallel()
	np := find[*networkingv1.NetworkPolicy](t, render(t, ciValues(t, "self-signed-values.yaml")).objects, fullname)
	tcp := corev1.ProtocolTCP
	port := func(name string) []networkingv1.NetworkPolicyPort {
		return []networkingv1.NetworkPolicyPort{{Port: ptr.To(intstr.FromString(name)), Protocol: &tcp}}
	}
	want := networkingv1.NetworkPolicySpec{
		PodSelector: metav1.LabelSelector{MatchLabels: find[*deployment](t, render(t, ciValues(t, "self-signed-values.yaml")).objects, fullname).Spec.Selector.MatchLabels},
		PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress},
		Ingress: []networkingv1.NetworkPolicyIngressRule{
			{Ports: port("webhook"), From: []networkingv1.NetworkPolicyPeer{
				{IPBlock: &networkingv1.IPBlock{CIDR: "10.0.0.0/16"}}, {IPBlock: &networkingv1.IPBlock{CIDR: "fd00::/64"}},
			}},
			{Ports: port("metrics"), From: []networkingv1.NetworkPolicyPeer{
				{NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": "monitoring"}}},
			}},
		},
	}
	if diff := cmp.Diff(want, np.Spec); diff != "" {
		t.Errorf("NetworkPolicy spec (-want +got):\n%s", diff)
	}
}

func TestWebhookPodsRunRestricted(t *testing.T) {
	t.Parallel()
	wantPod := &corev1.PodSecurityContext{
		RunAsNonRoot:   ptr.To(true),
		RunAsUser:      ptr.To[int64](65532),
		RunAsGroup:     ptr.To[int64](65532),
		SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
	}
	wantContainer := &corev1.SecurityContext{
		AllowPrivilegeEscalation: ptr.To(false),
		ReadOnlyRootFilesystem:   ptr.To(true),
		RunAsNonRoot:             ptr.To(true),
		Privileged:               ptr.To(false),
		Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
		SeccompProfile:           &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
	}
	for _, f := range ciFiles {
		if f.mode == externalURL {
			continue
		}
		t.Run(f.name, func(t *testing.T) {
			spec := find[*deployment](t, render(t, ciValues(t, f.file)).objects, fullname).Spec.Template.Spec
			if diff := cmp.Diff(wantPod, spec.SecurityContext); diff != "" {
				t.Errorf("pod securityContext (-want +got):\n%s", diff)
			}
			if len(spec.Containers) != 1 || len(spec.InitContainers) != 0 {
				t.Fatalf("want exactly one container, got %d (and %d init containers)", len(spec.Containers), len(spec.InitContainers))
			}
			if diff := cmp.Diff(wantContainer, spec.Containers[0].SecurityContext); diff != "" {
				t.Errorf("container securityContext (-want +got):\n%s", diff)
			}
			if spec.HostNetwork || spec.HostPID || spec.HostIPC {
				t.Errorf("the pod shares a host namespace")
			}
			for _, v := range spec.Volumes {
				if v.HostPath != nil {
					t.Errorf("volume %s is a hostPath", v.Name)
				}
			}
		})
	}
}

func TestWebhookDeployment(t *testing.T) {
	t.Parallel()
	spread := func(key string) corev1.TopologySpreadConstraint {
		return corev1.TopologySpreadConstraint{
			TopologyKey: key, MaxSkew: 1, WhenUnsatisfiable: corev1.ScheduleAnyway,
			LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{
				"app.kubernetes.io/name": "spreadguard", "app.kubernetes.io/instance": releaseName, "app.kubernetes.io/component": "webhook",
			}},
			MatchLabelKeys: []string{"pod-template-hash"},
		}
	}
	r := render(t, ciValues(t, "default-values.yaml"))
	d := find[*deployment](t, r.objects, fullname)
	spec := d.Spec.Template.Spec
	c := spec.Containers[0]

	t.Run("two replicas spread across zones, then nodes", func(t *testing.T) {
		if got := ptr.Deref(d.Spec.Replicas, 0); got != 2 {
			t.Errorf("replicas = %d, want 2", got)
		}
		want := []corev1.TopologySpreadConstraint{spread("topology.kubernetes.io/zone"), spread("kubernetes.io/hostname")}
		if diff := cmp.Diff(want, spec.TopologySpreadConstraints); diff != "" {
			t.Errorf("topologySpreadConstraints (-want +got):\n%s", diff)
		}
		sel, err := metav1.LabelSelectorAsSelector(d.Spec.Selector)
		if err != nil || !sel.Matches(labels.Set(d.Spec.Template.Labels)) {
			t.Errorf("the selector %v does not select the pod template's labels %v (%v)", d.Spec.Selector, d.Spec.Template.Labels, err)
		}
	})

	t.Run("a PodDisruptionBudget that lets one replica go at a time", func(t *testing.T) {
		p := find[*pdb](t, r.objects, fullname)
		if diff := cmp.Diff(ptr.To(intstr.FromInt32(1)), p.Spec.MaxUnavailable); diff != "" {
			t.Errorf("maxUnavailable (-want +got):\n%s", diff)
		}
		if p.Spec.MinAvailable != nil {
			t.Errorf("minAvailable = %v, want unset", p.Spec.MinAvailable)
		}
		if diff := cmp.Diff(d.Spec.Selector, p.Spec.Selector); diff != "" {
			t.Errorf("PDB selector differs from the Deployment's (-deployment +pdb):\n%s", diff)
		}
	})

	t.Run("probes on the health port, the server's own paths", func(t *testing.T) {
		probe := func(path string, period int32) *corev1.Probe {
			return &corev1.Probe{
				ProbeHandler:  corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: path, Port: intstr.FromString("health")}},
				PeriodSeconds: period, TimeoutSeconds: 2, FailureThreshold: 3,
			}
		}
		if diff := cmp.Diff(probe("/healthz", 10), c.LivenessProbe); diff != "" {
			t.Errorf("livenessProbe (-want +got):\n%s", diff)
		}
		if diff := cmp.Diff(probe("/readyz", 5), c.ReadinessProbe); diff != "" {
			t.Errorf("readinessProbe (-want +got):\n%s", diff)
		}
		wantPorts := []corev1.ContainerPort{
			{Name: "webhook", ContainerPort: 9443, Protocol: corev1.ProtocolTCP},
			{Name: "metrics", ContainerPort: 8080, Protocol: corev1.ProtocolTCP},
			{Name: "health", ContainerPort: 8081, Protocol: corev1.ProtocolTCP},
		}
		if diff := cmp.Diff(wantPorts, c.Ports); diff != "" {
			t.Errorf("ports (-want +got):\n%s", diff)
		}
	})

	t.Run("configuration from the mounted ConfigMap, certificates from the mounted Secret", func(t *testing.T) {
		if diff := cmp.Diff([]string{"--config=/etc/spreadguard/config/config.yaml"}, c.Args); diff != "" {
			t.Errorf("args (-want +got):\n%s", diff)
		}
		wantMounts := []corev1.VolumeMount{
			{Name: "config", MountPath: "/etc/spreadguard/config", ReadOnly: true},
			{Name: "certs", MountPath: "/etc/spreadguard/certs", ReadOnly: true},
			{Name: "tmp", MountPath: "/tmp"},
		}
		if diff := cmp.Diff(wantMounts, c.VolumeMounts); diff != "" {
			t.Errorf("volumeMounts (-want +got):\n%s", diff)
		}
		var cmName string
		for _, v := range spec.Volumes {
			if v.Name == "config" && v.ConfigMap != nil {
				cmName = v.ConfigMap.Name
			}
		}
		find[*configMap](t, r.objects, cmName)
		if cfg := serverConfig(t, r); cfg["certDir"] != "/etc/spreadguard/certs" {
			t.Errorf("config certDir = %v, want the Secret's mount path /etc/spreadguard/certs", cfg["certDir"])
		}
	})

	t.Run("requests and a memory limit, no CPU limit", func(t *testing.T) {
		want := corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("128Mi")},
			Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("512Mi")},
		}
		if diff := cmp.Diff(want, c.Resources); diff != "" {
			t.Errorf("resources (-want +got):\n%s", diff)
		}
	})

	t.Run("the Services point at the named ports", func(t *testing.T) {
		s := find[*service](t, r.objects, fullname)
		wantPorts := []corev1.ServicePort{{Name: "https", Port: 443, TargetPort: intstr.FromString("webhook"), Protocol: corev1.ProtocolTCP}}
		if diff := cmp.Diff(wantPorts, s.Spec.Ports); diff != "" {
			t.Errorf("webhook Service ports (-want +got):\n%s", diff)
		}
		m := find[*service](t, r.objects, fullname+"-metrics")
		wantPorts = []corev1.ServicePort{{Name: "metrics", Port: 8080, TargetPort: intstr.FromString("metrics"), Protocol: corev1.ProtocolTCP}}
		if diff := cmp.Diff(wantPorts, m.Spec.Ports); diff != "" {
			t.Errorf("metrics Service ports (-want +got):\n%s", diff)
		}
		for _, svc := range []*service{s, m} {
			if diff := cmp.Diff(d.Spec.Selector.MatchLabels, svc.Spec.Selector); diff != "" {
				t.Errorf("Service %s selector (-deployment +service):\n%s", svc.Name, diff)
			}
		}
	})

	t.Run("strict settings: three replicas, minAvailable 2, a toleration and a priority class", func(t *testing.T) {
		r := render(t, ciValues(t, "self-signed-values.yaml"))
		d := find[*deployment](t, r.objects, fullname)
		if got := ptr.Deref(d.Spec.Replicas, 0); got != 3 {
			t.Errorf("replicas = %d, want 3", got)
		}
		p := find[*pdb](t, r.objects, fullname)
		if diff := cmp.Diff(ptr.To(intstr.FromInt32(2)), p.Spec.MinAvailable); diff != "" {
			t.Errorf("minAvailable (-want +got):\n%s", diff)
		}
		if p.Spec.MaxUnavailable != nil {
			t.Errorf("maxUnavailable = %v next to minAvailable, want unset", p.Spec.MaxUnavailable)
		}
		if got := d.Spec.Template.Spec.PriorityClassName; got != "system-cluster-critical" {
			t.Errorf("priorityClassName = %q, want system-cluster-critical", got)
		}
		wantTolerations := []corev1.Toleration{{Key: "node-role.kubernetes.io/control-plane", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}}
		if diff := cmp.Diff(wantTolerations, d.Spec.Template.Spec.Tolerations); diff != "" {
			t.Errorf("tolerations (-want +got):\n%s", diff)
		}
	})

	t.Run("a changed configuration rolls the pods", func(t *testing.T) {
		a := find[*deployment](t, r.objects, fullname).Spec.Template.Annotations["checksum/config"]
		other := find[*deployment](t, render(t, valuesYAML(t, "config: {logLevel: debug}")).objects, fullname).Spec.Template.Annotations["checksum/config"]
		if a == "" || a == other {
			t.Errorf("checksum/config = %q with the defaults and %q with logLevel debug, want two different checksums", a, other)
		}
	})
}

// serverConfig parses the config file the ConfigMap holds.
func serverConfig(t *testing.T, r release) map[string]any {
	t.Helper()
	cm := find[*configMap](t, r.objects, fullname+"-config")
	cfg := map[string]any{}
	if err := sigsyaml.UnmarshalStrict([]byte(cm.Data["config.yaml"]), &cfg); err != nil {
		t.Fatalf("config.yaml: %v", err)
	}
	return cfg
}

func TestServerConfigFile(t *testing.T) {
	t.Parallel()
	cfg := func(action string, excluded []any, refuse bool, logLevel string) map[string]any {
		return map[string]any{
			"apiVersion": "config.spreadguard.io/v1alpha1", "kind": "WebhookConfiguration",
			"port": float64(9443), "certDir": "/etc/spreadguard/certs",
			"metricsBindAddress": ":8080", "metricsSecure": true, "healthProbeBindAddress": ":8081",
			"defaultAction": action, "excludedNamespaces": excluded,
			"refuseUntilSynced": refuse, "failurePolicy": "Ignore", "messageDetail": "domains", "logLevel": logLevel,
			"autoscalerKarpenter":     "auto",
			"clusterAutoscalerStatus": "kube-system/cluster-autoscaler-status",
			"health":                  true,
			"shutdownDelay":           "5s",
			"deletionCost":            true,
			"deletionCostQPS":         float64(20),
			"deletionCostBurst":       float64(40),
		}
	}
	// failing sets the failurePolicy the server answers its own faults by.
	failing := func(c map[string]any) map[string]any { c["failurePolicy"] = "Fail"; return c }
	system := []any{"kube-system", releaseNamespace}
	tests := []struct {
		name string
		vals map[string]any
		want map[string]any
	}{
		{name: "defaults -> Deny, info", vals: ciValues(t, "default-values.yaml"), want: cfg("Deny", system, false, "info")},
		{
			name: "strict settings -> Warn, debug, refuse until synced, more exclusions, the webhook's namespaceSelector as a selector",
			vals: ciValues(t, "self-signed-values.yaml"),
			want: func() map[string]any {
				c := failing(cfg("Warn", []any{"kube-system", releaseNamespace, "monitoring", "cert-manager"}, true, "debug"))
				c["namespaceSelector"] = "environment in (production,staging)"
				return c
			}(),
		},
		{
			name: "a client CA ConfigMap -> the server requires the API server's certificate",
			vals: valuesYAML(t, "webhook: {clientCA: {configMapName: apiserver-client-ca}}"),
			want: func() map[string]any {
				c := cfg("Deny", system, false, "info")
				c["clientCAFile"] = "/etc/spreadguard/client-ca/ca.crt"
				return c
			}(),
		},
		{name: "namespace defaults -> Audit", vals: ciValues(t, "namespace-defaults-values.yaml"), want: cfg("Audit", system, false, "info")},
		{name: "external URL -> the same file, for the server outside", vals: ciValues(t, "external-url-values.yaml"), want: cfg("Deny", system, false, "info")},
		{name: "a numeric log level -> a string the server parses", vals: valuesYAML(t, "config: {logLevel: 4}"), want: cfg("Deny", system, false, "4")},
		{
			name: "Karpenter off and EKS node groups -> both passed on",
			vals: valuesYAML(t, "autoscaler: {karpenter: false, nodeGroupLabel: eks.amazonaws.com/nodegroup}"),
			want: func() map[string]any {
				c := cfg("Deny", system, false, "info")
				c["autoscalerKarpenter"] = "false"
				c["nodeGroupLabel"] = "eks.amazonaws.com/nodegroup"
				return c
			}(),
		},
		{
			name: "autoscaler.zones listed -> passed on as autoscalerZones, in order",
			vals: valuesYAML(t, "autoscaler: {zones: [eu-west-1b, eu-west-1a, eu-west-1c]}"),
			want: func() map[string]any {
				c := cfg("Deny", system, false, "info")
				c["autoscalerZones"] = []any{"eu-west-1b", "eu-west-1a", "eu-west-1c"}
				return c
			}(),
		},
		{
			name: "kube-system listed again -> listed once",
			vals: valuesYAML(t, "webhook: {excludedNamespaces: [kube-system, tools]}"),
			want: cfg("Deny", []any{"kube-system", releaseNamespace, "tools"}, false, "info"),
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := render(t, tc.vals)
			if diff := cmp.Diff(tc.want, serverConfig(t, r)); diff != "" {
				t.Errorf("config.yaml (-want +got):\n%s", diff)
			}
			// The server itself must take the file as it is mounted.
			path := filepath.Join(t.TempDir(), "config.yaml")
			if err := os.WriteFile(path, []byte(find[*configMap](t, r.objects, fullname+"-config").Data["config.yaml"]), 0o644); err != nil {
				t.Fatal(err)
			}
			cfg, err := app.ParseConfig([]string{"--config=" + path})
			if err != nil {
				t.Fatalf("spreadguard-webhook refuses the chart's config file: %v", err)
			}
			if errs := cfg.Validate(); len(errs) > 0 {
				t.Errorf("spreadguard-webhook finds the chart's config file invalid: %v", errs.ToAggregate())
			}
			if got, want := string(cfg.DefaultAction), tc.want["defaultAction"]; got != want {
				t.Errorf("the server reads defaultAction %q, want %q", got, want)
			}
			if got, want := cfg.LogLevel, tc.want["logLevel"]; got != want {
				t.Errorf("the server reads logLevel %q, want %q", got, want)
			}
			var wantZones []string
			listed, _ := tc.want["autoscalerZones"].([]any)
			for _, z := range listed {
				wantZones = append(wantZones, z.(string))
			}
			if diff := cmp.Diff(wantZones, cfg.AutoscalerZones); diff != "" {
				t.Errorf("the server reads autoscalerZones (-want +got):\n%s", diff)
			}
		})
	}
}

func TestPolicies(t *testing.T) {
	t.Parallel()
	constraint := func(key string, skew int32, when corev1.UnsatisfiableConstraintAction) v1alpha1.Constraint {
		return v1alpha1.Constraint{TopologyKey: key, MaxSkew: skew, WhenUnsatisfiable: when}
	}
	t.Run("defaults -> a cluster default spreading softly over zones and nodes", func(t *testing.T) {
		r := render(t, ciValues(t, "default-values.yaml"))
		want := v1alpha1.ClusterSpreadPolicySpec{PolicySpec: v1alpha1.PolicySpec{Constraints: []v1alpha1.Constraint{
			constraint("topology.kubernetes.io/zone", 1, corev1.ScheduleAnyway),
			constraint("kubernetes.io/hostname", 1, corev1.ScheduleAnyway),
		}}}
		if diff := cmp.Diff(want, find[*v1alpha1.ClusterSpreadPolicy](t, r.objects, fullname+"-default").Spec); diff != "" {
			t.Errorf("ClusterSpreadPolicy spec (-want +got):\n%s", diff)
		}
		if n := len(all[*v1alpha1.SpreadPolicy](r.objects)); n != 0 {
			t.Errorf("%d SpreadPolicies rendered, want none", n)
		}
	})

	t.Run("namespace defaults -> one SpreadPolicy per namespace, a narrowed cluster default", func(t *testing.T) {
		r := render(t, ciValues(t, "namespace-defaults-values.yaml"))
		wantCluster := v1alpha1.ClusterSpreadPolicySpec{
			PolicySpec: v1alpha1.PolicySpec{
				Priority:    -10,
				Constraints: []v1alpha1.Constraint{constraint("topology.kubernetes.io/zone", 2, corev1.ScheduleAnyway)},
				Validation:  &v1alpha1.ValidationSpec{Action: v1alpha1.ActionWarn},
			},
			NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"spreadguard.io/tier": "general"}},
		}
		if diff := cmp.Diff(wantCluster, find[*v1alpha1.ClusterSpreadPolicy](t, r.objects, fullname+"-default").Spec); diff != "" {
			t.Errorf("ClusterSpreadPolicy spec (-want +got):\n%s", diff)
		}
		zone := constraint("topology.kubernetes.io/zone", 1, corev1.DoNotSchedule)
		zone.MinDomains = ptr.To[int32](3)
		zone.NodeTaintsPolicy = ptr.To(corev1.NodeInclusionPolicyHonor)
		zone.MatchLabelKeys = []string{"pod-template-hash"}
		want := map[string]v1alpha1.SpreadPolicySpec{
			"batch": {
				PodSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
					{Key: "spreadguard.io/spread", Operator: metav1.LabelSelectorOpNotIn, Values: []string{"off"}},
				}},
				Constraints: []v1alpha1.Constraint{constraint("kubernetes.io/hostname", 3, corev1.ScheduleAnyway)},
			},
			"payments": {
				Priority:    10,
				Constraints: []v1alpha1.Constraint{zone, constraint("kubernetes.io/hostname", 1, corev1.ScheduleAnyway)},
				Validation:  &v1alpha1.ValidationSpec{Action: v1alpha1.ActionDeny},
			},
		}
		got := map[string]v1alpha1.SpreadPolicySpec{}
		for _, p := range all[*v1alpha1.SpreadPolicy](r.objects) {
			if p.Name != fullname+"-default" {
				t.Errorf("SpreadPolicy %s/%s, want the name %s-default", p.Namespace, p.Name, fullname)
			}
			got[p.Namespace] = p.Spec
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("SpreadPolicies by namespace (-want +got):\n%s", diff)
		}
	})

	t.Run("cluster default disabled -> no ClusterSpreadPolicy", func(t *testing.T) {
		r := render(t, valuesYAML(t, "policy: {clusterDefault: {enabled: false}}"))
		if n := len(all[*v1alpha1.ClusterSpreadPolicy](r.objects)); n != 0 {
			t.Errorf("%d ClusterSpreadPolicies rendered, want none", n)
		}
	})
}

func TestNodeTemplatesAreRenderedAsGiven(t *testing.T) {
	t.Parallel()
	r := render(t, valuesYAML(t, `nodeTemplates:
  - {name: gpu-c, labels: {topology.kubernetes.io/zone: c, gpu: "true"}, taints: [{key: gpu, value: "true", effect: NoSchedule}]}
  - {name: plain}`))
	got := all[*v1alpha1.NodeTemplate](r.objects)
	want := []v1alpha1.NodeTemplateSpec{
		{Labels: map[string]string{corev1.LabelTopologyZone: "c", "gpu": "true"}, Taints: []corev1.Taint{{Key: "gpu", Value: "true", Effect: corev1.TaintEffectNoSchedule}}},
		{},
	}
	var specs []v1alpha1.NodeTemplateSpec
	var names []string
	for _, t := range got {
		specs = append(specs, t.Spec)
		names = append(names, t.Name)
	}
	if diff := cmp.Diff(want, specs); diff != "" {
		t.Errorf("NodeTemplate specs (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"gpu-c", "plain"}, names); diff != "" {
		t.Errorf("NodeTemplate names (-want +got):\n%s", diff)
	}
	if _, err := renderErr(t, valuesYAML(t, "nodeTemplates: [{name: x, taints: [{key: a, effect: Sometimes}]}]"), defaultInstall); err == nil {
		t.Error("a taint effect the API does not know was rendered, want the schema to refuse it")
	}
}

func TestNotesWarnAboutRiskySettings(t *testing.T) {
	t.Parallel()
	const (
		failWarning    = "WARNING: failurePolicy is Fail"
		replicaWarning = "WARNING: replicaCount is 1"
		pdbWarning     = "WARNING: the default action is Deny but there is no PodDisruptionBudget"
		noNewNodes     = "Note: the default action is Deny and no source of new nodes is set"
	)
	tests := []struct {
		name string
		vals string
		want []string
	}{
		{name: "defaults -> no warning", vals: "{}"},
		{name: "failurePolicy Fail -> warned", vals: "webhook: {failurePolicy: Fail}", want: []string{failWarning}},
		{name: "one replica -> warned", vals: "replicaCount: 1", want: []string{replicaWarning}},
		{name: "Deny without a PDB -> warned", vals: "podDisruptionBudget: {enabled: false}", want: []string{pdbWarning}},
		{name: "Warn without a PDB -> no warning", vals: "{podDisruptionBudget: {enabled: false}, config: {defaultAction: Warn}}"},
		{
			name: "Fail, one replica, Deny, no PDB -> all three",
			vals: "{webhook: {failurePolicy: Fail}, replicaCount: 1, podDisruptionBudget: {enabled: false}}",
			want: []string{failWarning, replicaWarning, pdbWarning},
		},
		{name: "one replica outside the cluster -> no warning: nothing runs there", vals: "{replicaCount: 1, webhook: {url: 'https://127.0.0.1:9443'}}"},
		{name: "Deny with Karpenter off and no node groups nor templates -> noted", vals: "autoscaler: {karpenter: false}", want: []string{noNewNodes}},
		{name: "Deny with Karpenter off but a node group label -> no note", vals: "autoscaler: {karpenter: false, nodeGroupLabel: cloud.google.com/gke-nodepool}"},
		{name: "Warn with Karpenter off -> no note", vals: "{autoscaler: {karpenter: false}, config: {defaultAction: Warn}}"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			notes := render(t, valuesYAML(t, tc.vals)).notes
			var got []string
			for line := range strings.SplitSeq(notes, "\n") {
				for _, w := range []string{failWarning, replicaWarning, pdbWarning, noNewNodes} {
					if strings.HasPrefix(line, w) {
						got = append(got, w)
					}
				}
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("warnings (-want +got):\n%s\nnotes:\n%s", diff, notes)
			}
		})
	}

	t.Run("the notes say what was installed", func(t *testing.T) {
		notes := render(t, ciValues(t, "namespace-defaults-values.yaml")).notes
		for _, want := range []string{
			"release " + releaseName + " in namespace " + releaseNamespace,
			"Deployment " + fullname + " (2 replicas)",
			"Never sent to the webhook: namespaces kube-system, " + releaseNamespace + ",",
			"ClusterSpreadPolicy " + fullname + "-default (1 constraint)",
			"SpreadPolicy payments/" + fullname + "-default",
			"Default validation action: Audit.",
			"Karpenter NodePools: read if the karpenter.sh/v1 NodePool API is served when the server starts",
			"node groups: none (autoscaler.nodeGroupLabel is empty)",
			"Deletion costs: kept on the pods of constrained ReplicaSets and ReplicationControllers, at most 20 patches a second (burst 40)",
		} {
			if !strings.Contains(notes, want) {
				t.Errorf("the notes do not say %q:\n%s", want, notes)
			}
		}
	})
}
