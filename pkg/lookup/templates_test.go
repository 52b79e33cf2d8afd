package lookup_test

import (
	"context"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/runtime/schema"
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
