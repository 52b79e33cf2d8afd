package chart_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/spreadguard/spreadguard/pkg/apis/spreadguard/v1alpha1"
	"github.com/spreadguard/spreadguard/pkg/config"
	"github.com/spreadguard/spreadguard/pkg/spread"
)

// TestKubectlSpreadReadsTheRenderedConfiguration holds the chart to what
// `kubectl-spread --from-release` relies on: the release's ConfigMaps carry
// the labels it finds them by, exactly one holds config.yaml, and the
// webhook's decoder takes it.
func TestKubectlSpreadReadsTheRenderedConfiguration(t *testing.T) {
	t.Parallel()
	// The chart's default autoscaler.clusterAutoscalerStatus.
	const caStatus = "kube-system/cluster-autoscaler-status"
	tests := []struct {
		name    string
		release string
		vals    map[string]any
		want    config.Decisions
	}{
		{
			name:    "defaults -> the webhook's defaults, the release's namespace excluded",
			release: releaseName,
			vals:    ciValues(t, "default-values.yaml"),
			want: config.Decisions{DefaultAction: v1alpha1.ActionDeny, ExcludedNamespaces: []string{"kube-system", releaseNamespace},
				MessageDetail: spread.DetailDomains, AutoscalerKarpenter: config.ToggleAuto, ClusterAutoscalerStatus: caStatus},
		},
		{
			name:    "Warn, nodes, Karpenter off, a node group label and the dashboard beside it -> each read",
			release: releaseName,
			vals: valuesYAML(t, "config: {defaultAction: Warn, messageDetail: nodes}\n"+
				"autoscaler: {karpenter: false, nodeGroupLabel: eks.amazonaws.com/nodegroup}\ndashboards: {enabled: true}"),
			want: config.Decisions{DefaultAction: v1alpha1.ActionWarn, ExcludedNamespaces: []string{"kube-system", releaseNamespace},
				MessageDetail: spread.DetailNodes, AutoscalerKarpenter: config.ToggleFalse, NodeGroupLabel: "eks.amazonaws.com/nodegroup",
				ClusterAutoscalerStatus: caStatus},
		},
		{
			name:    "fullnameOverride -> found by its labels, whatever its name",
			release: releaseName,
			vals:    valuesYAML(t, "fullnameOverride: sg"),
			want: config.Decisions{DefaultAction: v1alpha1.ActionDeny, ExcludedNamespaces: []string{"kube-system", releaseNamespace},
				MessageDetail: spread.DetailDomains, AutoscalerKarpenter: config.ToggleAuto, ClusterAutoscalerStatus: caStatus},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := render(t, tt.vals)
			var objs []client.Object
			for _, cm := range all[*configMap](r.objects) {
				objs = append(objs, cm)
			}
			c := fake.NewClientBuilder().WithObjects(objs...).Build()
			cfg, _, err := config.FromRelease(t.Context(), c, releaseNamespace, tt.release)
			if err != nil {
				t.Fatalf("kubectl-spread --from-release %s: %v", tt.release, err)
			}
			if diff := cmp.Diff(tt.want, cfg.Decisions); diff != "" {
				t.Errorf("engine settings read from the release (-want +got):\n%s", diff)
			}
		})
	}
}
