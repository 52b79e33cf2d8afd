package workload

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// The rows' kinds, resources and Go types are held to the API's by
// pkg/cache's tests, which read every workload kind.
func TestKindsAreConsistent(t *testing.T) {
	for _, k := range Kinds {
		t.Run(k.GVK.Kind, func(t *testing.T) {
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

func TestLookups(t *testing.T) {
	byName := func(name string) func() (Kind, bool) { return func() (Kind, bool) { return ByName(name) } }
	byResource := func(group, version, resource string) func() (Kind, bool) {
		return func() (Kind, bool) {
			return ByResource(schema.GroupVersionResource{Group: group, Version: version, Resource: resource})
		}
	}
	byKind := func(kind string) func() (Kind, bool) { return func() (Kind, bool) { return ByKind(kind) } }
	forObject := func(obj runtime.Object) func() (Kind, bool) { return func() (Kind, bool) { return For(obj) } }
	cases := []struct {
		name   string
		lookup func() (Kind, bool)
		want   string // "" when it is not a workload
	}{
		{name: "kubectl's short name of a Deployment", lookup: byName("deploy"), want: "Deployment"},
		{name: "the kind qualified by its group, in capitals", lookup: byName("StatefulSet.apps"), want: "StatefulSet"},
		{name: "the plural resource of a ReplicaSet", lookup: byName("replicasets"), want: "ReplicaSet"},
		{name: "the short name of a ReplicationController", lookup: byName("RC"), want: "ReplicationController"},
		{name: "a ReplicationController qualified by a group it is not in", lookup: byName("replicationcontroller.apps")},
		{name: "the plural qualified by its group, which kubectl-spread never took", lookup: byName("deployments.apps")},
		{name: "a DaemonSet by name, which spreadguard does not forecast", lookup: byName("daemonset")},
		{name: "a pod by name", lookup: byName("pod")},
		{name: "an empty name", lookup: byName("")},
		{name: "apps/v1 deployments", lookup: byResource("apps", "v1", "deployments"), want: "Deployment"},
		{name: "core v1 replicationcontrollers", lookup: byResource("", "v1", "replicationcontrollers"), want: "ReplicationController"},
		{name: "apps/v1beta2 deployments, a version long removed", lookup: byResource("apps", "v1beta2", "deployments")},
		{name: "replicasets of the core group", lookup: byResource("", "v1", "replicasets")},
		{name: "apps/v1 daemonsets", lookup: byResource("apps", "v1", "daemonsets")},
		{name: "the kind StatefulSet", lookup: byKind("StatefulSet"), want: "StatefulSet"},
		{name: "a kind in lower case, which a controller reference never holds", lookup: byKind("deployment")},
		{name: "a short name as a kind", lookup: byKind("deploy")},
		{name: "a Service's kind", lookup: byKind("Service")},
		{name: "a ReplicaSet object", lookup: forObject(&appsv1.ReplicaSet{}), want: "ReplicaSet"},
		{name: "a ReplicationController object", lookup: forObject(&v1.ReplicationController{}), want: "ReplicationController"},
		{name: "no object", lookup: forObject(nil)},
		{name: "a DaemonSet object", lookup: forObject(&appsv1.DaemonSet{})},
		{name: "a list of Deployments", lookup: forObject(&appsv1.DeploymentList{})},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			k, ok := c.lookup()
			if ok != (c.want != "") || k.GVK.Kind != c.want {
				t.Errorf("found %q, %v; want %q", k.GVK.Kind, ok, c.want)
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

func TestPodFromTemplate(t *testing.T) {
	tmpl := v1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}, Annotations: map[string]string{"a": "1"}, Finalizers: []string{"example.com/f"}},
		Spec:       v1.PodSpec{NodeSelector: map[string]string{"disk": "ssd"}},
	}
	meta := metav1.ObjectMeta{Namespace: "shop", Name: "web", UID: "uid-web"}
	cases := []struct {
		name string
		obj  Object
		want *v1.Pod
	}{
		{name: "a ReplicaSet's pod carries its template and a controller reference to it",
			obj: &appsv1.ReplicaSet{ObjectMeta: meta, Spec: appsv1.ReplicaSetSpec{Template: tmpl}},
			want: &v1.Pod{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
				ObjectMeta: metav1.ObjectMeta{Namespace: "shop", GenerateName: "web-", Labels: map[string]string{"app": "web"},
					Annotations: map[string]string{"a": "1"}, Finalizers: []string{"example.com/f"},
					OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "web", UID: "uid-web", Controller: new(true), BlockOwnerDeletion: new(true)}}},
				Spec: tmpl.Spec}},
		{name: "a ReplicationController's pod names the core group's version",
			obj: &v1.ReplicationController{ObjectMeta: meta, Spec: v1.ReplicationControllerSpec{Template: &tmpl}},
			want: &v1.Pod{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
				ObjectMeta: metav1.ObjectMeta{Namespace: "shop", GenerateName: "web-", Labels: map[string]string{"app": "web"},
					Annotations: map[string]string{"a": "1"}, Finalizers: []string{"example.com/f"},
					OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "ReplicationController", Name: "web", UID: "uid-web", Controller: new(true), BlockOwnerDeletion: new(true)}}},
				Spec: tmpl.Spec}},
		{name: "a ReplicationController without a template has no pod", obj: &v1.ReplicationController{ObjectMeta: meta}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			k, _ := For(c.obj)
			got := k.Pod(c.obj)
			if diff := cmp.Diff(c.want, got); diff != "" {
				t.Fatalf("Pod (-want +got):\n%s", diff)
			}
			if got == nil {
				return
			}
			// The caller may change the pod's labels and spec, as the
			// forecast's mutation does: the template stays as it was.
			got.Labels["extra"] = "x"
			got.Spec.NodeSelector["zone"] = "a"
			if diff := cmp.Diff(map[string]string{"app": "web"}, tmpl.Labels); diff != "" {
				t.Errorf("the template's labels changed with the pod's (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(map[string]string{"disk": "ssd"}, tmpl.Spec.NodeSelector); diff != "" {
				t.Errorf("the template's spec changed with the pod's (-want +got):\n%s", diff)
			}
		})
	}
}

func TestSelector(t *testing.T) {
	cases := []struct {
		name    string
		obj     Object
		want    bool // whether it selects app=web
		wantErr bool
	}{
		{name: "a Deployment's matchLabels", obj: &appsv1.Deployment{Spec: appsv1.DeploymentSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}}}, want: true},
		{name: "a ReplicationController's map", obj: &v1.ReplicationController{Spec: v1.ReplicationControllerSpec{Selector: map[string]string{"app": "web"}}}, want: true},
		{name: "a ReplicaSet of other pods", obj: &appsv1.ReplicaSet{Spec: appsv1.ReplicaSetSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "api"}}}}},
		{name: "a StatefulSet without a selector selects nothing", obj: &appsv1.StatefulSet{}},
		{name: "a ReplicaSet whose selector does not parse, stored before the API server validated it", wantErr: true,
			obj: &appsv1.ReplicaSet{Spec: appsv1.ReplicaSetSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "not a value"}}}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			k, _ := For(c.obj)
			sel, err := k.Selector(c.obj)
			if (err != nil) != c.wantErr {
				t.Fatalf("Selector error = %v, want an error %v", err, c.wantErr)
			}
			if err == nil && sel.Matches(labels.Set{"app": "web"}) != c.want {
				t.Errorf("Selector %q selects app=web: %v, want %v", sel, !c.want, c.want)
			}
		})
	}
}

func TestListItems(t *testing.T) {
	for _, k := range Kinds {
		t.Run(k.GVK.Kind, func(t *testing.T) {
			list := k.NewList()
			a, b := k.New(), k.New()
			a.SetName("a")
			b.SetName("b")
			if err := meta.SetList(list, []runtime.Object{a, b}); err != nil {
				t.Fatal(err)
			}
			items, err := k.Items(list)
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, o := range items {
				if got, ok := For(o); !ok || !got.Is(k) {
					t.Errorf("an item of a %s list is a %T", k.GVK.Kind, o)
				}
				names = append(names, o.GetName())
			}
			if diff := cmp.Diff([]string{"a", "b"}, names); diff != "" {
				t.Errorf("Items (-want +got):\n%s", diff)
			}
			// The items are the list's, not copies.
			items[0].SetName("changed")
			again, _ := k.Items(list)
			if again[0].GetName() != "changed" {
				t.Error("Items returned copies of the list's items")
			}
			if empty, _ := k.Items(k.NewList()); len(empty) != 0 {
				t.Errorf("NewList holds %d items, want none", len(empty))
			}
		})
	}
}
