package workload

import (
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

func TestCurrentReplicaSet(t *testing.T) {
	template := func(image string) v1.PodTemplateSpec {
		return v1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}},
			Spec: v1.PodSpec{Containers: []v1.Container{{Name: "web", Image: image}}}}
	}
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web", UID: "uid-web"},
		Spec: appsv1.DeploymentSpec{Template: template("web:2")}}
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	// rs is a ReplicaSet of owner (the Deployment's uid) named web-hash,
	// of the image, created minutes after t0, at revision.
	rs := func(hash string, owner types.UID, image string, minutes int, revision string) *appsv1.ReplicaSet {
		r := &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web-" + hash,
			CreationTimestamp: metav1.NewTime(t0.Add(time.Duration(minutes) * time.Minute))},
			Spec: appsv1.ReplicaSetSpec{Template: template(image)}}
		r.Spec.Template.Labels = map[string]string{"app": "web", appsv1.DefaultDeploymentUniqueLabelKey: hash}
		if revision != "" {
			r.Annotations = map[string]string{RevisionAnnotation: revision}
		}
		if owner != "" {
			r.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "Deployment", Name: "web", UID: owner, Controller: new(true)}}
		}
		return r
	}
	cases := []struct {
		name        string
		replicaSets []*appsv1.ReplicaSet
		want        string // the name, "" for none
	}{
		{name: "no ReplicaSet yet -> none"},
		{name: "the one ReplicaSet whose template is the Deployment's, its hash label aside",
			replicaSets: []*appsv1.ReplicaSet{rs("a", "uid-web", "web:1", 0, "1"), rs("b", "uid-web", "web:2", 5, "2")}, want: "web-b"},
		{name: "a rollback to an old template, before the controller renumbered it -> that old ReplicaSet, not the highest revision",
			replicaSets: []*appsv1.ReplicaSet{rs("a", "uid-web", "web:2", 0, "1"), rs("b", "uid-web", "web:3", 5, "2")}, want: "web-a"},
		{name: "the template changed and the controller has not created its ReplicaSet yet -> none",
			replicaSets: []*appsv1.ReplicaSet{rs("a", "uid-web", "web:1", 0, "1")}},
		{name: "a ReplicaSet of another Deployment with the same template -> not d's",
			replicaSets: []*appsv1.ReplicaSet{rs("a", "uid-other", "web:2", 0, "1")}},
		{name: "a ReplicaSet with no controller with the same template -> not d's",
			replicaSets: []*appsv1.ReplicaSet{rs("a", "", "web:2", 0, "1")}},
		{name: "two with d's template at the same revision -> the older, as FindNewReplicaSet takes it",
			replicaSets: []*appsv1.ReplicaSet{rs("b", "uid-web", "web:2", 5, "3"), rs("a", "uid-web", "web:2", 0, "3")}, want: "web-a"},
		{name: "two with d's template created at once, same revision -> the first by name",
			replicaSets: []*appsv1.ReplicaSet{rs("b", "uid-web", "web:2", 0, "3"), rs("a", "uid-web", "web:2", 0, "3")}, want: "web-a"},
		{name: "two with d's template (as the cache keeps an image rollout) -> the higher revision, the one the controller scales up",
			replicaSets: []*appsv1.ReplicaSet{rs("a", "uid-web", "web:2", 0, "1"), rs("b", "uid-web", "web:2", 5, "2")}, want: "web-b"},
		{name: "a revision that does not parse counts as 0",
			replicaSets: []*appsv1.ReplicaSet{rs("a", "uid-web", "web:2", 0, "one"), rs("b", "uid-web", "web:2", 5, "")}, want: "web-a"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := CurrentReplicaSet(d, c.replicaSets)
			if name := nameOf(got); name != c.want {
				t.Errorf("CurrentReplicaSet = %q, want %q", name, c.want)
			}
		})
	}
}

func nameOf(rs *appsv1.ReplicaSet) string {
	if rs == nil {
		return ""
	}
	return rs.Name
}

func TestEqualIgnoreHash(t *testing.T) {
	tmpl := func(labels map[string]string, image string) *v1.PodTemplateSpec {
		return &v1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels},
			Spec: v1.PodSpec{Containers: []v1.Container{{Name: "web", Image: image}}}}
	}
	const hash = appsv1.DefaultDeploymentUniqueLabelKey
	cases := []struct {
		name string
		a, b *v1.PodTemplateSpec
		want bool
	}{
		{name: "the same labels but the hash", a: tmpl(map[string]string{"app": "web", hash: "x"}, "i"), b: tmpl(map[string]string{"app": "web"}, "i"), want: true},
		{name: "different hashes", a: tmpl(map[string]string{"app": "web", hash: "x"}, "i"), b: tmpl(map[string]string{"app": "web", hash: "y"}, "i"), want: true},
		{name: "no labels and only a hash", a: tmpl(nil, "i"), b: tmpl(map[string]string{hash: "y"}, "i"), want: true},
		{name: "a label more", a: tmpl(map[string]string{"app": "web", "tier": "1"}, "i"), b: tmpl(map[string]string{"app": "web", hash: "y"}, "i")},
		{name: "a label fewer", a: tmpl(map[string]string{"app": "web", hash: "x"}, "i"), b: tmpl(map[string]string{"app": "web", "tier": "1"}, "i")},
		{name: "a label's value differs", a: tmpl(map[string]string{"app": "web"}, "i"), b: tmpl(map[string]string{"app": "api"}, "i")},
		{name: "the image differs", a: tmpl(map[string]string{"app": "web"}, "i"), b: tmpl(map[string]string{"app": "web"}, "j")},
		{name: "nil and empty annotations are alike", a: &v1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{}}}, b: &v1.PodTemplateSpec{}, want: true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := equalIgnoreHash(c.a, c.b); got != c.want {
				t.Errorf("equalIgnoreHash = %v, want %v", got, c.want)
			}
			if got := equalIgnoreHash(c.b, c.a); got != c.want {
				t.Errorf("equalIgnoreHash, swapped = %v, want %v", got, c.want)
			}
		})
	}
}

// BenchmarkCurrentReplicaSet is a Deployment's ReplicaSets as the webhook's
// cache keeps them: the current one's template equals the Deployment's, an
// older one's differs by a label.
func BenchmarkCurrentReplicaSet(b *testing.B) {
	tmpl := v1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}},
		Spec: v1.PodSpec{NodeSelector: map[string]string{"pool": "a"},
			Tolerations:               []v1.Toleration{{Key: "k", Operator: v1.TolerationOpExists}},
			TopologySpreadConstraints: []v1.TopologySpreadConstraint{{MaxSkew: 1, TopologyKey: v1.LabelTopologyZone, WhenUnsatisfiable: v1.DoNotSchedule}}}}
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web", UID: "uid-web"}, Spec: appsv1.DeploymentSpec{Template: tmpl}}
	rs := func(hash, revision, version string) *appsv1.ReplicaSet {
		t := *tmpl.DeepCopy()
		t.Labels[appsv1.DefaultDeploymentUniqueLabelKey] = hash
		t.Labels["version"] = version
		if version == "" {
			delete(t.Labels, "version")
		}
		return &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web-" + hash,
			Annotations:     map[string]string{RevisionAnnotation: revision},
			OwnerReferences: []metav1.OwnerReference{{Kind: "Deployment", Name: "web", UID: "uid-web", Controller: new(true)}}},
			Spec: appsv1.ReplicaSetSpec{Template: t}}
	}
	rss := []*appsv1.ReplicaSet{rs("a", "1", "old"), rs("b", "2", "")}
	for b.Loop() {
		if CurrentReplicaSet(d, rss) != rss[1] {
			b.Fatal("not the current ReplicaSet")
		}
	}
}
