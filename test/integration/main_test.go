//go:build integration

// Package integration runs spreadguard's webhook in-process against a real
// kube-apiserver and etcd (controller-runtime's envtest), registered through
// real MutatingWebhookConfiguration and ValidatingWebhookConfiguration
// objects, and asserts what the apiserver stored or refused.
//
// The binaries come from ./bin, built from source by hack/build-binaries.sh:
//
//	make test-integration
package integration

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"go.uber.org/zap/zapcore"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	crcache "sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	sigsyaml "sigs.k8s.io/yaml"

	"github.com/spreadguard/spreadguard/cmd/webhook/app"
	karpenterv1 "github.com/spreadguard/spreadguard/pkg/apis/karpenter/v1"
	nodeclassv1 "github.com/spreadguard/spreadguard/pkg/apis/nodeclass/v1"
	"github.com/spreadguard/spreadguard/pkg/apis/spreadguard/v1alpha1"
	"github.com/spreadguard/spreadguard/pkg/server"
	"github.com/spreadguard/spreadguard/test/pki"
)

// labelHiddenFromCache marks objects the webhook's ReplicaSet informer is
// built never to see, so a test can prove the live-read fallback.
const labelHiddenFromCache = "integration.spreadguard.io/hidden-from-cache"

// suite is what every test shares: one API server, one webhook.
var suite struct {
	restConfig *rest.Config
	client     client.Client
	scheme     *runtime.Scheme
	// webhookURL is https://127.0.0.1:<port> of the webhook server.
	webhookURL string
	caPEM      []byte
	// certDir holds the serving certificate for 127.0.0.1.
	certDir    string
	probeURL   string
	metricsURL string
	// webhookClientCert is the file (certificate and key) the API server
	// presents to every webhook that asks for a client certificate
	// (apiServerClientAuth); a test replaces it to rotate it.
	webhookClientCert string
}

func TestMain(m *testing.M) {
	os.Exit(runSuite(m))
}

func runSuite(m *testing.M) int {
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		return fail("finding the repository root: %v", err)
	}
	assets := os.Getenv("KUBEBUILDER_ASSETS")
	if assets == "" {
		assets = filepath.Join(root, "bin")
	}
	for _, name := range []string{"etcd", "kube-apiserver"} {
		if fi, err := os.Stat(filepath.Join(assets, name)); err != nil || fi.Mode()&0o111 == 0 {
			return fail("%s is missing from %s: the integration tests need etcd and kube-apiserver v1.37.1 built from source. "+
				"Run `make test-integration`, which builds them with hack/build-binaries.sh and runs these tests.",
				name, assets)
		}
	}

	log := zap.New(zap.WriteTo(os.Stderr), zap.Level(zapcore.InfoLevel))
	ctrl.SetLogger(log)
	klog.SetLogger(log)

	suite.scheme = runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(suite.scheme); err != nil {
		return fail("building the scheme: %v", err)
	}
	if err := v1alpha1.AddToScheme(suite.scheme); err != nil {
		return fail("building the scheme: %v", err)
	}
	if err := karpenterv1.AddToScheme(suite.scheme); err != nil {
		return fail("building the scheme: %v", err)
	}
	if err := nodeclassv1.AddToScheme(suite.scheme); err != nil {
		return fail("building the scheme: %v", err)
	}

	karpenterCRDs := os.Getenv("KARPENTER_CRDS")
	if karpenterCRDs == "" {
		karpenterCRDs = filepath.Join(root, "bin", "karpenter-crds")
	}
	if _, err := os.Stat(filepath.Join(karpenterCRDs, "karpenter.sh_nodepools.yaml")); err != nil {
		return fail("Karpenter's CRDs are missing from %s: the integration tests read NodePools. "+
			"Run `make test-integration`, which copies them from Karpenter's module with hack/build-binaries.sh karpenter.", karpenterCRDs)
	}
	// The EC2NodeClass CRD of Karpenter's AWS provider, and a stand-in for
	// EKS Auto Mode's NodeClass, whose CRD AWS does not publish.
	awsCRDs := os.Getenv("KARPENTER_AWS_CRDS")
	if awsCRDs == "" {
		awsCRDs = filepath.Join(root, "bin", "karpenter-aws-crds")
	}
	if _, err := os.Stat(filepath.Join(awsCRDs, "karpenter.k8s.aws_ec2nodeclasses.yaml")); err != nil {
		return fail("the EC2NodeClass CRD is missing from %s: the integration tests read node classes. "+
			"Run `make test-integration`, which copies it from karpenter-provider-aws's module with hack/build-binaries.sh karpenter-aws-crds.", awsCRDs)
	}

	crds := []string{filepath.Join(root, "charts", "spreadguard", "files", "crds"), karpenterCRDs, awsCRDs, filepath.Join("testdata", "eks-auto-mode")}
	tmp, err := os.MkdirTemp("", "spreadguard-integration-")
	if err != nil {
		return fail("creating a temporary directory: %v", err)
	}
	defer os.RemoveAll(tmp)
	admissionConfig, err := apiServerClientAuth(tmp)
	if err != nil {
		return fail("writing the API server's admission configuration: %v", err)
	}

	mutating, validating, err := webhookConfigurations(root)
	if err != nil {
		return fail("%v", err)
	}
	env := &envtest.Environment{
		BinaryAssetsDirectory:    assets,
		CRDDirectoryPaths:        crds,
		ErrorIfCRDPathMissing:    true,
		Scheme:                   suite.scheme,
		ControlPlaneStartTimeout: 2 * time.Minute,
		ControlPlaneStopTimeout:  time.Minute,
		WebhookInstallOptions: envtest.WebhookInstallOptions{
			LocalServingHost:   "127.0.0.1",
			MutatingWebhooks:   mutating,
			ValidatingWebhooks: validating,
		},
	}
	env.ControlPlane.GetAPIServer().Configure().Set("admission-control-config-file", admissionConfig)
	started := time.Now()
	if suite.restConfig, err = env.Start(); err != nil {
		_ = env.Stop()
		return fail("starting kube-apiserver and etcd from %s: %v", assets, err)
	}
	defer func() {
		if err := env.Stop(); err != nil {
			fmt.Fprintf(os.Stderr, "stopping the control plane: %v\n", err)
		}
	}()
	fmt.Fprintf(os.Stderr, "control plane up in %s\n", time.Since(started).Round(time.Millisecond))

	if suite.client, err = client.New(suite.restConfig, client.Options{Scheme: suite.scheme}); err != nil {
		return fail("creating the client: %v", err)
	}
	wh := env.WebhookInstallOptions
	suite.webhookURL = "https://" + net.JoinHostPort(wh.LocalServingHost, strconv.Itoa(wh.LocalServingPort))
	suite.caPEM = wh.LocalServingCAData

	probePort, metricsPort := freePort(), freePort()
	if probePort == 0 || metricsPort == 0 {
		return fail("finding free ports")
	}
	suite.probeURL = fmt.Sprintf("http://127.0.0.1:%d", probePort)
	suite.metricsURL = fmt.Sprintf("http://127.0.0.1:%d/metrics", metricsPort)

	suite.certDir = wh.LocalServingCertDir
	cfg := app.NewConfig()
	cfg.Port = wh.LocalServingPort
	cfg.CertDir = wh.LocalServingCertDir
	cfg.HealthProbeBindAddress = fmt.Sprintf("127.0.0.1:%d", probePort)
	cfg.MetricsBindAddress = fmt.Sprintf("127.0.0.1:%d", metricsPort)
	// Plain HTTP, so the tests read counters without a token;
	// TestMetricsAreServedOnlyToAuthorizedCallers covers the secure mode.
	cfg.MetricsSecure = false
	// The node groups of TestANodeGroupAtItsMaximumTurnsAWarningIntoADenial;
	// no other test's node carries the label.
	cfg.NodeGroupLabel = nodeGroupLabel

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- app.Run(ctx, cfg,
			app.WithRESTConfig(suite.restConfig),
			app.WithHost("127.0.0.1"),
			app.WithLogger(log.WithName("webhook")),
			app.WithCacheOptions(hideLabelledReplicaSets),
			app.WithSourcesWrapper(injectFaults),
		)
	}()
	defer func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				fmt.Fprintf(os.Stderr, "webhook server stopped with: %v\n", err)
			}
		case <-time.After(time.Minute):
			fmt.Fprintln(os.Stderr, "webhook server did not stop within a minute")
		}
	}()
	if err := waitReady(suite.probeURL, done, log); err != nil {
		return fail("%v", err)
	}
	fmt.Fprintf(os.Stderr, "webhook ready %s after start\n", time.Since(started).Round(time.Millisecond))
	return m.Run()
}

// fail reports a setup failure so that the package FAILS, never skips.
func fail(format string, args ...any) int {
	fmt.Fprintf(os.Stderr, "FAIL: "+format+"\n", args...)
	return 1
}

// freePort returns a port nothing listens on right now, or 0.
func freePort() int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// apiServerClientAuth writes into dir the AdmissionConfiguration that gives
// the API server a client certificate to present to webhooks, as a
// self-managed control plane is configured for a webhook that checks its
// callers (the server's --client-ca-file): a kubeconfig whose user "*"
// (every webhook) has the certificate and key of one file,
// suite.webhookClientCert. It starts with a certificate of a throwaway CA;
// a webhook that does not ask for one is sent none. The API server reads the
// file again, at most once a second, when it opens a connection, and closes
// its connections when the certificate changed (k8s.io/client-go v0.37.1,
// transport/cert_rotation.go). It returns the configuration's path.
func apiServerClientAuth(dir string) (string, error) {
	suite.webhookClientCert = filepath.Join(dir, "webhook-client.pem")
	certPEM := pki.PEM(pki.NewCA("apiserver-webhook-client-initial").ClientCert("kube-apiserver"))
	kubeconfig := filepath.Join(dir, "webhook-client.kubeconfig")
	config := filepath.Join(dir, "admission.yaml")
	files := map[string]string{
		suite.webhookClientCert: string(certPEM),
		kubeconfig: fmt.Sprintf(`apiVersion: v1
kind: Config
users:
- name: "*"
  user:
    client-certificate: %[1]s
    client-key: %[1]s
`, suite.webhookClientCert),
		config: fmt.Sprintf(`apiVersion: apiserver.config.k8s.io/v1
kind: AdmissionConfiguration
plugins:
- name: ValidatingAdmissionWebhook
  configuration:
    apiVersion: apiserver.config.k8s.io/v1
    kind: WebhookAdmissionConfiguration
    kubeConfigFile: %[1]s
- name: MutatingAdmissionWebhook
  configuration:
    apiVersion: apiserver.config.k8s.io/v1
    kind: WebhookAdmissionConfiguration
    kubeConfigFile: %[1]s
`, kubeconfig),
	}
	for path, content := range files {
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			return "", err
		}
	}
	return config, nil
}

// hideLabelledReplicaSets keeps ReplicaSets labelled labelHiddenFromCache
// out of the webhook's informer.
func hideLabelledReplicaSets(o *crcache.Options) {
	hidden, err := labels.Parse("!" + labelHiddenFromCache)
	if err != nil {
		panic(err)
	}
	for obj, by := range o.ByObject {
		if _, ok := obj.(*appsv1.ReplicaSet); ok {
			by.Label = hidden
			o.ByObject[obj] = by
		}
	}
}

// waitReady waits for /readyz, which turns 200 only once the caches have
// synced and the webhook server answers.
func waitReady(probeURL string, done <-chan error, log logr.Logger) error {
	deadline := time.Now().Add(2 * time.Minute)
	for time.Now().Before(deadline) {
		select {
		case err := <-done:
			return fmt.Errorf("the webhook server stopped before it was ready: %w", err)
		default:
		}
		resp, err := http.Get(probeURL + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
	log.Info("webhook not ready")
	return errors.New("the webhook server was not ready (/readyz) within 2 minutes")
}

// webhookConfigurations mirrors the chart's webhook configurations, with two
// differences for the test: failurePolicy Fail, so that a webhook fault
// fails the test instead of admitting the pod, and no namespaceSelector, so
// that the server's own exclusion of kube-system is what is tested. The
// workloads' matchConditions are read from the chart in the repository at
// root.
func webhookConfigurations(root string) ([]*admissionregistrationv1.MutatingWebhookConfiguration, []*admissionregistrationv1.ValidatingWebhookConfiguration, error) {
	workloadConditions, err := chartMatchConditions(filepath.Join(root, workloadsTemplate))
	if err != nil {
		return nil, nil, err
	}
	fail := admissionregistrationv1.Fail
	none := admissionregistrationv1.SideEffectClassNone
	// The pod validation records events, none on a dry run.
	noneOnDryRun := admissionregistrationv1.SideEffectClassNoneOnDryRun
	equivalent := admissionregistrationv1.Equivalent
	ifNeeded := admissionregistrationv1.IfNeededReinvocationPolicy
	timeout := int32(10)
	namespaced, cluster := admissionregistrationv1.NamespacedScope, admissionregistrationv1.ClusterScope
	clientConfig := func(path string) admissionregistrationv1.WebhookClientConfig {
		// envtest replaces the service with the local URL and the CA.
		return admissionregistrationv1.WebhookClientConfig{Service: &admissionregistrationv1.ServiceReference{
			Namespace: "default", Name: "spreadguard", Path: &path,
		}}
	}
	rule := func(group, version, resource string, scope admissionregistrationv1.ScopeType, ops ...admissionregistrationv1.OperationType) []admissionregistrationv1.RuleWithOperations {
		return []admissionregistrationv1.RuleWithOperations{{
			Operations: ops,
			Rule: admissionregistrationv1.Rule{
				APIGroups: []string{group}, APIVersions: []string{version}, Resources: []string{resource}, Scope: &scope,
			},
		}}
	}
	create, update := admissionregistrationv1.Create, admissionregistrationv1.Update
	mutating := &admissionregistrationv1.MutatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: "spreadguard"},
		Webhooks: []admissionregistrationv1.MutatingWebhook{{
			Name: "pods.mutate.spreadguard.io", AdmissionReviewVersions: []string{"v1"},
			SideEffects: &none, MatchPolicy: &equivalent, FailurePolicy: &fail, TimeoutSeconds: &timeout,
			ReinvocationPolicy: &ifNeeded,
			ClientConfig:       clientConfig(server.PathMutatePod),
			Rules:              rule("", "v1", "pods", namespaced, create),
		}},
	}
	validating := &admissionregistrationv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: "spreadguard"},
		Webhooks: []admissionregistrationv1.ValidatingWebhook{
			{
				Name: "pods.validate.spreadguard.io", AdmissionReviewVersions: []string{"v1"},
				SideEffects: &noneOnDryRun, MatchPolicy: &equivalent, FailurePolicy: &fail, TimeoutSeconds: &timeout,
				ClientConfig: clientConfig(server.PathValidatePod),
				Rules:        rule("", "v1", "pods", namespaced, create),
			},
			{
				// As the chart's: the UPDATE that removes a pod's last
				// scheduling gate has an entry of its own.
				Name: "gated-pods.validate.spreadguard.io", AdmissionReviewVersions: []string{"v1"},
				SideEffects: &noneOnDryRun, MatchPolicy: &equivalent, FailurePolicy: &fail, TimeoutSeconds: &timeout,
				ClientConfig: clientConfig(server.PathValidatePod),
				Rules:        rule("", "v1", "pods", namespaced, update),
				MatchConditions: []admissionregistrationv1.MatchCondition{{
					Name: "last-scheduling-gate-removed",
					Expression: "has(oldObject.spec.schedulingGates) && size(oldObject.spec.schedulingGates) > 0 && " +
						"(!has(object.spec.schedulingGates) || size(object.spec.schedulingGates) == 0)",
				}},
			},
			{
				Name: "spreadpolicies.validate.spreadguard.io", AdmissionReviewVersions: []string{"v1"},
				SideEffects: &none, MatchPolicy: &equivalent, FailurePolicy: &fail, TimeoutSeconds: &timeout,
				ClientConfig: clientConfig(server.PathValidateSpreadPolicy),
				Rules:        rule(v1alpha1.GroupName, "v1alpha1", "spreadpolicies", namespaced, create, update),
			},
			{
				Name: "clusterspreadpolicies.validate.spreadguard.io", AdmissionReviewVersions: []string{"v1"},
				SideEffects: &none, MatchPolicy: &equivalent, FailurePolicy: &fail, TimeoutSeconds: &timeout,
				ClientConfig: clientConfig(server.PathValidateClusterSpreadPolicy),
				Rules:        rule(v1alpha1.GroupName, "v1alpha1", "clusterspreadpolicies", cluster, create, update),
			},
		},
	}
	// As the chart's: a configuration of its own, on workloads and their
	// scale subresource.
	workloads := &admissionregistrationv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: "spreadguard-workloads"},
		Webhooks: []admissionregistrationv1.ValidatingWebhook{{
			Name: "workloads.forecast.spreadguard.io", AdmissionReviewVersions: []string{"v1"},
			SideEffects: &none, MatchPolicy: &equivalent, FailurePolicy: &fail, TimeoutSeconds: &timeout,
			ClientConfig: clientConfig(server.PathForecastWorkload),
			Rules: append(rule("apps", "v1", "deployments", namespaced, create, update)[0:1:1],
				append(rule("apps", "v1", "deployments/scale", namespaced, create, update),
					rule("apps", "v1", "replicasets", namespaced, create, update)...)...),
			MatchConditions: workloadConditions,
		}},
	}
	return []*admissionregistrationv1.MutatingWebhookConfiguration{mutating},
		[]*admissionregistrationv1.ValidatingWebhookConfiguration{validating, workloads}, nil
}

// workloadsTemplate is the chart's configuration of the workload forecasts.
const workloadsTemplate = "charts/spreadguard/templates/webhook-validatingwebhookconfiguration-workloads.yaml"

// chartMatchConditions reads the matchConditions of the one webhook of a
// chart template, which holds no template action between its
// "matchConditions:" and the key after it, so that the tests run the
// expressions the chart installs and no copy of them.
func chartMatchConditions(path string) ([]admissionregistrationv1.MatchCondition, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	text := string(data)
	start := strings.Index(text, "\n    matchConditions:\n")
	if start < 0 {
		return nil, fmt.Errorf("%s has no matchConditions", path)
	}
	block := text[start+1:]
	if end := strings.Index(block, "\n    namespaceSelector:"); end >= 0 {
		block = block[:end]
	}
	var out struct {
		MatchConditions []admissionregistrationv1.MatchCondition `json:"matchConditions"`
	}
	if err := sigsyaml.Unmarshal([]byte(block), &out); err != nil {
		return nil, fmt.Errorf("reading the matchConditions of %s: %w", path, err)
	}
	if len(out.MatchConditions) == 0 || strings.Contains(block, "{{") {
		return nil, fmt.Errorf("%s: the matchConditions block is empty or templated", path)
	}
	return out.MatchConditions, nil
}
