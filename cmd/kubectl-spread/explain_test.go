package main

import (
	"bytes"

	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/spreadguard/spreadguard/pkg/apis/spreadguard/v1alpha1"
	"github.com/spreadguard/spreadguard/pkg/cache"
	"github.com/spreadguard/spreadguard/pkg/lookup"
	"github.com/spreadguard/spreadguard/pkg/workload"
)

// fakeCluster serves objs through a fake client, as a live cluster
// would.
func fakeCluster(t *testing.T, objs ...runtime.Object) connectFunc {
	t.Helper()
	scheme, err := cache.NewScheme()
	if err != nil {
		t.Fatal(err)
	}
	c := &clients{reader: fake.NewClientBuilder().WithScheme(scheme).WithRuntimeObjects(objs...).Build()}
	return func(kubeconfig, context string) (*clients, error) { return c, nil }
}

const deploymentUID = types.UID("d0000000-0000-4000-8000-000000000001")

// exampleWithOwners is examples/cluster.yaml plus what the example leaves
// out: Deployment web owning ReplicaSet web-abc (revision 2, of its template) and an older,
// scaled-down web-old (revision 1); StatefulSet db with pods db-0 in zone-a
// and db-1 in zone-b.
func exampleWithOwners(t *testing.T) []runtime.Object {
	t.Helper()
	c, err := lookup.Load(exampleCluster)
	if err != nil {
		t.Fatal(err)
	}
	objs := c.Objects()
	// The Deployment's template is web-abc's, its pod-template-hash aside:
	// web-abc is its current ReplicaSet.
	deploy := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "shop", UID: deploymentUID},
		Spec: appsv1.DeploymentSpec{
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			Template: v1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}},
				Spec:       v1.PodSpec{Containers: []v1.Container{{Name: "web", Image: "nginx:1.29"}}},
			},
		},
	}
	owner := *metav1.NewControllerRef(deploy, appsv1.SchemeGroupVersion.WithKind("Deployment"))
	for _, o := range objs {
		if rs, ok := o.(*appsv1.ReplicaSet); ok && rs.Name == "web-abc" {
			rs.OwnerReferences = []metav1.OwnerReference{owner}
			rs.Annotations = map[string]string{workload.RevisionAnnotation: "2"}
		}
	}
	old := &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{
			Name: "web-old", Namespace: "shop", UID: "r0000000-0000-4000-8000-000000000001",
			Annotations:     map[string]string{workload.RevisionAnnotation: "1"},
			OwnerReferences: []metav1.OwnerReference{owner},
		},
		Spec: appsv1.ReplicaSetSpec{
			Replicas: ptr.To[int32](0),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web", "pod-template-hash": "old"}},
			Template: v1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web", "pod-template-hash": "old"}},
			},
		},
	}
	sts := &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Name: "db", Namespace: "shop", UID: "s0000000-0000-4000-8000-000000000001"},
		Spec: appsv1.StatefulSetSpec{
			Replicas: ptr.To[int32](3),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "db"}},
			Template: v1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "db"}},
				Spec:       v1.PodSpec{Containers: []v1.Container{{Name: "db", Image: "postgres:18"}}},
			},
		},
		Status: appsv1.StatefulSetStatus{UpdateRevision: "db-7f9c"},
	}
	stsOwner := *metav1.NewControllerRef(sts, appsv1.SchemeGroupVersion.WithKind("StatefulSet"))
	dbPod := func(name, node string) *v1.Pod {
		return &v1.Pod{
			ObjectMeta: metav1.ObjectMeta{
				Name: name, Namespace: "shop", Labels: map[string]string{"app": "db"},
				OwnerReferences: []metav1.OwnerReference{stsOwner},
			},
			Spec:   v1.PodSpec{NodeName: node, Containers: []v1.Container{{Name: "db", Image: "postgres:18"}}},
			Status: v1.PodStatus{Phase: v1.PodRunning},
		}
	}
	return append(objs, deploy, old, sts, dbPod("db-0", "node-a1"), dbPod("db-1", "node-b1"))
}

// injected is the policy's zone constraint as the webhook writes it for a
// pod selected by sel.
func injected(sel map[string]string) []v1.TopologySpreadConstraint {
	return []v1.TopologySpreadConstraint{{
		MaxSkew:           1,
		TopologyKey:       zoneKey,
		WhenUnsatisfiable: v1.DoNotSchedule,
		LabelSelector:     &metav1.LabelSelector{MatchLabels: sel},
		NodeTaintsPolicy:  ptr.To(v1.NodeInclusionPolicyHonor),
	}}
}

// admittedOnZones is the report of a pod the example's zone policy admits:
// pod as mutated, its feasible nodes, and the zone counts with their
// minimum.
func admittedOnZones(pod *v1.Pod, feasible []string, globalMin int, zones map[string]int) report {
	pod.TypeMeta = metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"}
	pod.Annotations = map[string]string{v1alpha1.AnnotationPolicy: examplePolicy}
	return report{
		Allowed:           true,
		Warnings:          []string{},
		Policy:            examplePolicy,
		Pod:               pod,
		FeasibleNodes:     feasible,
		FeasibleTemplates: []string{},
		Constraints: []constraintCounted{{
			TopologyKey: zoneKey, MaxSkew: 1, WhenUnsatisfiable: v1.DoNotSchedule,
			GlobalMin: globalMin, Domains: zones,
		}},
	}
}

func TestExplain(t *testing.T) {
	webRS := metav1.OwnerReference{
		APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "web-abc", UID: "5b0e6a1c-0000-4000-8000-00000000a0bc",
		Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true),
	}
	nginx := []v1.Container{{Name: "web", Image: "nginx:1.29"}}

	tests := []struct {
		name string
		args []string
		want report
	}{
		{
			name: "deployment/web with ReplicaSets of revisions 1 and 2 -> the next pod comes from revision 2, as check of pod-web says",
			args: []string{"explain", "deployment/web", "-n", "shop", "-o", "json"},
			want: admittedOnZones(&v1.Pod{
				ObjectMeta: metav1.ObjectMeta{
					GenerateName: "web-abc-", Namespace: "shop",
					Labels:          map[string]string{"app": "web", "pod-template-hash": "abc"},
					OwnerReferences: []metav1.OwnerReference{webRS},
				},
				Spec: v1.PodSpec{
					Containers:                nginx,
					TopologySpreadConstraints: injected(map[string]string{"app": "web", "pod-template-hash": "abc"}),
				},
			}, []string{"node-b1", "node-b2"}, 2, map[string]int{"zone-a": 3, "zone-b": 2}),
		},
		{
			name: "statefulset/db with db-0 in zone-a and db-1 in zone-b -> db-2, counts [1,1] -> allowed on zone-a and zone-b",
			args: []string{"explain", "sts/db", "--namespace=shop", "-o", "json"},
			want: admittedOnZones(&v1.Pod{
				ObjectMeta: metav1.ObjectMeta{
					// As the StatefulSet controller builds it
					// (GetPodFromTemplate), then names it.
					Name: "db-2", GenerateName: "db-", Namespace: "shop",
					Labels: map[string]string{
						"app": "db", appsv1.StatefulSetPodNameLabel: "db-2", appsv1.PodIndexLabel: "2",
						appsv1.ControllerRevisionHashLabelKey: "db-7f9c",
					},
					OwnerReferences: []metav1.OwnerReference{{
						APIVersion: "apps/v1", Kind: "StatefulSet", Name: "db", UID: "s0000000-0000-4000-8000-000000000001",
						Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true),
					}},
				},
				Spec: v1.PodSpec{
					Containers:                []v1.Container{{Name: "db", Image: "postgres:18"}},
					TopologySpreadConstraints: injected(map[string]string{"app": "db"}),
				},
			}, []string{"node-a1", "node-a2", "node-b1", "node-b2"}, 1, map[string]int{"zone-a": 1, "zone-b": 1}),
		},
		{
			name: "pod/web-abc-1 running on node-a1 -> reviewed unbound and not counted, counts [2,2] -> every zone-a and zone-b node",
			args: []string{"explain", "pod/web-abc-1", "-n", "shop", "-o", "json"},
			want: admittedOnZones(&v1.Pod{
				ObjectMeta: metav1.ObjectMeta{
					Name: "web-abc-1", Namespace: "shop",
					Labels: map[string]string{"app": "web", "pod-template-hash": "abc"},
					OwnerReferences: []metav1.OwnerReference{{
						APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "web-abc",
						UID: "5b0e6a1c-0000-4000-8000-00000000a0bc", Controller: ptr.To(true),
					}},
				},
				Spec: v1.PodSpec{
					Containers:                nginx,
					TopologySpreadConstraints: injected(map[string]string{"app": "web", "pod-template-hash": "abc"}),
				},
			}, []string{"node-a1", "node-a2", "node-b1", "node-b2"}, 2, map[string]int{"zone-a": 2, "zone-b": 2}),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := runWith(tt.args, &stdout, &stderr, fakeCluster(t, exampleWithOwners(t)...))
			if code != exitAllowed || stderr.String() != "" {
				t.Fatalf("exit code %d, stderr %q; want 0 and nothing", code, stderr.String())
			}
			got := decodeReport(t, stdout.String())
			if diff := cmp.Diff(tt.want, got, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("report (-want +got):\n%s", diff)
			}
		})
	}
}

func TestExplainErrors(t *testing.T) {
	noRS := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "api", Namespace: "shop", UID: "d-api"}}
	tests := []struct {
		name       string
		args       []string
		wantStderr string
	}{
		{
			name:       "a deployment that does not exist -> not found",
			args:       []string{"explain", "deployment/nope", "-n", "shop"},
			wantStderr: `kubectl-spread: getting deployment shop/nope: deployments.apps "nope" not found` + "\n",
		},
		{
			name: "a deployment without a ReplicaSet yet -> what to do instead",
			args: []string{"explain", "deploy/api", "-n", "shop"},
			wantStderr: "kubectl-spread: deployment shop/api has no ReplicaSet of its pod template yet; once the deployment controller creates one, " +
				"explain it again, or check a pod offline with `kubectl spread check`\n",
		},
		{
			name:       "a replicaset -> the kinds explain takes",
			args:       []string{"explain", "replicaset/web-abc", "-n", "shop"},
			wantStderr: `kubectl-spread: cannot explain "replicaset": want deployment, statefulset or pod` + "\n",
		},
		{
			name:       "a name without a type -> the form wanted",
			args:       []string{"explain", "web", "-n", "shop"},
			wantStderr: `kubectl-spread: want deployment/NAME, statefulset/NAME or pod/NAME, got "web"` + "\n",
		},
		{
			name:       "a namespace that does not exist -> not found",
			args:       []string{"explain", "pod/web-abc-1", "-n", "gone"},
			wantStderr: "kubectl-spread: namespace gone not found\n",
		},
		{
			name:       "no -n and a kubeconfig without a namespace -> namespace default, absent here -> not found",
			args:       []string{"explain", "pod/web-abc-1"},
			wantStderr: "kubectl-spread: namespace default not found\n",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := runWith(tt.args, &stdout, &stderr, fakeCluster(t, append(exampleWithOwners(t), noRS)...))
			got := result{code: code, stdout: stdout.String(), stderr: stderr.String()}
			want := result{code: exitBadInput, stderr: tt.wantStderr}
			if diff := cmp.Diff(want, got, cmp.AllowUnexported(result{})); diff != "" {
				t.Errorf("run() (-want +got):\n%s", diff)
			}
		})
	}
}
