package autoscale_test

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/spreadguard/spreadguard/pkg/apis/spreadguard/v1alpha1"
	"github.com/spreadguard/spreadguard/pkg/autoscale"
	"github.com/spreadguard/spreadguard/pkg/spread"
	"github.com/spreadguard/spreadguard/pkg/spread/spreadtest"
)

// readStatus returns the testdata file name, modelled on the status
// cluster-autoscaler writes.
func readStatus(t *testing.T, name string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

func TestParseClusterAutoscalerStatus(t *testing.T) {
	tests := []struct {
		name    string
		text    string
		want    *autoscale.ClusterAutoscalerStatus
		wantErr string
	}{
		{
			name: "the YAML status of cluster-autoscaler 1.30+ with three EKS groups -> each group's target, min, max, health and scale-up, with the backoff's error",
			text: readStatus(t, "cluster-autoscaler-status.yaml"),
			want: &autoscale.ClusterAutoscalerStatus{NodeGroups: []autoscale.NodeGroupSize{
				{Name: "eks-web-7ec2a5b4-1d5e-4d5a-b3b0-2c6a1b4c9f70", Target: 6, Min: 2, Max: 6, Health: autoscale.HealthHealthy, ScaleUp: autoscale.ScaleUpNoActivity},
				{Name: "eks-batch-0b1c2d3e-4f50-6172-8394-a5b6c7d8e9f0", Target: 1, Min: 0, Max: 10, Health: autoscale.HealthHealthy, ScaleUp: autoscale.ScaleUpBackoff,
					Backoff: autoscale.Backoff{ErrorCode: "InsufficientInstanceCapacity", ErrorMessage: "We currently do not have sufficient capacity in the Availability Zone you requested."}},
				{Name: "eks-gpu-5a6b7c8d-9e0f-4a1b-8c2d-3e4f5a6b7c8d", Target: 0, Min: 0, Max: 4, Health: autoscale.HealthHealthy, ScaleUp: autoscale.ScaleUpNoActivity},
			}},
		},
		{
			name: "GKE's zonal groups scaling up, unhealthy and in backoff -> their scale-up and health as written",
			text: readStatus(t, "cluster-autoscaler-status-scaleup.yaml"),
			want: &autoscale.ClusterAutoscalerStatus{NodeGroups: []autoscale.NodeGroupSize{
				{Name: migURL("europe-west1-b", "gke-prod-web-1a2b3c4d-grp"), Target: 3, Min: 0, Max: 5, Health: autoscale.HealthHealthy, ScaleUp: autoscale.ScaleUpInProgress},
				{Name: migURL("europe-west1-c", "gke-prod-web-5e6f7a8b-grp"), Target: 2, Min: 0, Max: 5, Health: autoscale.HealthHealthy, ScaleUp: autoscale.ScaleUpBackoff,
					Backoff: autoscale.Backoff{ErrorCode: "ZONE_RESOURCE_POOL_EXHAUSTED", ErrorMessage: "The zone 'projects/prod/zones/europe-west1-c' does not have enough resources available to fulfill the request."}},
				{Name: migURL("europe-west1-d", "gke-prod-web-9c0d1e2f-grp"), Target: 2, Min: 0, Max: 5, Health: autoscale.HealthUnhealthy, ScaleUp: autoscale.ScaleUpNoActivity},
			}},
		},
		{
			name: "the status cluster-autoscaler writes while it initializes -> no node group",
			text: "time: \"2026-11-24 04:28:19.546750398 +0000 UTC\"\nautoscalerStatus: Initializing\n",
			want: &autoscale.ClusterAutoscalerStatus{},
		},
		{
			name:    "the plain-text status of cluster-autoscaler before 1.30 -> recognized, not read",
			text:    readStatus(t, "cluster-autoscaler-status-legacy.txt"),
			wantErr: autoscale.ErrLegacyClusterAutoscalerStatus.Error(),
		},
		{
			name:    "a YAML document without autoscalerStatus -> an error naming it",
			text:    "nodeGroups: []\n",
			wantErr: "no autoscalerStatus",
		},
		{
			name:    "a node group without maxSize -> an error naming the group",
			text:    "autoscalerStatus: Running\nnodeGroups:\n- name: ng-1\n  health: {cloudProviderTarget: 1, minSize: 0}\n",
			wantErr: "node group ng-1 lacks health.cloudProviderTarget, minSize or maxSize",
		},
		{
			name:    "a node group without a name -> an error naming its position",
			text:    "autoscalerStatus: Running\nnodeGroups:\n- health: {cloudProviderTarget: 1, minSize: 0, maxSize: 3}\n",
			wantErr: "nodeGroups[0] has no name",
		},
		{
			name:    "text that is not YAML -> a parse error",
			text:    "autoscalerStatus: [Running\n",
			wantErr: "parsing cluster-autoscaler's status",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := autoscale.ParseClusterAutoscalerStatus(tt.text)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error = %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("parsing: %v", err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("status (-want +got):\n%s", diff)
			}
		})
	}
	if _, err := autoscale.ParseClusterAutoscalerStatus(readStatus(t, "cluster-autoscaler-status-legacy.txt")); !errors.Is(err, autoscale.ErrLegacyClusterAutoscalerStatus) {
		t.Errorf("the legacy format gives %v, want ErrLegacyClusterAutoscalerStatus to test for", err)
	}
}

// groupNode is a node of group in zone z.
func groupNode(name, label, group, z string) *v1.Node {
	return spreadtest.MakeNode().Name(name).Zone(z).Label(label, group).Obj()
}

func TestClusterAutoscalersStatusRemovesFullGroupsAndNamesTheOnesScaledToZero(t *testing.T) {
	const (
		gkeLabel = "cloud.google.com/gke-nodepool"
		aksLabel = "kubernetes.azure.com/agentpool"
	)
	gkeMIG := func(zone, name string) string {
		return "https://www.googleapis.com/compute/v1/projects/prod/zones/" + zone + "/instanceGroups/" + name
	}
	eksWeb := "eks-web-7ec2a5b4-1d5e-4d5a-b3b0-2c6a1b4c9f70"
	eksGPU := "eks-gpu-5a6b7c8d-9e0f-4a1b-8c2d-3e4f5a6b7c8d"
	nodeTemplate := func(name string, kv ...string) v1alpha1.NodeTemplate {
		return v1alpha1.NodeTemplate{
			TypeMeta:   metav1.TypeMeta{APIVersion: "spreadguard.io/v1alpha1", Kind: "NodeTemplate"},
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec:       v1alpha1.NodeTemplateSpec{Labels: labels(kv...)},
		}
	}
	tests := []struct {
		name     string
		label    string
		nodes    []*v1.Node
		declared []autoscale.Declared
		status   *autoscale.ClusterAutoscalerStatus
		// want are the template names.
		want     []string
		wantFull []string
		wantZero []autoscale.ScaledToZero
	}{
		{
			name:  "no ConfigMap, an EKS group at its maximum -> its templates stay, as before",
			label: groupLabel,
			nodes: []*v1.Node{groupNode("w1", groupLabel, "web", "a"), groupNode("w2", groupLabel, "web", "b")},
			want:  []string{"nodegroup/web/a", "nodegroup/web/b"},
		},
		{
			name:     "EKS group web at 6 of max 6 -> no template in either zone; batch at 1 of 10 keeps its own",
			label:    groupLabel,
			nodes:    []*v1.Node{groupNode("w1", groupLabel, "web", "a"), groupNode("w2", groupLabel, "web", "b"), groupNode("b1", groupLabel, "batch", "a")},
			status:   &autoscale.ClusterAutoscalerStatus{NodeGroups: []autoscale.NodeGroupSize{{Name: eksWeb, Target: 6, Min: 2, Max: 6}, {Name: "eks-batch-0b1c2d3e-4f50-6172-8394-a5b6c7d8e9f0", Target: 1, Max: 10}}},
			want:     []string{"nodegroup/batch/a"},
			wantFull: []string{eksWeb},
		},
		{
			name:  "GKE node pool web with a MIG per zone, zone a's at max and zone b's below -> only the template in b",
			label: gkeLabel,
			nodes: []*v1.Node{groupNode("w1", gkeLabel, "web", "europe-west1-b"), groupNode("w2", gkeLabel, "web", "europe-west1-c")},
			status: &autoscale.ClusterAutoscalerStatus{NodeGroups: []autoscale.NodeGroupSize{
				{Name: gkeMIG("europe-west1-b", "gke-prod-eu-web-1a2b3c4d-grp"), Target: 3, Max: 3},
				{Name: gkeMIG("europe-west1-c", "gke-prod-eu-web-5e6f7a8b-grp"), Target: 1, Max: 3},
			}},
			want:     []string{"nodegroup/web/europe-west1-c"},
			wantFull: []string{gkeMIG("europe-west1-b", "gke-prod-eu-web-1a2b3c4d-grp")},
		},
		{
			name:   "AKS agent pool user1 at 2 of max 5 -> its template stays",
			label:  aksLabel,
			nodes:  []*v1.Node{groupNode("u1", aksLabel, "user1", "westeurope-1")},
			status: &autoscale.ClusterAutoscalerStatus{NodeGroups: []autoscale.NodeGroupSize{{Name: "aks-user1-12345678-vmss", Target: 2, Min: 1, Max: 5}}},
			want:   []string{"nodegroup/user1/westeurope-1"},
		},
		{
			name:     "a group whose label value is the status name itself (an ASG named ng-1), at max -> no template",
			label:    groupLabel,
			nodes:    []*v1.Node{groupNode("n1", groupLabel, "ng-1", "a")},
			status:   &autoscale.ClusterAutoscalerStatus{NodeGroups: []autoscale.NodeGroupSize{{Name: "ng-1", Target: 3, Max: 3}}},
			wantFull: []string{"ng-1"},
		},
		{
			name:   "a node group the status does not name, whatever its size -> its template stays",
			label:  groupLabel,
			nodes:  []*v1.Node{groupNode("n1", groupLabel, "self-managed", "a")},
			status: &autoscale.ClusterAutoscalerStatus{NodeGroups: []autoscale.NodeGroupSize{{Name: eksWeb, Target: 6, Max: 6}}},
			want:   []string{"nodegroup/self-managed/a"},
		},
		{
			name:   "EKS group gpu at 0 of max 4 that no node shows -> reported, with the NodeTemplate carrying its group label",
			label:  groupLabel,
			nodes:  []*v1.Node{groupNode("w1", groupLabel, "web", "a")},
			status: &autoscale.ClusterAutoscalerStatus{NodeGroups: []autoscale.NodeGroupSize{{Name: eksGPU, Target: 0, Max: 4}}},
			want:   []string{"nodegroup/web/a"},
			wantZero: []autoscale.ScaledToZero{{
				Group:        autoscale.NodeGroupSize{Name: eksGPU, Max: 4},
				NodeTemplate: nodeTemplate("gpu", groupLabel, "gpu"),
			}},
		},
		{
			name:  "a GKE MIG at 0 of max 2 in zone europe-west1-d that no node shows -> reported, with the NodeTemplate carrying its zone",
			label: gkeLabel,
			status: &autoscale.ClusterAutoscalerStatus{NodeGroups: []autoscale.NodeGroupSize{
				{Name: gkeMIG("europe-west1-d", "gke-prod-eu-gpu-9a8b7c6d-grp"), Target: 0, Max: 2},
			}},
			wantZero: []autoscale.ScaledToZero{{
				Group:        autoscale.NodeGroupSize{Name: gkeMIG("europe-west1-d", "gke-prod-eu-gpu-9a8b7c6d-grp"), Max: 2},
				NodeTemplate: nodeTemplate("gke-prod-eu-gpu-9a8b7c6d-grp", zone, "europe-west1-d"),
			}},
		},
		{
			name:     "EKS group gpu at 0 that a NodeTemplate with its group label already declares -> not reported",
			label:    groupLabel,
			declared: []autoscale.Declared{{Name: "gpu-nodes", Labels: labels(groupLabel, "gpu", zone, "a")}},
			status:   &autoscale.ClusterAutoscalerStatus{NodeGroups: []autoscale.NodeGroupSize{{Name: eksGPU, Target: 0, Max: 4}}},
			want:     []string{"gpu-nodes"},
		},
		{
			name:   "a group at 0 of max 0 -> not reported: it cannot grow",
			label:  groupLabel,
			status: &autoscale.ClusterAutoscalerStatus{NodeGroups: []autoscale.NodeGroupSize{{Name: eksGPU, Target: 0, Max: 0}}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := autoscale.Derive(autoscale.Inputs{Nodes: tt.nodes, Declared: tt.declared, NodeGroupLabel: tt.label, ClusterAutoscaler: tt.status})
			if diff := cmp.Diff(tt.want, names(got.Templates)); diff != "" {
				t.Errorf("template names (-want +got):\n%s", diff)
			}
			var full []string
			for _, g := range got.FullGroups {
				full = append(full, g.Name)
			}
			if diff := cmp.Diff(tt.wantFull, full); diff != "" {
				t.Errorf("full groups (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.wantZero, got.ScaledToZero); diff != "" {
				t.Errorf("groups scaled to zero (-want +got):\n%s", diff)
			}
		})
	}
}

func TestTheMessageOfAGroupScaledToZeroNamesTheNodeTemplateToDeclare(t *testing.T) {
	z := autoscale.ScaledToZero{
		Group:        autoscale.NodeGroupSize{Name: "eks-gpu-5a6b7c8d-9e0f-4a1b-8c2d-3e4f5a6b7c8d", Max: 4},
		NodeTemplate: v1alpha1.NodeTemplate{ObjectMeta: metav1.ObjectMeta{Name: "gpu"}},
	}
	want := "cluster-autoscaler's node group eks-gpu-5a6b7c8d-9e0f-4a1b-8c2d-3e4f5a6b7c8d is scaled to 0 (min 0, max 4) and no node shows its shape, " +
		"so no template stands for the nodes it can add. Remedy: declare NodeTemplate gpu with the labels and taints of its nodes."
	if diff := cmp.Diff(want, z.Message()); diff != "" {
		t.Errorf("message (-want +got):\n%s", diff)
	}
}

func TestFindingsListEveryFindingInOrderWithItsRemedy(t *testing.T) {
	unserved := autoscale.UnservedZones{NodePool: "web", Zones: []string{"eu-west-1c"}, Served: []string{"eu-west-1a", "eu-west-1b"}}
	unserved.NodeClass.Kind, unserved.NodeClass.Name = "EC2NodeClass", "default"
	full := autoscale.NodeGroupSize{Name: "eks-web-7ec2a5b4", Target: 4, Min: 2, Max: 4}
	zero := autoscale.ScaledToZero{Group: autoscale.NodeGroupSize{Name: "eks-gpu-5a6b", Max: 4},
		NodeTemplate: v1alpha1.NodeTemplate{ObjectMeta: metav1.ObjectMeta{Name: "gpu"}}}
	tests := []struct {
		name string
		d    autoscale.Derived
		want []string
	}{
		{name: "nothing found -> no finding", d: autoscale.Derived{}},
		{
			name: "one group at its maximum -> its size, what it means and the remedy",
			d:    autoscale.Derived{FullGroups: []autoscale.NodeGroupSize{full}},
			want: []string{"cluster-autoscaler's node group eks-web-7ec2a5b4 is at its maximum size (4 of max 4), so it adds no node and a pod only a new node of it could take is refused. Remedy: raise the group's maximum size."},
		},
		{
			name: "a NodePool's unserved zone, a full group and a group at zero -> in that order",
			d: autoscale.Derived{UnservedZones: []autoscale.UnservedZones{unserved}, FullGroups: []autoscale.NodeGroupSize{full},
				ScaledToZero: []autoscale.ScaledToZero{zero}},
			want: []string{unserved.Message(), full.Message(), zero.Message()},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, tt.d.Findings()); diff != "" {
				t.Errorf("Findings() (-want +got):\n%s", diff)
			}
		})
	}
}

func TestANodeGroupWhoseNodesCarryNoZoneTakesTheListedZones(t *testing.T) {
	tests := []struct {
		name  string
		nodes []*v1.Node
		zones []string
		want  []string
	}{
		{
			name:  "nodes without a zone, no list -> one template without a zone, as before",
			nodes: []*v1.Node{spreadtest.MakeNode().Name("n1").Label(groupLabel, "ng-1").Obj()},
			want:  []string{"nodegroup/ng-1/"},
		},
		{
			name:  "nodes without a zone, the list a, b -> a template in each",
			nodes: []*v1.Node{spreadtest.MakeNode().Name("n1").Label(groupLabel, "ng-1").Obj()},
			zones: []string{"b", "a"},
			want:  []string{"nodegroup/ng-1/a", "nodegroup/ng-1/b"},
		},
		{
			name:  "a node in zone a, the list a, b, c -> only a: the nodes say where the group is",
			nodes: []*v1.Node{groupNode("n1", groupLabel, "ng-1", "a")},
			zones: []string{"a", "b", "c"},
			want:  []string{"nodegroup/ng-1/a"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := autoscale.Templates(autoscale.Inputs{Nodes: tt.nodes, NodeGroupLabel: groupLabel, Zones: tt.zones})
			if diff := cmp.Diff(tt.want, names(got)); diff != "" {
				t.Errorf("template names (-want +got):\n%s", diff)
			}
			for _, tm := range got {
				if z := strings.TrimPrefix(tm.Name, "nodegroup/ng-1/"); tm.Labels[zone] != z && z != "" {
					t.Errorf("%s has zone label %q, want %q", tm.Name, tm.Labels[zone], z)
				}
			}
		})
	}
}

func TestAGKENodePoolsMIGInAZoneWithoutNodesYieldsATemplateThere(t *testing.T) {
	const gkeLabel = "cloud.google.com/gke-nodepool"
	mig := func(zone, name string) string {
		return "https://www.googleapis.com/compute/v1/projects/prod-1234/zones/" + zone + "/instanceGroups/" + name
	}
	webB, webC := mig("us-central1-b", "gke-prod-web-1a2b3c4d-grp"), mig("us-central1-c", "gke-prod-web-5e6f7a8b-grp")
	webD, gpuA := mig("us-central1-d", "gke-prod-web-9c0d1e2f-grp"), mig("us-central1-a", "gke-prod-gpu-3b4c5d6e-grp")
	// gkeNode is a node of GKE node pool web in zone z, labelled as GKE
	// labels its nodes.
	gkeNode := func(name, z string) *v1.Node {
		return spreadtest.MakeNode().Name(name).Zone(z).Region("us-central1").
			Label(gkeLabel, "web").Label("topology.gke.io/zone", z).Label(v1.LabelFailureDomainBetaZone, z).
			Label(v1.LabelInstanceTypeStable, "e2-standard-4").Obj()
	}
	// webIn is the template of pool web in zone z, as its nodes give it.
	webIn := func(z string) spread.Template {
		return spread.Template{Name: "nodegroup/web/" + z, Source: "node group web", Labels: labels(
			gkeLabel, "web", zone, z, "topology.gke.io/zone", z, v1.LabelFailureDomainBetaZone, z,
			v1.LabelTopologyRegion, "us-central1", v1.LabelInstanceTypeStable, "e2-standard-4")}
	}
	gpuZero := autoscale.ScaledToZero{
		Group: autoscale.NodeGroupSize{Name: gpuA, Max: 2, Health: autoscale.HealthHealthy, ScaleUp: autoscale.ScaleUpNoActivity},
		NodeTemplate: v1alpha1.NodeTemplate{
			TypeMeta:   metav1.TypeMeta{APIVersion: "spreadguard.io/v1alpha1", Kind: "NodeTemplate"},
			ObjectMeta: metav1.ObjectMeta{Name: "gke-prod-gpu-3b4c5d6e-grp"},
			Spec:       v1alpha1.NodeTemplateSpec{Labels: labels(zone, "us-central1-a")},
		},
	}
	nodes := []*v1.Node{gkeNode("web-b", "us-central1-b"), gkeNode("web-c", "us-central1-c")}
	// The status of cluster-autoscaler 1.30+ on that cluster: web's MIGs in
	// b (2 of 3), c (1 of 3) and d (0 of 3), gpu's in a (0 of 2).
	status, err := autoscale.ParseClusterAutoscalerStatus(readStatus(t, "cluster-autoscaler-status-gke.yaml"))
	if err != nil {
		t.Fatalf("parsing the status: %v", err)
	}
	sized := func(name string, target, maxSize int) *autoscale.ClusterAutoscalerStatus {
		s := &autoscale.ClusterAutoscalerStatus{NodeGroups: slices.Clone(status.NodeGroups)}
		for i := range s.NodeGroups {
			if s.NodeGroups[i].Name == name {
				s.NodeGroups[i].Target, s.NodeGroups[i].Max = target, maxSize
			}
		}
		return s
	}
	tests := []struct {
		name     string
		nodes    []*v1.Node
		status   *autoscale.ClusterAutoscalerStatus
		want     []spread.Template
		wantFull []string
		wantZero []autoscale.ScaledToZero
	}{
		{
			name:     "web has nodes in b and c, its MIG in d is at 0 of 3 -> a template in d from web's labels; only gpu, which no node shows, is reported at 0",
			nodes:    nodes,
			status:   status,
			want:     []spread.Template{webIn("us-central1-b"), webIn("us-central1-c"), webIn("us-central1-d")},
			wantZero: []autoscale.ScaledToZero{gpuZero},
		},
		{
			name:  "the status names only web's MIG in d, gke-c-web-abc-grp at 0 of 3 -> web keeps b and c and gets d",
			nodes: nodes,
			status: &autoscale.ClusterAutoscalerStatus{NodeGroups: []autoscale.NodeGroupSize{
				{Name: "https://www.googleapis.com/compute/v1/projects/P/zones/us-central1-d/instanceGroups/gke-c-web-abc-grp", Max: 3},
			}},
			want: []spread.Template{webIn("us-central1-b"), webIn("us-central1-c"), webIn("us-central1-d")},
		},
		{
			name:     "web's MIG in d at 0 of max 0 -> no template in d: it cannot grow",
			nodes:    nodes,
			status:   sized(webD, 0, 0),
			want:     []spread.Template{webIn("us-central1-b"), webIn("us-central1-c")},
			wantZero: []autoscale.ScaledToZero{gpuZero},
		},
		{
			name:     "web's MIG in b at 3 of 3 -> no template in b, and d still takes the shape of web's nodes",
			nodes:    nodes,
			status:   sized(webB, 3, 3),
			want:     []spread.Template{webIn("us-central1-c"), webIn("us-central1-d")},
			wantFull: []string{webB},
			wantZero: []autoscale.ScaledToZero{gpuZero},
		},
		{
			name:     "web's MIG in d at 1 of 3 whose node has not registered -> a template in d",
			nodes:    nodes,
			status:   sized(webD, 1, 3),
			want:     []spread.Template{webIn("us-central1-b"), webIn("us-central1-c"), webIn("us-central1-d")},
			wantZero: []autoscale.ScaledToZero{gpuZero},
		},
		{
			name:   "no node of web at all -> no template; web's MIGs at 0 are reported with the zone to declare",
			status: sized(webC, 0, 3),
			wantZero: []autoscale.ScaledToZero{
				gpuZero,
				{Group: autoscale.NodeGroupSize{Name: webC, Max: 3, Min: 1, Health: autoscale.HealthHealthy, ScaleUp: autoscale.ScaleUpNoActivity}, NodeTemplate: v1alpha1.NodeTemplate{
					TypeMeta: gpuZero.NodeTemplate.TypeMeta, ObjectMeta: metav1.ObjectMeta{Name: "gke-prod-web-5e6f7a8b-grp"},
					Spec: v1alpha1.NodeTemplateSpec{Labels: labels(zone, "us-central1-c")}}},
				{Group: autoscale.NodeGroupSize{Name: webD, Max: 3, Health: autoscale.HealthHealthy, ScaleUp: autoscale.ScaleUpNoActivity}, NodeTemplate: v1alpha1.NodeTemplate{
					TypeMeta: gpuZero.NodeTemplate.TypeMeta, ObjectMeta: metav1.ObjectMeta{Name: "gke-prod-web-9c0d1e2f-grp"},
					Spec: v1alpha1.NodeTemplateSpec{Labels: labels(zone, "us-central1-d")}}},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := autoscale.Derive(autoscale.Inputs{Nodes: tt.nodes, NodeGroupLabel: gkeLabel, ClusterAutoscaler: tt.status})
			if diff := cmp.Diff(tt.want, got.Templates); diff != "" {
				t.Errorf("templates (-want +got):\n%s", diff)
			}
			var full []string
			for _, g := range got.FullGroups {
				full = append(full, g.Name)
			}
			if diff := cmp.Diff(tt.wantFull, full); diff != "" {
				t.Errorf("full groups (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.wantZero, got.ScaledToZero); diff != "" {
				t.Errorf("groups scaled to zero (-want +got):\n%s", diff)
			}
		})
	}
}
