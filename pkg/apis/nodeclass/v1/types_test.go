package v1_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"

	nodeclassv1 "github.com/spreadguard/spreadguard/pkg/apis/nodeclass/v1"
)

// ec2NodeClassYAML is an EC2NodeClass as `kubectl get ec2nodeclass default
// -o yaml` prints it once Karpenter v1.15 resolved its selectors: two
// subnets in us-west-2a, one in us-west-2c, and every other field the
// mirror leaves out.
const ec2NodeClassYAML = `
apiVersion: karpenter.k8s.aws/v1
kind: EC2NodeClass
metadata:
  name: default
  generation: 2
  annotations:
    karpenter.k8s.aws/ec2nodeclass-hash: "4519519519874658523"
    karpenter.k8s.aws/ec2nodeclass-hash-version: v4
  finalizers:
  - karpenter.k8s.aws/termination
spec:
  role: KarpenterNodeRole-prod
  amiSelectorTerms:
  - alias: al2023@latest
  subnetSelectorTerms:
  - tags:
      karpenter.sh/discovery: prod
  securityGroupSelectorTerms:
  - tags:
      karpenter.sh/discovery: prod
  metadataOptions:
    httpEndpoint: enabled
    httpPutResponseHopLimit: 1
    httpTokens: required
status:
  instanceProfile: prod_1234567890
  subnets:
  - id: subnet-0a1b2c3d4e5f60001
    zone: us-west-2a
    zoneID: usw2-az1
  - id: subnet-0a1b2c3d4e5f60002
    zone: us-west-2c
    zoneID: usw2-az3
  - id: subnet-0a1b2c3d4e5f60003
    zone: us-west-2a
    zoneID: usw2-az1
  securityGroups:
  - id: sg-0123456789abcdef0
    name: eks-cluster-sg-prod
  amis:
  - id: ami-0123456789abcdef0
    name: amazon-eks-node-al2023-x86_64-standard-1.33-v20260901
    requirements:
    - key: kubernetes.io/arch
      operator: In
      values: [amd64]
  conditions:
  - type: Ready
    status: "True"
    reason: Ready
    message: ""
    lastTransitionTime: "2026-11-01T10:00:00Z"
    observedGeneration: 2
`

// nodeClassYAML is EKS Auto Mode's default NodeClass with the resolved
// subnets in its status.
const nodeClassYAML = `
apiVersion: eks.amazonaws.com/v1
kind: NodeClass
metadata:
  name: default
  annotations:
    eks.amazonaws.com/nodeclass-hash: "495408067366721138"
    eks.amazonaws.com/nodeclass-hash-version: v2
  labels:
    app.kubernetes.io/managed-by: eks
spec:
  role: eks-auto-node
  networkPolicy: DefaultAllow
  subnetSelectorTerms:
  - id: subnet-096bfe6623a87be3f
  - id: subnet-09e84ab4eee5d16bb
status:
  subnets:
  - id: subnet-096bfe6623a87be3f
    zone: eu-west-1b
    zoneID: euw1-az1
  - id: subnet-09e84ab4eee5d16bb
    zone: eu-west-1a
    zoneID: euw1-az3
`

func TestADecodedNodeClassKeepsItsSubnetsZonesAndZoneIDs(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := nodeclassv1.AddToScheme(scheme); err != nil {
		t.Fatalf("adding the node classes to a scheme: %v", err)
	}
	decoder := serializer.NewCodecFactory(scheme).UniversalDeserializer()
	tests := []struct {
		name      string
		yaml      string
		wantGVK   schema.GroupVersionKind
		want      runtime.Object
		wantZones []string
		// wantZoneIDs are the zone IDs of status.subnets[].zoneID.
		wantZoneIDs map[string]string
	}{
		{
			name:    "an EC2NodeClass with subnets in us-west-2a (twice) and us-west-2c serves those two zones",
			yaml:    ec2NodeClassYAML,
			wantGVK: nodeclassv1.EC2GroupVersion.WithKind(nodeclassv1.KindEC2NodeClass),
			want: &nodeclassv1.EC2NodeClass{
				TypeMeta: metav1.TypeMeta{APIVersion: "karpenter.k8s.aws/v1", Kind: "EC2NodeClass"},
				ObjectMeta: metav1.ObjectMeta{
					Name: "default", Generation: 2, Finalizers: []string{"karpenter.k8s.aws/termination"},
					Annotations: map[string]string{
						"karpenter.k8s.aws/ec2nodeclass-hash":         "4519519519874658523",
						"karpenter.k8s.aws/ec2nodeclass-hash-version": "v4",
					},
				},
				Status: nodeclassv1.NodeClassStatus{Subnets: []nodeclassv1.Subnet{
					{Zone: "us-west-2a", ZoneID: "usw2-az1"}, {Zone: "us-west-2c", ZoneID: "usw2-az3"}, {Zone: "us-west-2a", ZoneID: "usw2-az1"},
				}},
			},
			wantZones:   []string{"us-west-2a", "us-west-2c"},
			wantZoneIDs: map[string]string{"us-west-2a": "usw2-az1", "us-west-2c": "usw2-az3"},
		},
		{
			name:    "EKS Auto Mode's NodeClass with subnets in eu-west-1b and eu-west-1a serves those two zones",
			yaml:    nodeClassYAML,
			wantGVK: nodeclassv1.EKSGroupVersion.WithKind(nodeclassv1.KindNodeClass),
			want: &nodeclassv1.NodeClass{
				TypeMeta: metav1.TypeMeta{APIVersion: "eks.amazonaws.com/v1", Kind: "NodeClass"},
				ObjectMeta: metav1.ObjectMeta{
					Name:   "default",
					Labels: map[string]string{"app.kubernetes.io/managed-by": "eks"},
					Annotations: map[string]string{
						"eks.amazonaws.com/nodeclass-hash":         "495408067366721138",
						"eks.amazonaws.com/nodeclass-hash-version": "v2",
					},
				},
				Status: nodeclassv1.NodeClassStatus{Subnets: []nodeclassv1.Subnet{{Zone: "eu-west-1b", ZoneID: "euw1-az1"}, {Zone: "eu-west-1a", ZoneID: "euw1-az3"}}},
			},
			wantZones:   []string{"eu-west-1a", "eu-west-1b"},
			wantZoneIDs: map[string]string{"eu-west-1a": "euw1-az3", "eu-west-1b": "euw1-az1"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			obj, gvk, err := decoder.Decode([]byte(tt.yaml), nil, nil)
			if err != nil {
				t.Fatalf("decoding: %v", err)
			}
			if *gvk != tt.wantGVK {
				t.Errorf("decoded as %v, want %v", gvk, tt.wantGVK)
			}
			if diff := cmp.Diff(tt.want, obj); diff != "" {
				t.Errorf("decoded object (-want +got):\n%s", diff)
			}
			var status nodeclassv1.NodeClassStatus
			switch o := obj.(type) {
			case *nodeclassv1.EC2NodeClass:
				status = o.Status
			case *nodeclassv1.NodeClass:
				status = o.Status
			}
			if diff := cmp.Diff(tt.wantZones, status.Zones()); diff != "" {
				t.Errorf("Zones() (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.wantZoneIDs, status.ZoneIDs()); diff != "" {
				t.Errorf("ZoneIDs() (-want +got):\n%s", diff)
			}
		})
	}
}

func TestPlacementsAreTheDistinctZonesAndZoneIDsOfTheSubnets(t *testing.T) {
	tests := []struct {
		name        string
		subnets     []nodeclassv1.Subnet
		want        []nodeclassv1.Subnet
		wantZoneIDs map[string]string
	}{
		{name: "no subnets resolved yet -> none"},
		{
			name:        "two subnets in us-west-2a, one in us-west-2c, one without a zone -> one pair per zone, sorted",
			subnets:     []nodeclassv1.Subnet{{Zone: "us-west-2c", ZoneID: "usw2-az3"}, {Zone: "us-west-2a", ZoneID: "usw2-az1"}, {ZoneID: "usw2-az4"}, {Zone: "us-west-2a", ZoneID: "usw2-az1"}},
			want:        []nodeclassv1.Subnet{{Zone: "us-west-2a", ZoneID: "usw2-az1"}, {Zone: "us-west-2c", ZoneID: "usw2-az3"}},
			wantZoneIDs: map[string]string{"us-west-2a": "usw2-az1", "us-west-2c": "usw2-az3"},
		},
		{
			name:    "a status without zoneID (it is optional) -> the zones, and no zone ID",
			subnets: []nodeclassv1.Subnet{{Zone: "b"}, {Zone: "a"}},
			want:    []nodeclassv1.Subnet{{Zone: "a"}, {Zone: "b"}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := nodeclassv1.NodeClassStatus{Subnets: tt.subnets}
			if diff := cmp.Diff(tt.want, s.Placements()); diff != "" {
				t.Errorf("Placements() (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.wantZoneIDs, s.ZoneIDs()); diff != "" {
				t.Errorf("ZoneIDs() (-want +got):\n%s", diff)
			}
		})
	}
}

func TestZonesOfAStatusWithoutSubnetsIsNil(t *testing.T) {
	tests := []struct {
		name   string
		status nodeclassv1.NodeClassStatus
	}{
		{name: "no subnets resolved yet -> nil"},
		{name: "a subnet without a zone -> nil", status: nodeclassv1.NodeClassStatus{Subnets: []nodeclassv1.Subnet{{}}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.status.Zones(); got != nil {
				t.Errorf("Zones() = %q, want nil: a status without zones says nothing about them", got)
			}
		})
	}
}
