package cache

import (
	"fmt"
	"testing"
	"unique"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	nodeclassv1 "github.com/spreadguard/spreadguard/pkg/apis/nodeclass/v1"
	"github.com/spreadguard/spreadguard/pkg/apis/spreadguard/v1alpha1"
	"github.com/spreadguard/spreadguard/pkg/spread"
	"github.com/spreadguard/spreadguard/pkg/spread/spreadtest"
	"github.com/spreadguard/spreadguard/pkg/workload"
)

// full returns metadata as the apiserver fills it, with everything a cache
// has no use for.
func full(ns, name string) metav1.ObjectMeta {
	return metav1.ObjectMeta{
		Namespace: ns, Name: name, UID: types.UID("uid-" + name), ResourceVersion: "42",
		Generation: 3, CreationTimestamp: metav1.Unix(1, 0),
		Labels:        map[string]string{"app": "web"},
		Annotations:   map[string]string{"kubectl.kubernetes.io/last-applied-configuration": "{...}"},
		ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubectl", Operation: metav1.ManagedFieldsOperationApply}},
		Finalizers:    []string{"example.com/keep"},
	}
}

// kept is the metadata every transform keeps: the object's identity and
// its resourceVersion.
func kept(ns, name string) metav1.ObjectMeta {
	return metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID("uid-" + name), ResourceVersion: "42"}
}

func withOwners(m metav1.ObjectMeta, owners []metav1.OwnerReference) metav1.ObjectMeta {
	m.OwnerReferences = owners
	return m
}

func withLabels(m metav1.ObjectMeta, labels map[string]string) metav1.ObjectMeta {
	m.Labels = labels
	return m
}

func TestStripKeepsOnlyWhatTheAlgorithmReads(t *testing.T) {
	now := metav1.Unix(100, 0)
	selector := &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}
	podMeta := full("shop", "web-1")
	podMeta.OwnerReferences = spreadtest.MakePod().ControlledBy("ReplicaSet", "apps/v1", "web").Obj().OwnerReferences
	podMeta.DeletionTimestamp = &now
	nodeMeta := full("", "n1")
	rsOwners := []metav1.OwnerReference{
		{APIVersion: "example.com/v1", Kind: "Rollout", Name: "web", UID: "uid-rollout"},
		{APIVersion: "apps/v1", Kind: "Deployment", Name: "web", UID: "uid-web", Controller: new(true)},
	}
	taints := []v1.Taint{{Key: v1.TaintNodeUnschedulable, Effect: v1.TaintEffectNoSchedule}}

	tests := []struct {
		name      string
		transform toolscache.TransformFunc
		in        any
		want      any
	}{
		{
			name:      "pod -> the compact Pod: namespace, name, resourceVersion, labels, node, phase, terminating, readiness (a Ready condition not True: unready)",
			transform: StripPod,
			in: &v1.Pod{
				ObjectMeta: podMeta,
				Spec: v1.PodSpec{
					NodeName: "n1", SchedulerName: "default-scheduler",
					Containers: []v1.Container{{Name: "c", Image: "nginx", Resources: v1.ResourceRequirements{
						Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse("1")},
					}}},
					Tolerations: []v1.Toleration{{Key: "k", Operator: v1.TolerationOpExists}},
				},
				Status: v1.PodStatus{Phase: v1.PodRunning, PodIP: "10.0.0.1", Conditions: []v1.PodCondition{{Type: v1.PodReady}}},
			},
			want: &Pod{
				namespace: "shop", name: "web-1", resourceVersion: "42", phase: v1.PodRunning,
				nodeName: unique.Make("n1"), labels: spread.LabelSetOf(map[string]string{"app": "web"}), deleting: true, unready: true,
			},
		},
		{
			name:      "node -> identity, labels, taints and unschedulable",
			transform: StripNode,
			in: &v1.Node{
				ObjectMeta: nodeMeta,
				Spec:       v1.NodeSpec{Taints: taints, Unschedulable: true, PodCIDR: "10.0.0.0/24", ProviderID: "aws://x"},
				Status:     v1.NodeStatus{Capacity: v1.ResourceList{v1.ResourceCPU: resource.MustParse("4")}, Images: []v1.ContainerImage{{Names: []string{"nginx"}}}},
			},
			want: &v1.Node{
				ObjectMeta: withLabels(kept("", "n1"), map[string]string{"app": "web"}),
				Spec:       v1.NodeSpec{Taints: taints, Unschedulable: true},
			},
		},
		{
			name:      "service -> identity and selector",
			transform: StripService,
			in: &v1.Service{ObjectMeta: full("shop", "web"), Spec: v1.ServiceSpec{
				Selector: map[string]string{"app": "web"}, ClusterIP: "10.96.0.10", Ports: []v1.ServicePort{{Port: 80}},
			}},
			want: &v1.Service{ObjectMeta: kept("shop", "web"), Spec: v1.ServiceSpec{Selector: map[string]string{"app": "web"}}},
		},
		{
			name:      "replication controller -> identity, selector and its template's placement (none here)",
			transform: StripReplicationController,
			in: &v1.ReplicationController{ObjectMeta: full("shop", "web"), Spec: v1.ReplicationControllerSpec{
				Selector: map[string]string{"app": "web"}, Template: &v1.PodTemplateSpec{},
			}},
			want: &v1.ReplicationController{ObjectMeta: kept("shop", "web"), Spec: v1.ReplicationControllerSpec{
				Selector: map[string]string{"app": "web"}, Template: &v1.PodTemplateSpec{},
			}},
		},
		{
			name:      "replica set -> identity and selector",
			transform: StripReplicaSet,
			in: &appsv1.ReplicaSet{ObjectMeta: full("shop", "web"), Spec: appsv1.ReplicaSetSpec{
				Selector: selector, Template: v1.PodTemplateSpec{Spec: v1.PodSpec{Containers: []v1.Container{{Name: "c"}}}},
			}, Status: appsv1.ReplicaSetStatus{Replicas: 3}},
			want: &appsv1.ReplicaSet{ObjectMeta: kept("shop", "web"), Spec: appsv1.ReplicaSetSpec{Selector: selector}},
		},
		{
			name:      "replica set of a Deployment -> identity, selector and the Deployment's controllerRef, no other owner",
			transform: StripReplicaSet,
			in:        &appsv1.ReplicaSet{ObjectMeta: withOwners(full("shop", "web-7d"), rsOwners), Spec: appsv1.ReplicaSetSpec{Selector: selector}},
			want:      &appsv1.ReplicaSet{ObjectMeta: withOwners(kept("shop", "web-7d"), rsOwners[1:]), Spec: appsv1.ReplicaSetSpec{Selector: selector}},
		},
		{
			name:      "stateful set -> identity and selector",
			transform: StripStatefulSet,
			in: &appsv1.StatefulSet{ObjectMeta: full("shop", "db"), Spec: appsv1.StatefulSetSpec{
				Selector: selector, ServiceName: "db",
			}},
			want: &appsv1.StatefulSet{ObjectMeta: kept("shop", "db"), Spec: appsv1.StatefulSetSpec{Selector: selector}},
		},
		{
			name:      "namespace -> identity and labels",
			transform: StripNamespace,
			in:        &v1.Namespace{ObjectMeta: full("", "shop"), Spec: v1.NamespaceSpec{Finalizers: []v1.FinalizerName{"kubernetes"}}},
			want: &v1.Namespace{
				ObjectMeta: withLabels(kept("", "shop"), map[string]string{"app": "web"}),
			},
		},
		{
			name:      "namespace being deleted -> identity, labels and its deletion timestamp",
			transform: StripNamespace,
			in: func() *v1.Namespace {
				ns := &v1.Namespace{ObjectMeta: full("", "shop"), Status: v1.NamespaceStatus{Phase: v1.NamespaceTerminating}}
				ns.DeletionTimestamp = &spreadtest.DeletionTime
				return ns
			}(),
			want: func() *v1.Namespace {
				ns := &v1.Namespace{ObjectMeta: withLabels(kept("", "shop"), map[string]string{"app": "web"})}
				ns.DeletionTimestamp = &spreadtest.DeletionTime
				return ns
			}(),
		},
		{
			name:      "EC2NodeClass with subnets in b, a and b again -> identity and one subnet per zone with its zone ID, sorted",
			transform: StripNodeClass,
			in: &nodeclassv1.EC2NodeClass{ObjectMeta: full("", "default"), Status: nodeclassv1.NodeClassStatus{
				Subnets: []nodeclassv1.Subnet{{Zone: "b", ZoneID: "az2"}, {Zone: "a", ZoneID: "az1"}, {Zone: "b", ZoneID: "az2"}},
			}},
			want: &nodeclassv1.EC2NodeClass{ObjectMeta: kept("", "default"), Status: nodeclassv1.NodeClassStatus{
				Subnets: []nodeclassv1.Subnet{{Zone: "a", ZoneID: "az1"}, {Zone: "b", ZoneID: "az2"}},
			}},
		},
		{
			name:      "EKS NodeClass whose subnets are not resolved yet -> identity and no subnet",
			transform: StripNodeClass,
			in:        &nodeclassv1.NodeClass{ObjectMeta: full("", "default")},
			want:      &nodeclassv1.NodeClass{ObjectMeta: kept("", "default")},
		},
		{
			name:      "tombstone -> passed through unchanged",
			transform: StripPod,
			in:        toolscache.DeletedFinalStateUnknown{Key: "shop/web-1", Obj: &v1.Pod{}},
			want:      toolscache.DeletedFinalStateUnknown{Key: "shop/web-1", Obj: &v1.Pod{}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tt.transform(tt.in)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got, compactPodEqual); diff != "" {
				t.Errorf("stripped object (-want +got):\n%s", diff)
			}
			// The informer may hand an already stripped object back (a
			// relist); stripping it again must change nothing.
			again, err := tt.transform(got)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(got, again, compactPodEqual); diff != "" {
				t.Errorf("stripping twice (-once +twice):\n%s", diff)
			}
		})
	}
}

func TestOptionsStripEveryWatchedTypeButThePolicies(t *testing.T) {
	opts := Options()
	if !opts.ReaderFailOnMissingInformer {
		t.Error("a read of an unplanned type would start an informer lazily")
	}
	if opts.DefaultTransform == nil {
		t.Error("no default transform: policies would keep their managedFields")
	}
	if opts.DefaultUnsafeDisableDeepCopy == nil || !*opts.DefaultUnsafeDisableDeepCopy {
		t.Error("reads deep-copy the cached objects: every admission request would copy its policies and owner")
	}
	transformed := map[string]bool{}
	for obj, by := range opts.ByObject {
		transformed[fmt.Sprintf("%T", obj)] = by.Transform != nil
	}
	for _, obj := range Watched(nil) {
		name := fmt.Sprintf("%T", obj)
		switch obj.(type) {
		case *v1alpha1.SpreadPolicy, *v1alpha1.ClusterSpreadPolicy, *v1alpha1.NodeTemplate:
			if _, ok := transformed[name]; ok {
				t.Errorf("%s has its own cache options; policies and node templates are cached whole", name)
			}
		default:
			if !transformed[name] {
				t.Errorf("%s is cached without a transform", name)
			}
		}
	}
}

func TestStripOwnersKeepWhatPlacesTheirPods(t *testing.T) {
	zero, three := int32(0), int32(3)
	owner := []metav1.OwnerReference{{Kind: "Deployment", Name: "web", UID: "d1", Controller: ptr.To(true)}}
	deploymentMeta := full("shop", "web")
	full := v1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"},
			Annotations: map[string]string{v1alpha1.AnnotationSkip: "true", "checksum/config": "9f86d08"}},
		Spec: v1.PodSpec{
			SchedulerName:             v1.DefaultSchedulerName,
			SchedulingGates:           []v1.PodSchedulingGate{{Name: "example.com/quota"}},
			NodeSelector:              map[string]string{"pool": "general"},
			Tolerations:               []v1.Toleration{{Key: "spot", Operator: v1.TolerationOpExists}},
			TopologySpreadConstraints: []v1.TopologySpreadConstraint{spreadtest.Constraint(1, v1.LabelTopologyZone).Obj()},
			Containers:                []v1.Container{{Name: "web", Image: "web:1"}},
			Volumes:                   []v1.Volume{{Name: "tmp", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}}},
		},
	}
	placed := v1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: full.Labels, Annotations: map[string]string{v1alpha1.AnnotationSkip: "true"}},
		Spec: v1.PodSpec{
			SchedulerName: full.Spec.SchedulerName, SchedulingGates: full.Spec.SchedulingGates,
			NodeSelector: full.Spec.NodeSelector, Tolerations: full.Spec.Tolerations,
			TopologySpreadConstraints: full.Spec.TopologySpreadConstraints,
		},
	}
	meta := metav1.ObjectMeta{Namespace: "shop", Name: "web-h1", UID: "r1", Generation: 2, OwnerReferences: owner,
		Labels: map[string]string{"app": "web"}, Annotations: map[string]string{workload.RevisionAnnotation: "4", "note": "x"}}
	keptMeta := metav1.ObjectMeta{Namespace: "shop", Name: "web-h1", UID: "r1", OwnerReferences: owner,
		Annotations: map[string]string{workload.RevisionAnnotation: "4"}}
	sel := &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}
	tests := []struct {
		name      string
		transform toolscache.TransformFunc
		in, want  any
	}{
		{
			name:      "a running ReplicaSet keeps its controller, revision, selector and what places its pods",
			transform: StripReplicaSet,
			in:        &appsv1.ReplicaSet{ObjectMeta: meta, Spec: appsv1.ReplicaSetSpec{Replicas: &three, Selector: sel, Template: full}},
			want:      &appsv1.ReplicaSet{ObjectMeta: keptMeta, Spec: appsv1.ReplicaSetSpec{Selector: sel, Template: placed}},
		},
		{
			name:      "a Deployment's old revision scaled to zero with no pod left keeps no template",
			transform: StripReplicaSet,
			in:        &appsv1.ReplicaSet{ObjectMeta: meta, Spec: appsv1.ReplicaSetSpec{Replicas: &zero, Selector: sel, Template: full}},
			want:      &appsv1.ReplicaSet{ObjectMeta: keptMeta, Spec: appsv1.ReplicaSetSpec{Selector: sel}},
		},
		{
			name:      "a ReplicaSet of its own scaled to zero keeps its template, for the forecast of a scale from zero",
			transform: StripReplicaSet,
			in: &appsv1.ReplicaSet{ObjectMeta: withOwners(meta, nil), Spec: appsv1.ReplicaSetSpec{Replicas: &zero, Selector: sel,
				Template: full}},
			want: &appsv1.ReplicaSet{ObjectMeta: withOwners(keptMeta, nil), Spec: appsv1.ReplicaSetSpec{Selector: sel, Template: placed}},
		},
		{
			name:      "a StatefulSet keeps its selector, what places its pods, its first ordinal and its update revision",
			transform: StripStatefulSet,
			in: &appsv1.StatefulSet{ObjectMeta: meta, Spec: appsv1.StatefulSetSpec{Replicas: &three, Selector: sel, Template: full,
				Ordinals: &appsv1.StatefulSetOrdinals{Start: 5}, ServiceName: "db"},
				Status: appsv1.StatefulSetStatus{Replicas: 3, UpdateRevision: "db-6c9f", CurrentRevision: "db-5b8e"}},
			want: &appsv1.StatefulSet{ObjectMeta: keptMeta, Spec: appsv1.StatefulSetSpec{Selector: sel, Template: placed,
				Ordinals: &appsv1.StatefulSetOrdinals{Start: 5}}, Status: appsv1.StatefulSetStatus{UpdateRevision: "db-6c9f"}},
		},
		{
			name:      "a Deployment keeps its identity, selector, replicas and what places its pods",
			transform: StripDeployment,
			in: &appsv1.Deployment{ObjectMeta: deploymentMeta, Spec: appsv1.DeploymentSpec{Replicas: &three, Selector: sel,
				Template: full, Strategy: appsv1.DeploymentStrategy{Type: appsv1.RecreateDeploymentStrategyType}},
				Status: appsv1.DeploymentStatus{Replicas: 3, CollisionCount: ptr.To[int32](2)}},
			want: &appsv1.Deployment{
				ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web", UID: "uid-web", ResourceVersion: "42"},
				Spec:       appsv1.DeploymentSpec{Replicas: &three, Selector: sel, Template: placed},
			},
		},
		{
			name:      "a tombstone passes unchanged",
			transform: StripReplicaSet,
			in:        "tombstone",
			want:      "tombstone",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tt.transform(tt.in)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("stripped owner (-want +got):\n%s", diff)
			}
		})
	}
}
