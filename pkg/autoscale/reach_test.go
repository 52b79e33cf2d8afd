package autoscale_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	"github.com/spreadguard/spreadguard/pkg/apis/spreadguard/v1alpha1"
	"github.com/spreadguard/spreadguard/pkg/autoscale"
	"github.com/spreadguard/spreadguard/pkg/spread"
)

func TestConstraintsOutOfReach(t *testing.T) {
	hard := func(key string, minDomains int32) v1alpha1.Constraint {
		return v1alpha1.Constraint{MaxSkew: 1, TopologyKey: key, WhenUnsatisfiable: v1.DoNotSchedule, MinDomains: ptr.To(minDomains)}
	}
	inZone := func(name, z string) spread.Template {
		return spread.Template{Name: name, Labels: labels(zone, z)}
	}
	tests := []struct {
		name      string
		cs        []v1alpha1.Constraint
		nodes     []*v1.Node
		templates []spread.Template
		want      []autoscale.OutOfReach
	}{
		{
			name:  "minDomains 3, nodes in a and b, no template -> out of reach with domains a, b",
			cs:    []v1alpha1.Constraint{hard(zone, 3)},
			nodes: nodesInZones("a", "b"),
			want:  []autoscale.OutOfReach{{Index: 0, TopologyKey: zone, MinDomains: 3, Domains: []string{"a", "b"}}},
		},
		{
			name:      "minDomains 3, nodes in a and b, a template in b -> still out of reach",
			cs:        []v1alpha1.Constraint{hard(zone, 3)},
			nodes:     nodesInZones("a", "b"),
			templates: []spread.Template{inZone("nodepool/default/b", "b")},
			want:      []autoscale.OutOfReach{{Index: 0, TopologyKey: zone, MinDomains: 3, Domains: []string{"a", "b"}}},
		},
		{
			name:      "minDomains 3, nodes in a and b, a template in c -> within reach",
			cs:        []v1alpha1.Constraint{hard(zone, 3)},
			nodes:     nodesInZones("a", "b"),
			templates: []spread.Template{inZone("nodepool/default/c", "c")},
		},
		{
			name:  "minDomains 2 on the second constraint, nodes in one zone -> the second reported with its index",
			cs:    []v1alpha1.Constraint{hard(v1.LabelHostname, 1), hard(zone, 2)},
			nodes: nodesInZones("a"),
			want:  []autoscale.OutOfReach{{Index: 1, TopologyKey: zone, MinDomains: 2, Domains: []string{"a"}}},
		},
		{
			name:      "per host with minDomains 5 on 2 nodes, a template without a hostname -> within reach: new hosts have no bound",
			cs:        []v1alpha1.Constraint{hard(v1.LabelHostname, 5)},
			nodes:     nodesInZones("a", "b"),
			templates: []spread.Template{inZone("nodepool/default/a", "a")},
		},
		{
			name:  "minDomains 3 under ScheduleAnyway, or no minDomains -> nothing to report",
			cs:    []v1alpha1.Constraint{{MaxSkew: 1, TopologyKey: zone, WhenUnsatisfiable: v1.ScheduleAnyway, MinDomains: ptr.To[int32](3)}, {MaxSkew: 1, TopologyKey: zone, WhenUnsatisfiable: v1.DoNotSchedule}},
			nodes: nodesInZones("a"),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := autoscale.ConstraintsOutOfReach(tt.cs, tt.nodes, tt.templates)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("out of reach (-want +got):\n%s", diff)
			}
		})
	}
}
