package chart_test

import (
	"path/filepath"
	"strings"
	"testing"

	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/lint/support"
)

// TestSchemaRefusesBadValues renders, and lints, each values file of
// testdata/invalid: each must fail with a message that names what is wrong.
func TestSchemaRefusesBadValues(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		file string
		// wantErr are substrings the error must contain: the path of the
		// value and what is wrong with it.
		wantErr []string
	}{
		{name: "unknown top-level key -> refused, naming it", file: "unknown-top-level-key.yaml", wantErr: []string{"additional properties 'replicas' not allowed"}},
		{name: "misspelt nested key -> refused, naming it and its parent", file: "unknown-nested-key.yaml", wantErr: []string{"/webhook", "additional properties 'failurPolicy' not allowed"}},
		{name: "a string where a number belongs -> refused, naming the key and both types", file: "wrong-type.yaml", wantErr: []string{"/replicaCount", "got string, want integer"}},
		{name: "an action that does not exist -> refused, listing the valid ones", file: "wrong-enum.yaml", wantErr: []string{"/config/defaultAction", "'Deny'", "'Warn'", "'Audit'"}},
		{name: "labelSelector in a policy constraint -> refused", file: "label-selector-in-policy.yaml", wantErr: []string{"/policy/clusterDefault/constraints/0", "additional properties 'labelSelector' not allowed"}},
		{name: "minDomains on a ScheduleAnyway constraint -> refused", file: "min-domains-with-schedule-anyway.yaml", wantErr: []string{"/policy/clusterDefault/constraints/0/whenUnsatisfiable", "'DoNotSchedule'"}},
		{name: "an http:// webhook URL -> refused", file: "http-url.yaml", wantErr: []string{"/webhook/url", "does not match pattern"}},
		{name: "timeoutSeconds above the API server's 30 -> refused", file: "timeout-too-long.yaml", wantErr: []string{"/webhook/timeoutSeconds", "maximum"}},
		{name: "a namespace name that cannot exist -> refused", file: "bad-namespace-name.yaml", wantErr: []string{"/policy/namespaces", "additional properties 'Team_A' not allowed"}},
		{name: "a memory request that is not a quantity -> refused", file: "bad-quantity.yaml", wantErr: []string{"/resources/requests/memory"}},
		{name: "an empty zone in autoscaler.zones -> refused, naming its index", file: "empty-zone.yaml", wantErr: []string{"/autoscaler/zones/1", "does not match pattern"}},
		{name: "cluster-autoscaler's status without its namespace -> refused", file: "status-without-namespace.yaml", wantErr: []string{"/autoscaler/clusterAutoscalerStatus", "does not match pattern"}},
		{name: "a deletion cost rate of 0 patches a second -> refused", file: "deletion-cost-qps-zero.yaml", wantErr: []string{"/deletionCost/qps", "exclusiveMinimum"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			vals := readValues(t, filepath.Join("testdata", "invalid", tc.file))
			_, err := renderErr(t, vals, defaultInstall)
			if err == nil {
				t.Fatalf("render with %s succeeded, want a schema error", tc.file)
			}
			for _, want := range tc.wantErr {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("render error does not contain %q:\n%v", want, err)
				}
			}
			lintErr := lint(t, vals)
			for _, want := range tc.wantErr {
				if !strings.Contains(lintErr, want) {
					t.Errorf("helm lint does not report %q:\n%s", want, lintErr)
				}
			}
		})
	}
}

// lint runs `helm lint --strict` on the chart with vals and returns its
// error messages, one a line.
func lint(t *testing.T, vals map[string]any) string {
	t.Helper()
	l := action.NewLint()
	l.Strict = true
	l.Namespace = releaseNamespace
	l.KubeVersion = mustKubeVersion(t, kubeVersion)
	res := l.Run([]string{chartDir}, vals)
	var msgs []string
	for _, m := range res.Messages {
		if m.Severity >= support.WarningSev {
			msgs = append(msgs, m.Error())
		}
	}
	for _, err := range res.Errors {
		msgs = append(msgs, err.Error())
	}
	return strings.Join(msgs, "\n")
}

func TestLintPassesOnEveryCIFile(t *testing.T) {
	t.Parallel()
	for _, f := range ciFiles {
		t.Run(f.name, func(t *testing.T) {
			if msgs := lint(t, ciValues(t, f.file)); msgs != "" {
				t.Errorf("helm lint --strict:\n%s", msgs)
			}
		})
	}
}

// TestTemplatesRefuseContradictions covers what the schema cannot express:
// combinations of values, and values that depend on the release.
func TestTemplatesRefuseContradictions(t *testing.T) {
	t.Parallel()
	constraint := "{constraints: [{topologyKey: kubernetes.io/hostname, maxSkew: 1, whenUnsatisfiable: ScheduleAnyway}]}"
	tests := []struct {
		name    string
		vals    string
		wantErr string
	}{
		{
			name:    "external URL and cert-manager together -> refused",
			vals:    "{webhook: {url: 'https://127.0.0.1:9443'}, certManager: {enabled: true}}",
			wantErr: "webhook.url and certManager.enabled are both set",
		},
		{
			name:    "a caBundle without an external URL -> refused",
			vals:    "webhook: {caBundle: QUJD}",
			wantErr: "webhook.caBundle is set without webhook.url",
		},
		{
			name:    "a namespace default for kube-system -> refused: the webhook never acts there",
			vals:    "policy: {namespaces: {kube-system: " + constraint + "}}",
			wantErr: `policy.namespaces.kube-system: spreadguard never acts in namespace "kube-system"`,
		},
		{
			name:    "a namespace default for the release's namespace -> refused",
			vals:    "policy: {namespaces: {" + releaseNamespace + ": " + constraint + "}}",
			wantErr: `spreadguard never acts in namespace "` + releaseNamespace + `"`,
		},
		{
			name:    "a namespace default for an excluded namespace -> refused",
			vals:    "{webhook: {excludedNamespaces: [tools]}, policy: {namespaces: {tools: " + constraint + "}}}",
			wantErr: `spreadguard never acts in namespace "tools"`,
		},
		{
			name:    "policy failurePolicy Fail with the cluster default rendered -> refused: Helm 4 would refuse it at install",
			vals:    "webhook: {policyFailurePolicy: Fail}",
			wantErr: "webhook.policyFailurePolicy is Fail while the chart renders policies",
		},
		{
			name:    "policy failurePolicy Fail with namespace defaults rendered -> refused",
			vals:    "{webhook: {policyFailurePolicy: Fail}, policy: {clusterDefault: {enabled: false}, namespaces: {team: " + constraint + "}}}",
			wantErr: "webhook.policyFailurePolicy is Fail while the chart renders policies",
		},
		{
			name:    "a ServiceMonitor without the metrics Service -> refused",
			vals:    "metrics: {service: {enabled: false}, serviceMonitor: {enabled: true}}",
			wantErr: "metrics.serviceMonitor.enabled needs metrics.service.enabled",
		},
		{
			name:    "a NetworkPolicy without the API server's CIDRs -> refused: it would cut the API server off",
			vals:    "networkPolicy: {enabled: true}",
			wantErr: "networkPolicy.enabled needs networkPolicy.apiServerCIDRs",
		},
		{
			name:    "no ServiceAccount created and none named -> refused",
			vals:    "serviceAccount: {create: false}",
			wantErr: "serviceAccount.name is required when serviceAccount.create is false",
		},
		{
			name:    "a shutdown delay as long as the grace period -> refused: the kubelet would kill the replica before it drains",
			vals:    "{shutdownDelaySeconds: 30, terminationGracePeriodSeconds: 30}",
			wantErr: "shutdownDelaySeconds (30) is not less than terminationGracePeriodSeconds (30)",
		},
		{
			name:    "a secure ServiceMonitor with no token Secret and no RBAC to bind one -> refused",
			vals:    "{rbac: {create: false}, metrics: {serviceMonitor: {enabled: true}}}",
			wantErr: "set metrics.serviceMonitor.tokenSecret.name",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := renderErr(t, valuesYAML(t, tc.vals), defaultInstall)
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("render error = %v, want one containing %q", err, tc.wantErr)
			}
		})
	}
}
