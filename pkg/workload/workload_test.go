package workload

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

func TestKindsAreConsistent(t *testing.T) {
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{v1.AddToScheme, appsv1.AddToScheme} {
		if err := add(scheme); err != nil {
			t.Fatal(err)
		}
	}
	seen := map[schema.GroupVersionKind]bool{}
	for _, k := range Kinds {
		t.Run(k.GVK.Kind, func(t *testing.T) {
			if seen[k.GVK] {
				t.Fatalf("%s is in the table twice", k.GVK)
			}
			seen[k.GVK] = true
			if gvks, _, err := scheme.ObjectKinds(k.New()); err != nil || len(gvks) != 1 || gvks[0] != k.GVK {
				t.Errorf("the scheme knows New()'s %T as %v (%v), want %s", k.New(), gvks, err, k.GVK)
			}
			if plural, _ := apimeta.UnsafeGuessKindToResource(k.GVK); plural.Resource != k.Resource {
				t.Errorf("Resource = %q, want the API's plural %q", k.Resource, plural.Resource)
			}
			if got, ok := For(k.New()); !ok || !got.Is(k) {
				t.Errorf("For(%T) = %s, %v; want %s", k.New(), got.GVK, ok, k.GVK)
			}
			if got, ok := ByKind(k.GVK.Kind); !ok || !got.Is(k) {
				t.Errorf("ByKind(%q) = %s, %v; want %s", k.GVK.Kind, got.GVK, ok, k.GVK)
			}
			if got, ok := ByResource(k.GroupVersionResource()); !ok || !got.Is(k) {
				t.Errorf("ByResource(%s) = %s, %v; want %s", k.GroupVersionResource(), got.GVK, ok, k.GVK)
			}
			for _, name := range append([]string{k.GVK.Kind, k.Resource}, k.ShortNames...) {
				if got, ok := ByName(name); !ok || !got.Is(k) {
					t.Errorf("ByName(%q) = %s, %v; want %s", name, got.GVK, ok, k.GVK)
				}
			}
			// SetReplicas writes where Replicas reads, on a fresh object
			// each time: a caller setting one must not set the table's.
			obj := k.New()
			k.SetReplicas(obj, 7)
			if got := k.Replicas(obj); got != 7 {
				t.Errorf("Replicas after SetReplicas(7) = %d", got)
			}
			if got := k.Replicas(k.New()); got != 1 {
				t.Errorf("Replicas of a new %s = %d, want the API's default 1", k.GVK.Kind, got)
			}
		})
	}
}

func TestLookupsByName(t *testing.T) {
	cases := []struct {
		name   string
		lookup string
		want   string // "" when it is not a workload
	}{
		{name: "kubectl's short name of a Deployment", lookup: "deploy", want: "Deployment"},
		{name: "the kind qualified by its group, in capitals", lookup: "StatefulSet.apps", want: "StatefulSet"},
		{name: "the plural resource of a ReplicaSet", lookup: "replicasets", want: "ReplicaSet"},
		{name: "the short name of a ReplicationController", lookup: "RC", want: "ReplicationController"},
		{name: "a ReplicationController qualified by a group it is not in", lookup: "replicationcontroller.apps"},
		{name: "the plural qualified by its group, which kubectl-spread never took", lookup: "deployments.apps"},
		{name: "a DaemonSet, which spreadguard does not forecast", lookup: "daemonset"},
		{name: "a pod", lookup: "pod"},
		{name: "nothing", lookup: ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			k, ok := ByName(c.lookup)
			if ok != (c.want != "") || k.GVK.Kind != c.want {
				t.Errorf("ByName(%q) = %q, %v; want %q", c.lookup, k.GVK.Kind, ok, c.want)
			}
		})
	}
}

func TestByResourceWantsTheVersionOfTheTable(t *testing.T) {
	cases := []struct {
		name string
		gvr  schema.GroupVersionResource
		want string
	}{
		{name: "apps/v1 deployments", gvr: schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}, want: "Deployment"},
		{name: "core v1 replicationcontrollers", gvr: schema.GroupVersionResource{Version: "v1", Resource: "replicationcontrollers"}, want: "ReplicationController"},
		{name: "apps/v1beta2 deployments, a version long removed", gvr: schema.GroupVersionResource{Group: "apps", Version: "v1beta2", Resource: "deployments"}},
		{name: "replicasets of the core group", gvr: schema.GroupVersionResource{Version: "v1", Resource: "replicasets"}},
		{name: "apps/v1 daemonsets", gvr: schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "daemonsets"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			k, ok := ByResource(c.gvr)
			if ok != (c.want != "") || k.GVK.Kind != c.want {
				t.Errorf("ByResource(%s) = %q, %v; want %q", c.gvr, k.GVK.Kind, ok, c.want)
			}
		})
	}
}

func TestByKindIsExact(t *testing.T) {
	for _, kind := range []string{"deployment", "deploy", "Service", "Pod", ""} {
		if k, ok := ByKind(kind); ok {
			t.Errorf("ByKind(%q) = %s, want no kind", kind, k.GVK)
		}
	}
}

func TestForAWorkloadOrNot(t *testing.T) {
	cases := []struct {
		name string
		obj  runtime.Object
		want string
	}{
		{name: "a ReplicaSet", obj: &appsv1.ReplicaSet{}, want: "ReplicaSet"},
		{name: "a ReplicationController", obj: &v1.ReplicationController{}, want: "ReplicationController"},
		{name: "no object", obj: nil},
		{name: "a DaemonSet", obj: &appsv1.DaemonSet{}},
		{name: "a list of Deployments", obj: &appsv1.DeploymentList{}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			k, ok := For(c.obj)
			if ok != (c.want != "") || k.GVK.Kind != c.want {
				t.Errorf("For(%T) = %q, %v; want %q", c.obj, k.GVK.Kind, ok, c.want)
			}
		})
	}
}

func TestSpecOfEachKind(t *testing.T) {
	sel := &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}
	tmpl := v1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}}}
	three := int32(3)
	cases := []struct {
		name         string
		obj          Object
		wantReplicas int32
		wantSelector *metav1.LabelSelector
		wantTemplate *v1.PodTemplateSpec
	}{
		{name: "a Deployment of 3", obj: &appsv1.Deployment{Spec: appsv1.DeploymentSpec{Replicas: &three, Selector: sel, Template: tmpl}},
			wantReplicas: 3, wantSelector: sel, wantTemplate: &tmpl},
		{name: "a StatefulSet with no replicas set defaults to 1", obj: &appsv1.StatefulSet{Spec: appsv1.StatefulSetSpec{Selector: sel, Template: tmpl}},
			wantReplicas: 1, wantSelector: sel, wantTemplate: &tmpl},
		{name: "a ReplicaSet with no selector", obj: &appsv1.ReplicaSet{Spec: appsv1.ReplicaSetSpec{Replicas: &three, Template: tmpl}},
			wantReplicas: 3, wantTemplate: &tmpl},
		{name: "a ReplicationController's map of labels becomes matchLabels",
			obj:          &v1.ReplicationController{Spec: v1.ReplicationControllerSpec{Replicas: &three, Selector: map[string]string{"app": "web"}, Template: &tmpl}},
			wantReplicas: 3, wantSelector: sel, wantTemplate: &tmpl},
		{name: "a ReplicationController without a template or selector",
			obj:          &v1.ReplicationController{},
			wantReplicas: 1, wantSelector: &metav1.LabelSelector{}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			k, ok := For(c.obj)
			if !ok {
				t.Fatalf("For(%T) found no kind", c.obj)
			}
			if got := k.Replicas(c.obj); got != c.wantReplicas {
				t.Errorf("Replicas = %d, want %d", got, c.wantReplicas)
			}
			if diff := cmp.Diff(c.wantSelector, k.LabelSelector(c.obj)); diff != "" {
				t.Errorf("LabelSelector (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(c.wantTemplate, k.Template(c.obj)); diff != "" {
				t.Errorf("Template (-want +got):\n%s", diff)
			}
		})
	}
}

func TestNewRevision(t *testing.T) {
	image := func(obj Object, img string) Object {
		k, _ := For(obj)
		if k.Template(obj) == nil {
			obj.(*v1.ReplicationController).Spec.Template = &v1.PodTemplateSpec{}
		}
		k.Template(obj).Spec.Containers = []v1.Container{{Name: "c", Image: img}}
		return obj
	}
	cases := []struct {
		name     string
		old, cur Object
		want     bool
	}{
		{name: "a Deployment's image changes -> a new ReplicaSet", old: image(&appsv1.Deployment{}, "a"), cur: image(&appsv1.Deployment{}, "b"), want: true},
		{name: "a Deployment scaled, its template unchanged -> the same revision", old: image(&appsv1.Deployment{}, "a"), cur: image(&appsv1.Deployment{Spec: appsv1.DeploymentSpec{Replicas: new(int32(5))}}, "a")},
		{name: "a StatefulSet's image changes -> a new update revision", old: image(&appsv1.StatefulSet{}, "a"), cur: image(&appsv1.StatefulSet{}, "b"), want: true},
		{name: "a ReplicaSet's image changes -> its pods stay", old: image(&appsv1.ReplicaSet{}, "a"), cur: image(&appsv1.ReplicaSet{}, "b")},
		{name: "a ReplicationController's image changes -> its pods stay", old: image(&v1.ReplicationController{}, "a"), cur: image(&v1.ReplicationController{}, "b")},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			k, _ := For(c.cur)
			if got := k.NewRevision(c.old, c.cur); got != c.want {
				t.Errorf("NewRevision = %v, want %v", got, c.want)
			}
		})
	}
}

func TestRefString(t *testing.T) {
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web"}}
	if got, want := RefTo(Deployment, d).String(), "Deployment shop/web"; got != want {
		t.Errorf("RefTo(Deployment, shop/web).String() = %q, want %q", got, want)
	}
}

func TestRevision(t *testing.T) {
	cases := []struct {
		name        string
		annotations map[string]string
		want        int64
	}{
		{name: "revision 12", annotations: map[string]string{RevisionAnnotation: "12"}, want: 12},
		{name: "no annotations -> 0", annotations: nil},
		{name: "a revision that does not parse -> 0", annotations: map[string]string{RevisionAnnotation: "twelve"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rs := &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Annotations: c.annotations}}
			if got := Revision(rs); got != c.want {
				t.Errorf("Revision = %d, want %d", got, c.want)
			}
		})
	}
}
