package lookup_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	crcache "sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	karpenterv1 "github.com/spreadguard/spreadguard/pkg/apis/karpenter/v1"
	nodeclassv1 "github.com/spreadguard/spreadguard/pkg/apis/nodeclass/v1"
	"github.com/spreadguard/spreadguard/pkg/autoscale"
	"github.com/spreadguard/spreadguard/pkg/lookup"
)

// zonelessPool is a cluster file with nodes in zones a and b, a NodePool
// without a zone requirement on the EC2NodeClass default, and that
// EC2NodeClass as `kubectl get -o yaml` prints it, its subnets in a, b and
// c.
const zonelessPool = `
apiVersion: v1
kind: Node
metadata: {name: node-a, labels: {topology.kubernetes.io/zone: a}}
---
apiVersion: v1
kind: Node
metadata: {name: node-b, labels: {topology.kubernetes.io/zone: b}}
---
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: default}
spec:
  disruption: {consolidationPolicy: WhenEmptyOrUnderutilized, consolidateAfter: 1m}
  template:
    spec:
      expireAfter: 720h
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
      requirements:
      - {key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}
---
apiVersion: karpenter.k8s.aws/v1
kind: EC2NodeClass
metadata: {name: default}
spec:
  role: KarpenterNodeRole-prod
  amiSelectorTerms: [{alias: al2023@latest}]
  subnetSelectorTerms: [{tags: {karpenter.sh/discovery: prod}}]
  securityGroupSelectorTerms: [{tags: {karpenter.sh/discovery: prod}}]
status:
  subnets:
  - {id: subnet-1, zone: a, zoneID: usw2-az1}
  - {id: subnet-2, zone: b, zoneID: usw2-az2}
  - {id: subnet-3, zone: c, zoneID: usw2-az3}
`

// withoutNodeClass is zonelessPool without its EC2NodeClass.
var withoutNodeClass = zonelessPool[:strings.LastIndex(zonelessPool, "---")]

// notCaching answers as the webhook's cache does for a kind it has no
// informer for.
type notCaching struct {
	client.Reader
	gvk schema.GroupVersionKind
}

func (r notCaching) List(ctx context.Context, l client.ObjectList, opts ...client.ListOption) error {
	if _, ok := l.(*nodeclassv1.EC2NodeClassList); ok {
		return &crcache.ErrResourceNotCached{GVK: r.gvk}
	}
	return r.Reader.List(ctx, l, opts...)
}

func TestDeriveResolvesANodePoolsZonesFromTheClusterFile(t *testing.T) {
	ec2 := nodeclassv1.EC2GroupVersion.WithKind(nodeclassv1.KindEC2NodeClass)
	tests := []struct {
		name    string
		file    string
		opts    lookup.TemplateOptions
		reader  func(client.Reader) client.Reader
		want    []string
		wantErr string
	}{
		{
			name: "a NodePool without a zone requirement and its EC2NodeClass in a, b, c -> a template in each zone",
			file: zonelessPool,
			opts: lookup.TemplateOptions{Karpenter: true},
			want: []string{"nodepool/default/a,on-demand", "nodepool/default/b,on-demand", "nodepool/default/c,on-demand"},
		},
		{
			name: "the same without the EC2NodeClass, the zones a, d listed -> the list",
			file: withoutNodeClass,
			opts: lookup.TemplateOptions{Karpenter: true, Zones: []string{"a", "d"}},
			want: []string{"nodepool/default/a,on-demand", "nodepool/default/d,on-demand"},
		},
		{
			name: "the same with neither -> the zones of the nodes",
			file: withoutNodeClass,
			opts: lookup.TemplateOptions{Karpenter: true},
			want: []string{"nodepool/default/a,on-demand", "nodepool/default/b,on-demand"},
		},
		{
			name:   "a cache that does not watch EC2NodeClasses, as where their API is not served -> no error, the nodes' zones",
			file:   zonelessPool,
			opts:   lookup.TemplateOptions{Karpenter: true},
			reader: func(r client.Reader) client.Reader { return notCaching{r, ec2} },
			want:   []string{"nodepool/default/a,on-demand", "nodepool/default/b,on-demand"},
		},
		{
			name: "Karpenter not read -> neither NodePools nor node classes",
			file: zonelessPool,
			opts: lookup.TemplateOptions{},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			store, err := lookup.Decode("cluster.yaml", strings.NewReader(tt.file))
			if err != nil {
				t.Fatalf("decoding: %v", err)
			}
			var r client.Reader = store
			if tt.reader != nil {
				r = tt.reader(store)
			}
			d, err := lookup.Derive(t.Context(), r, tt.opts)
			if err != nil {
				t.Fatalf("Derive: %v", err)
			}
			var got []string
			for _, tm := range d.Templates {
				got = append(got, tm.Name)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("template names (-want +got):\n%s", diff)
			}
		})
	}
}

func TestDeriveReportsAZoneANodePoolRequiresAndItsNodeClassDoesNotServe(t *testing.T) {
	file := strings.Replace(zonelessPool, "      - {key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}",
		"      - {key: topology.kubernetes.io/zone, operator: In, values: [a, z]}", 1)
	store, err := lookup.Decode("cluster.yaml", strings.NewReader(file))
	if err != nil {
		t.Fatalf("decoding: %v", err)
	}
	d, err := lookup.Derive(t.Context(), store, lookup.TemplateOptions{Karpenter: true})
	if err != nil {
		t.Fatalf("Derive: %v", err)
	}
	want := []autoscale.UnservedZones{{
		NodePool:  "default",
		NodeClass: karpenterv1.NodeClassReference{Group: "karpenter.k8s.aws", Kind: "EC2NodeClass", Name: "default"},
		Zones:     []string{"z"}, Served: []string{"a", "b", "c"},
	}}
	if diff := cmp.Diff(want, d.UnservedZones); diff != "" {
		t.Errorf("unserved zones (-want +got):\n%s", diff)
	}
}

func TestDeriveResolvesAZoneIDRequirementWithTheEC2NodeClassesZoneIDs(t *testing.T) {
	// place is what a template says of where its node comes up.
	type place struct{ Zone, ZoneID string }
	tests := []struct {
		name        string
		requirement string
		want        map[string]place
	}{
		{
			name:        "zone-id In usw2-az1, subnets in a (usw2-az1), b and c -> only a, labelled with both",
			requirement: "{key: topology.k8s.aws/zone-id, operator: In, values: [usw2-az1]}",
			want:        map[string]place{"nodepool/default/a": {"a", "usw2-az1"}},
		},
		{
			name:        "zone-id NotIn usw2-az1 -> b and c, each with its own zone ID",
			requirement: "{key: topology.k8s.aws/zone-id, operator: NotIn, values: [usw2-az1]}",
			want:        map[string]place{"nodepool/default/b": {"b", "usw2-az2"}, "nodepool/default/c": {"c", "usw2-az3"}},
		},
		{
			name:        "zone In a, b and zone-id In usw2-az2 -> only b",
			requirement: "{key: topology.kubernetes.io/zone, operator: In, values: [a, b]}\n      - {key: topology.k8s.aws/zone-id, operator: In, values: [usw2-az2]}",
			want:        map[string]place{"nodepool/default/b": {"b", "usw2-az2"}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			file := strings.Replace(zonelessPool, "{key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}", tt.requirement, 1)
			store, err := lookup.Decode("cluster.yaml", strings.NewReader(file))
			if err != nil {
				t.Fatalf("decoding: %v", err)
			}
			d, err := lookup.Derive(t.Context(), store, lookup.TemplateOptions{Karpenter: true})
			if err != nil {
				t.Fatalf("Derive: %v", err)
			}
			got := map[string]place{}
			for _, tm := range d.Templates {
				got[tm.Name] = place{tm.Labels["topology.kubernetes.io/zone"], tm.Labels["topology.k8s.aws/zone-id"]}
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("templates' zone and zone ID (-want +got):\n%s", diff)
			}
		})
	}
}

// nodeGroups is a cluster file with two nodes of EKS managed node groups,
// web in zone a and batch in zone b, and, after it, cluster-autoscaler's
// status ConfigMap as `kubectl get -o yaml` prints it, holding status.
func nodeGroups(status string) string {
	file := `
apiVersion: v1
kind: Node
metadata: {name: web-a, labels: {topology.kubernetes.io/zone: a, eks.amazonaws.com/nodegroup: web}}
---
apiVersion: v1
kind: Node
metadata: {name: batch-b, labels: {topology.kubernetes.io/zone: b, eks.amazonaws.com/nodegroup: batch}}
`
	if status == "" {
		return file
	}
	indented := "    " + strings.ReplaceAll(strings.TrimSpace(status), "\n", "\n    ")
	return file + `---
apiVersion: v1
kind: ConfigMap
metadata:
  name: cluster-autoscaler-status
  namespace: kube-system
  annotations: {cluster-autoscaler.kubernetes.io/last-updated: "2026-11-24 04:28:19.546750398 +0000 UTC"}
data:
  status: |
` + indented + "\n"
}

// webFull is the status of cluster-autoscaler 1.30 and later with the
// managed node group web at its maximum and batch with room.
const webFull = `
time: "2026-11-24 04:28:19.546750398 +0000 UTC"
autoscalerStatus: "Running"
nodeGroups:
- name: "eks-web-7ec2a5b4-1d5e-4d5a-b3b0-2c6a1b4c9f70"
  health: {status: "Healthy", cloudProviderTarget: 6, minSize: 2, maxSize: 6}
- name: "eks-batch-0b1c2d3e-4f50-6172-8394-a5b6c7d8e9f0"
  health: {status: "Healthy", cloudProviderTarget: 1, minSize: 0, maxSize: 10}
`

func TestDeriveReadsClusterAutoscalersStatusFromTheClusterFile(t *testing.T) {
	status := types.NamespacedName{Namespace: "kube-system", Name: "cluster-autoscaler-status"}
	both := []string{"nodegroup/batch/b", "nodegroup/web/a"}
	tests := []struct {
		name     string
		file     string
		key      types.NamespacedName
		want     []string
		wantFull []string
		wantErr  error
	}{
		{
			name: "web at its maximum in the status -> web yields no template, and is listed full",
			file: nodeGroups(webFull), key: status,
			want: []string{"nodegroup/batch/b"}, wantFull: []string{"eks-web-7ec2a5b4-1d5e-4d5a-b3b0-2c6a1b4c9f70"},
		},
		{
			name: "no ConfigMap -> every group can grow, as before",
			file: nodeGroups(""), key: status,
			want: both,
		},
		{
			name: "the status not asked for -> not read",
			file: nodeGroups(webFull),
			want: both,
		},
		{
			name: "the status asked for under another name -> not read",
			file: nodeGroups(webFull), key: types.NamespacedName{Namespace: "kube-system", Name: "ca-status"},
			want: both,
		},
		{
			name: "the plain text of cluster-autoscaler 1.29 -> every group can grow, and the legacy format said",
			file: nodeGroups("Cluster-autoscaler status at 2023-09-14 08:13:52.118283426 +0000 UTC:\nCluster-wide:\n  Health: Healthy"), key: status,
			want: both, wantErr: autoscale.ErrLegacyClusterAutoscalerStatus,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			store, err := lookup.Decode("cluster.yaml", strings.NewReader(tt.file))
			if err != nil {
				t.Fatalf("decoding: %v", err)
			}
			d, err := lookup.Derive(t.Context(), store, lookup.TemplateOptions{NodeGroupLabel: "eks.amazonaws.com/nodegroup", ClusterAutoscalerStatus: tt.key})
			if err != nil {
				t.Fatalf("Derive: %v", err)
			}
			var got, gotFull []string
			for _, tm := range d.Templates {
				got = append(got, tm.Name)
			}
			for _, g := range d.FullGroups {
				gotFull = append(gotFull, g.Name)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("template names (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.wantFull, gotFull); diff != "" {
				t.Errorf("full groups (-want +got):\n%s", diff)
			}
			if !errors.Is(d.ClusterAutoscalerStatusErr, tt.wantErr) || (tt.wantErr == nil) != (d.ClusterAutoscalerStatusErr == nil) {
				t.Errorf("ClusterAutoscalerStatusErr = %v, want %v", d.ClusterAutoscalerStatusErr, tt.wantErr)
			}
		})
	}
}

func TestDeriveSaysWhatIsWrongWithAStatusItCannotRead(t *testing.T) {
	store, err := lookup.Decode("cluster.yaml", strings.NewReader(nodeGroups("autoscalerStatus: Running\nnodeGroups:\n- name: eks-web-7ec2a5b4-1d5e-4d5a-b3b0-2c6a1b4c9f70\n  health: {minSize: 2}")))
	if err != nil {
		t.Fatalf("decoding: %v", err)
	}
	d, err := lookup.Derive(t.Context(), store, lookup.TemplateOptions{NodeGroupLabel: "eks.amazonaws.com/nodegroup",
		ClusterAutoscalerStatus: types.NamespacedName{Namespace: "kube-system", Name: "cluster-autoscaler-status"}})
	if err != nil {
		t.Fatalf("Derive: %v", err)
	}
	const want = "ConfigMap kube-system/cluster-autoscaler-status not read: parsing cluster-autoscaler's status: " +
		"node group eks-web-7ec2a5b4-1d5e-4d5a-b3b0-2c6a1b4c9f70 lacks health.cloudProviderTarget, minSize or maxSize"
	if got := errString(d.ClusterAutoscalerStatusErr); got != want {
		t.Errorf("ClusterAutoscalerStatusErr = %q, want %q", got, want)
	}
	if len(d.Templates) != 2 {
		t.Errorf("%d templates, want both node groups': an unreadable status is no status", len(d.Templates))
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
