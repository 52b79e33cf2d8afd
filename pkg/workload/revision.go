package workload

import (
	"reflect"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// CurrentReplicaSet is the ReplicaSet of d that the deployment controller
// scales up and whose pods are d's current revision, or nil when it has
// not created it yet: of replicaSets, those d controls whose pod template
// equals d's, the pod-template-hash label aside (FindNewReplicaSet and
// EqualIgnoreHash of
// https://github.com/kubernetes/kubernetes/blob/v1.37.1/pkg/controller/deployment/util/deployment_util.go).
//
// Of several with an equal template, FindNewReplicaSet takes the oldest
// (creationTimestamp, then name), and the controller then writes it the
// highest revision (SetNewReplicaSetAnnotations, same file), so that the
// two agree once it has synced. Here the highest revision is asked first,
// then the oldest: templates as the webhook's cache keeps them
// (pkg/cache's transforms keep what admission reads, not the containers,
// nor a creationTimestamp) are equal across a rollout that changes only an
// image, and there the revision is what tells the current ReplicaSet from
// the one it replaces.
// Between complete objects equal templates are rare
// (https://github.com/kubernetes/kubernetes/issues/40415), and the answer
// is upstream's.
//
// The admission webhook's forecast of a Deployment, spread health's audit
// and kubectl-spread all find a Deployment's current ReplicaSet here.
func CurrentReplicaSet(d *appsv1.Deployment, replicaSets []*appsv1.ReplicaSet) *appsv1.ReplicaSet {
	var current *appsv1.ReplicaSet
	var currentRevision int64
	for _, rs := range replicaSets {
		if ref := metav1.GetControllerOfNoCopy(rs); ref == nil || ref.UID != d.UID || ref.Kind != Deployment.GVK.Kind {
			continue
		}
		if !equalIgnoreHash(&rs.Spec.Template, &d.Spec.Template) {
			continue
		}
		rev := Revision(rs)
		if current == nil || rev > currentRevision || (rev == currentRevision && olderThan(rs, current)) {
			current, currentRevision = rs, rev
		}
	}
	return current
}

// olderThan is ReplicaSetsByCreationTimestamp.Less of
// https://github.com/kubernetes/kubernetes/blob/v1.37.1/pkg/controller/controller_utils.go.
func olderThan(a, b *appsv1.ReplicaSet) bool {
	if a.CreationTimestamp.Equal(&b.CreationTimestamp) {
		return a.Name < b.Name
	}
	return a.CreationTimestamp.Before(&b.CreationTimestamp)
}

// equalIgnoreHash is EqualIgnoreHash without its two deep copies: the
// labels compared but for pod-template-hash, then the rest of the
// templates, semantically (nil and empty alike). Templates equal field for
// field, as a Deployment's and its current ReplicaSet's are, are equal
// semantically too: reflect.DeepEqual says so at a fraction of the cost of
// the semantic comparison's, which a spread health pass pays once per
// Deployment.
func equalIgnoreHash(a, b *v1.PodTemplateSpec) bool {
	if !labelsEqualBut(a.Labels, b.Labels, appsv1.DefaultDeploymentUniqueLabelKey) {
		return false
	}
	ma, mb := a.ObjectMeta, b.ObjectMeta
	ma.Labels, mb.Labels = nil, nil
	return equal(&ma, &mb) && equal(&a.Spec, &b.Spec)
}

func equal[T any](a, b *T) bool {
	return reflect.DeepEqual(a, b) || equality.Semantic.DeepEqual(a, b)
}

// labelsEqualBut reports whether a and b hold the same labels, key aside.
func labelsEqualBut(a, b map[string]string, key string) bool {
	n := 0
	for k, v := range a {
		if k == key {
			continue
		}
		if w, ok := b[k]; !ok || w != v {
			return false
		}
		n++
	}
	_, bHas := b[key]
	if bHas {
		return len(b)-1 == n
	}
	return len(b) == n
}
