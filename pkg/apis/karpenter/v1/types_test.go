package v1_test

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/utils/ptr"

	karpenterv1 "github.com/spreadguard/spreadguard/pkg/apis/karpenter/v1"
)

// nodePoolYAML is a NodePool as `kubectl get nodepool default -o yaml`
// prints it on an EKS cluster: every field Karpenter v1.15.0 has, most of
// which the mirror leaves out.
const nodePoolYAML = `
apiVersion: karpenter.sh/v1
kind: NodePool
metadata:
  name: default
  generation: 3
  annotations:
    karpenter.sh/nodepool-hash: "6821555240594823858"
    karpenter.sh/nodepool-hash-version: v3
spec:
  weight: 10
  disruption:
    consolidationPolicy: WhenEmptyOrUnderutilized
    consolidateAfter: 1m
    budgets:
    - nodes: 10%
  limits:
    cpu: "1000"
    memory: 1000Gi
  template:
    metadata:
      labels:
        team: web
      annotations:
        example.com/owner: web
    spec:
      expireAfter: 720h
      terminationGracePeriod: 48h
      nodeClassRef:
        group: karpenter.k8s.aws
        kind: EC2NodeClass
        name: default
      requirements:
      - key: topology.kubernetes.io/zone
        operator: In
        values: [us-west-2a, us-west-2b, us-west-2c]
      - key: karpenter.sh/capacity-type
        operator: In
        values: [spot, on-demand]
      - key: karpenter.k8s.aws/instance-category
        operator: In
        values: [c, m, r]
        minValues: 2
      - key: karpenter.k8s.aws/instance-generation
        operator: Gt
        values: ["2"]
      taints:
      - key: example.com/dedicated
        value: web
        effect: NoSchedule
      startupTaints:
      - key: node.cilium.io/agent-not-ready
        value: "true"
        effect: NoExecute
status:
  nodeClassObservedGeneration: 1
  nodes: 4
  resources:
    cpu: "16"
    memory: 64Gi
    nodes: "4"
    pods: "232"
  conditions:
  - type: Ready
    status: "True"
    reason: Ready
    message: ""
    lastTransitionTime: "2026-11-01T10:00:00Z"
    observedGeneration: 3
`

func TestADecodedNodePoolKeepsWhatTemplatesAreDerivedFrom(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := karpenterv1.AddToScheme(scheme); err != nil {
		t.Fatalf("adding karpenter.sh/v1 to a scheme: %v", err)
	}
	obj, gvk, err := serializer.NewCodecFactory(scheme).UniversalDeserializer().Decode([]byte(nodePoolYAML), nil, nil)
	if err != nil {
		t.Fatalf("decoding a real NodePool: %v", err)
	}
	if want := karpenterv1.GroupVersion.WithKind(karpenterv1.KindNodePool); *gvk != want {
		t.Errorf("decoded as %v, want %v", gvk, want)
	}
	got, ok := obj.(*karpenterv1.NodePool)
	if !ok {
		t.Fatalf("decoded a %T, want *NodePool", obj)
	}

	want := &karpenterv1.NodePool{
		TypeMeta: metav1.TypeMeta{APIVersion: "karpenter.sh/v1", Kind: "NodePool"},
		ObjectMeta: metav1.ObjectMeta{
			Name:       "default",
			Generation: 3,
			Annotations: map[string]string{
				"karpenter.sh/nodepool-hash":         "6821555240594823858",
				"karpenter.sh/nodepool-hash-version": "v3",
			},
		},
		Spec: karpenterv1.NodePoolSpec{
			Limits: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1000"), corev1.ResourceMemory: resource.MustParse("1000Gi")},
			Template: karpenterv1.NodeClaimTemplate{
				ObjectMeta: karpenterv1.ObjectMeta{Labels: map[string]string{"team": "web"}},
				Spec: karpenterv1.NodeClaimTemplateSpec{
					NodeClassRef: &karpenterv1.NodeClassReference{Group: "karpenter.k8s.aws", Kind: "EC2NodeClass", Name: "default"},
					Requirements: []karpenterv1.NodeSelectorRequirementWithMinValues{
						{Key: corev1.LabelTopologyZone, Operator: corev1.NodeSelectorOpIn, Values: []string{"us-west-2a", "us-west-2b", "us-west-2c"}},
						{Key: karpenterv1.CapacityTypeLabelKey, Operator: corev1.NodeSelectorOpIn, Values: []string{"spot", "on-demand"}},
						{Key: "karpenter.k8s.aws/instance-category", Operator: corev1.NodeSelectorOpIn, Values: []string{"c", "m", "r"}, MinValues: ptr.To(2)},
						{Key: "karpenter.k8s.aws/instance-generation", Operator: corev1.NodeSelectorOpGt, Values: []string{"2"}},
					},
					Taints:        []corev1.Taint{{Key: "example.com/dedicated", Value: "web", Effect: corev1.TaintEffectNoSchedule}},
					StartupTaints: []corev1.Taint{{Key: "node.cilium.io/agent-not-ready", Value: "true", Effect: corev1.TaintEffectNoExecute}},
				},
			},
		},
		Status: karpenterv1.NodePoolStatus{
			Resources: corev1.ResourceList{
				corev1.ResourceCPU:        resource.MustParse("16"),
				corev1.ResourceMemory:     resource.MustParse("64Gi"),
				karpenterv1.ResourceNodes: resource.MustParse("4"),
				corev1.ResourcePods:       resource.MustParse("232"),
			},
			Conditions: []metav1.Condition{{
				Type: karpenterv1.ConditionTypeReady, Status: metav1.ConditionTrue, Reason: "Ready", ObservedGeneration: 3,
				LastTransitionTime: metav1.Date(2026, 11, 1, 10, 0, 0, 0, time.UTC),
			}},
		},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("decoded NodePool (-want +got):\n%s", diff)
	}
}

func TestDeepCopyOfANodePoolSharesNothingWithTheOriginal(t *testing.T) {
	orig := &karpenterv1.NodePool{Spec: karpenterv1.NodePoolSpec{
		Limits: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("10")},
		Template: karpenterv1.NodeClaimTemplate{
			ObjectMeta: karpenterv1.ObjectMeta{Labels: map[string]string{"team": "web"}},
			Spec: karpenterv1.NodeClaimTemplateSpec{Requirements: []karpenterv1.NodeSelectorRequirementWithMinValues{
				{Key: corev1.LabelTopologyZone, Operator: corev1.NodeSelectorOpIn, Values: []string{"a"}, MinValues: ptr.To(1)},
			}},
		},
	}}
	want := orig.DeepCopy()
	cp := orig.DeepCopy()
	cp.Spec.Template.Labels["team"] = "db"
	cp.Spec.Template.Spec.Requirements[0].Values[0] = "b"
	*cp.Spec.Template.Spec.Requirements[0].MinValues = 2
	cp.Spec.Limits[corev1.ResourceCPU] = resource.MustParse("20")
	if diff := cmp.Diff(want, orig); diff != "" {
		t.Errorf("changing the copy changed the original (-want +got):\n%s", diff)
	}
	list := &karpenterv1.NodePoolList{Items: []karpenterv1.NodePool{*orig}}
	if _, ok := list.DeepCopyObject().(*karpenterv1.NodePoolList); !ok {
		t.Errorf("NodePoolList.DeepCopyObject does not return a *NodePoolList")
	}
}

// nodeClaimYAML is a NodeClaim as Karpenter v1.15.0 writes it once
// launched, with most of its fields, which the mirror leaves out.
const nodeClaimYAML = `
apiVersion: karpenter.sh/v1
kind: NodeClaim
metadata:
  name: default-x7k2p
  labels:
    karpenter.sh/nodepool: default
    karpenter.sh/capacity-type: on-demand
    topology.kubernetes.io/zone: us-west-2c
    topology.k8s.aws/zone-id: usw2-az3
  finalizers: [karpenter.sh/termination]
spec:
  expireAfter: 720h
  nodeClassRef:
    group: karpenter.k8s.aws
    kind: EC2NodeClass
    name: default
  requirements:
  - key: topology.kubernetes.io/zone
    operator: In
    values: [us-west-2c]
  - key: karpenter.sh/nodepool
    operator: In
    values: [default]
  resources:
    requests:
      cpu: 500m
status:
  providerID: aws:///us-west-2c/i-0123456789abcdef0
  imageID: ami-0123456789abcdef0
  nodeName: ip-10-0-3-17.us-west-2.compute.internal
  capacity:
    cpu: "2"
  conditions:
  - type: Launched
    status: "True"
    reason: Launched
    message: ""
    lastTransitionTime: "2026-11-01T10:00:00Z"
  - type: Registered
    status: Unknown
    reason: NodeNotFound
    message: Node not registered with cluster
    lastTransitionTime: "2026-11-01T10:00:00Z"
`

func TestARealNodeClaimDecodesIntoTheMirror(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := karpenterv1.AddToScheme(scheme); err != nil {
		t.Fatalf("adding karpenter.sh/v1 to a scheme: %v", err)
	}
	obj, gvk, err := serializer.NewCodecFactory(scheme).UniversalDeserializer().Decode([]byte(nodeClaimYAML), nil, nil)
	if err != nil {
		t.Fatalf("decoding a real NodeClaim: %v", err)
	}
	if want := karpenterv1.GroupVersion.WithKind(karpenterv1.KindNodeClaim); *gvk != want {
		t.Errorf("decoded as %v, want %v", gvk, want)
	}
	got, ok := obj.(*karpenterv1.NodeClaim)
	if !ok {
		t.Fatalf("decoded a %T, want *NodeClaim", obj)
	}
	at := metav1.Date(2026, 11, 1, 10, 0, 0, 0, time.UTC)
	want := &karpenterv1.NodeClaim{
		TypeMeta: metav1.TypeMeta{APIVersion: "karpenter.sh/v1", Kind: "NodeClaim"},
		ObjectMeta: metav1.ObjectMeta{
			Name: "default-x7k2p",
			Labels: map[string]string{
				karpenterv1.NodePoolLabelKey:     "default",
				karpenterv1.CapacityTypeLabelKey: "on-demand",
				corev1.LabelTopologyZone:         "us-west-2c",
				"topology.k8s.aws/zone-id":       "usw2-az3",
			},
			Finalizers: []string{"karpenter.sh/termination"},
		},
		Spec: karpenterv1.NodeClaimSpec{Requirements: []karpenterv1.NodeSelectorRequirementWithMinValues{
			{Key: corev1.LabelTopologyZone, Operator: corev1.NodeSelectorOpIn, Values: []string{"us-west-2c"}},
			{Key: karpenterv1.NodePoolLabelKey, Operator: corev1.NodeSelectorOpIn, Values: []string{"default"}},
		}},
		Status: karpenterv1.NodeClaimStatus{
			NodeName: "ip-10-0-3-17.us-west-2.compute.internal",
			Conditions: []metav1.Condition{
				{Type: karpenterv1.ConditionTypeLaunched, Status: metav1.ConditionTrue, Reason: "Launched", LastTransitionTime: at},
				{Type: karpenterv1.ConditionTypeRegistered, Status: metav1.ConditionUnknown, Reason: "NodeNotFound", Message: "Node not registered with cluster", LastTransitionTime: at},
			},
		},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("decoded NodeClaim (-want +got):\n%s", diff)
	}
	cp := got.DeepCopy()
	cp.Labels[corev1.LabelTopologyZone] = "us-west-2a"
	cp.Spec.Requirements[0].Values[0] = "us-west-2a"
	cp.Status.Conditions[0].Status = metav1.ConditionFalse
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("changing the copy changed the original (-want +got):\n%s", diff)
	}
}
