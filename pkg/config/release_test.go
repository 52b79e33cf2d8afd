package config

import (
	"context"
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/spreadguard/spreadguard/pkg/apis/spreadguard/v1alpha1"
	"github.com/spreadguard/spreadguard/pkg/spread"
)

// releaseConfigMap is a ConfigMap as the chart renders it for release in
// namespace: the chart's labels, and data.
func releaseConfigMap(namespace, name, release string, data map[string]string) *v1.ConfigMap {
	return &v1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, Labels: map[string]string{
			"helm.sh/chart":                "spreadguard-0.1.0",
			"app.kubernetes.io/name":       "spreadguard",
			"app.kubernetes.io/instance":   release,
			"app.kubernetes.io/managed-by": "Helm",
			"app.kubernetes.io/part-of":    "spreadguard",
			"app.kubernetes.io/component":  "webhook",
		}},
		Data: data,
	}
}

const releaseFile = `apiVersion: config.spreadguard.io/v1alpha1
kind: WebhookConfiguration
port: 9443
certDir: /etc/spreadguard/certs
defaultAction: Warn
excludedNamespaces: [kube-system, spreadguard-system]
messageDetail: domains
autoscalerKarpenter: "false"
clusterAutoscalerStatus: autoscaling/ca-status
`

func TestFromRelease(t *testing.T) {
	config := releaseConfigMap("spreadguard-system", "sg-spreadguard-config", "sg", map[string]string{ConfigMapKey: releaseFile})
	// The chart's dashboard carries the same labels, and no configuration.
	dashboard := releaseConfigMap("spreadguard-system", "sg-spreadguard-dashboard", "sg", map[string]string{"spreadguard.json": "{}"})
	wantEngine := Decisions{DefaultAction: v1alpha1.ActionWarn, ExcludedNamespaces: []string{"kube-system", "spreadguard-system"},
		MessageDetail: spread.DetailDomains, AutoscalerKarpenter: ToggleFalse, ClusterAutoscalerStatus: "autoscaling/ca-status"}
	tests := []struct {
		name       string
		objs       []client.Object
		failList   bool
		namespace  string
		release    string
		want       *Decisions
		wantSource string
		wantErr    string
	}{
		{
			name:       "release sg installed, its dashboard beside it -> the configuration of its ConfigMap",
			objs:       []client.Object{config, dashboard},
			namespace:  "spreadguard-system",
			release:    "sg",
			want:       &wantEngine,
			wantSource: "ConfigMap spreadguard-system/sg-spreadguard-config key config.yaml",
		},
		{
			name:      "another release's name -> an error naming the release, the namespace and what was looked for",
			objs:      []client.Object{config, dashboard},
			namespace: "spreadguard-system",
			release:   "other",
			wantErr: "release other in namespace spreadguard-system has no ConfigMap labelled app.kubernetes.io/instance=other, " +
				"app.kubernetes.io/part-of=spreadguard with the key config.yaml: is spreadguard installed under that name there? (helm list -A)",
		},
		{
			name:      "the release asked for in the wrong namespace -> not found there",
			objs:      []client.Object{config},
			namespace: "default",
			release:   "sg",
			wantErr: "release sg in namespace default has no ConfigMap labelled app.kubernetes.io/instance=sg, " +
				"app.kubernetes.io/part-of=spreadguard with the key config.yaml: is spreadguard installed under that name there? (helm list -A)",
		},
		{
			name: "two ConfigMaps of the release with the key -> both named, none guessed",
			objs: []client.Object{config,
				releaseConfigMap("spreadguard-system", "copy", "sg", map[string]string{ConfigMapKey: releaseFile})},
			namespace: "spreadguard-system",
			release:   "sg",
			wantErr:   "release sg in namespace spreadguard-system has 2 ConfigMaps with the key config.yaml (copy, sg-spreadguard-config), want one",
		},
		{
			name: "a ConfigMap whose file has a misspelt field -> the decoder's error, naming the ConfigMap",
			objs: []client.Object{releaseConfigMap("spreadguard-system", "sg-spreadguard-config", "sg",
				map[string]string{ConfigMapKey: "apiVersion: config.spreadguard.io/v1alpha1\nkind: WebhookConfiguration\nmessageDetial: nodes\n"})},
			namespace: "spreadguard-system",
			release:   "sg",
			wantErr: `ConfigMap spreadguard-system/sg-spreadguard-config key config.yaml: error unmarshaling JSON: ` +
				`while decoding JSON: json: unknown field "messageDetial"`,
		},
		{
			name:      "listing refused -> the error, with the release and namespace",
			failList:  true,
			namespace: "spreadguard-system",
			release:   "sg",
			wantErr:   `listing the ConfigMaps of release sg in namespace spreadguard-system: configmaps is forbidden`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := fake.NewClientBuilder().WithScheme(clientgoscheme.Scheme).WithObjects(tt.objs...)
			if tt.failList {
				b = b.WithInterceptorFuncs(interceptor.Funcs{List: func(context.Context, client.WithWatch, client.ObjectList, ...client.ListOption) error {
					return errors.New("configmaps is forbidden")
				}})
			}
			cfg, source, err := FromRelease(t.Context(), b.Build(), tt.namespace, tt.release)
			if gotErr := errString(err); gotErr != tt.wantErr {
				t.Fatalf("FromRelease() error = %q, want %q", gotErr, tt.wantErr)
			}
			var got *Decisions
			if cfg != nil {
				got = &cfg.Decisions
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("FromRelease() engine (-want +got):\n%s", diff)
			}
			if source != tt.wantSource {
				t.Errorf("FromRelease() source = %q, want %q", source, tt.wantSource)
			}
		})
	}
}
