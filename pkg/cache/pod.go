package cache

import (
	"encoding/binary"
	"maps"
	"slices"
	"unique"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Pod is a pod as the webhook's pod informer keeps it: what counting reads
// and nothing else. Even stripped of every other field a *v1.Pod is a
// 1.2 KiB struct, which at 150,000 pods is most of the server's heap; a Pod
// is under 100 bytes plus its name, and the replicas of one workload share
// their namespace, node name and label set.
//
// Only the informer stores Pods: nothing reads pods back from the cache
// (spread.Index keeps the counts), and the event handlers hand
// spread.Index a *v1.Pod rebuilt from one (see V1).
type Pod struct {
	namespace       string
	name            string
	resourceVersion string // tells an update from a resync
	phase           v1.PodPhase
	nodeName        unique.Handle[string]
	labels          unique.Handle[string] // encodeLabels
	deleting        bool
}

var (
	_ runtime.Object            = (*Pod)(nil)
	_ metav1.ObjectMetaAccessor = (*Pod)(nil)
)

var knownPhases = []v1.PodPhase{v1.PodPending, v1.PodRunning, v1.PodSucceeded, v1.PodFailed, v1.PodUnknown}

// CompactPod returns the cached form of p.
func CompactPod(p *v1.Pod) *Pod {
	return &Pod{
		namespace:       unique.Make(p.Namespace).Value(),
		name:            p.Name,
		resourceVersion: p.ResourceVersion,
		phase:           canonicalPhase(p.Status.Phase),
		nodeName:        unique.Make(p.Spec.NodeName),
		labels:          unique.Make(encodeLabels(p.Labels)),
		deleting:        p.DeletionTimestamp != nil,
	}
}

// canonicalPhase returns the package constant for a known phase, so that
// the decoded string is not kept once per pod.
func canonicalPhase(ph v1.PodPhase) v1.PodPhase {
	if i := slices.Index(knownPhases, ph); i >= 0 {
		return knownPhases[i]
	}
	return ph
}

// deletedAt stands for a pod's deletion timestamp: counting only asks
// whether there is one.
var deletedAt = metav1.Unix(0, 0)

// V1 returns the pod as spread.Index reads it: namespace, name, labels,
// node, phase and, for a terminating pod, a deletion timestamp (not the
// real one, which is not kept).
func (p *Pod) V1() *v1.Pod {
	out := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Namespace:       p.namespace,
			Name:            p.name,
			ResourceVersion: p.resourceVersion,
			Labels:          decodeLabels(p.labels.Value()),
		},
		Spec:   v1.PodSpec{NodeName: p.nodeName.Value()},
		Status: v1.PodStatus{Phase: p.phase},
	}
	if p.deleting {
		out.DeletionTimestamp = &deletedAt
	}
	return out
}

// GetObjectMeta lets client-go's informer machinery (keys, indexes, the
// resourceVersion check that tells updates from resyncs) read the pod's
// identity through meta.Accessor. The copy it returns is not the pod:
// setting a field on it changes nothing.
func (p *Pod) GetObjectMeta() metav1.Object {
	return &metav1.ObjectMeta{Namespace: p.namespace, Name: p.name, ResourceVersion: p.resourceVersion}
}

// GetObjectKind reports no kind: a cached Pod is never encoded.
func (p *Pod) GetObjectKind() schema.ObjectKind { return schema.EmptyObjectKind }

// DeepCopyObject returns a copy of p.
func (p *Pod) DeepCopyObject() runtime.Object {
	c := *p
	return &c
}

// encodeLabels returns the canonical encoding of a label set: the pairs in
// key order, each key and value prefixed by its length, so that any key or
// value (whatever bytes it holds) decodes back unchanged. Equal sets give
// equal strings, which is what lets unique share them.
func encodeLabels(ls map[string]string) string {
	if len(ls) == 0 {
		return ""
	}
	keys := slices.Sorted(maps.Keys(ls))
	n := 0
	for _, k := range keys {
		n += len(k) + len(ls[k]) + 2*binary.MaxVarintLen64
	}
	b := make([]byte, 0, n)
	for _, k := range keys {
		b = binary.AppendUvarint(b, uint64(len(k)))
		b = append(b, k...)
		b = binary.AppendUvarint(b, uint64(len(ls[k])))
		b = append(b, ls[k]...)
	}
	return string(b)
}

// decodeLabels inverts encodeLabels. The strings it returns share the
// encoding's memory. The encoding is only ever made by encodeLabels; a
// truncated one (which cannot occur) yields the pairs before the damage.
func decodeLabels(s string) map[string]string {
	if s == "" {
		return nil
	}
	ls := map[string]string{}
	for len(s) > 0 {
		k, rest, ok := cut(s)
		if !ok {
			break
		}
		v, rest, ok := cut(rest)
		if !ok {
			break
		}
		ls[k] = v
		s = rest
	}
	return ls
}

// cut splits one length-prefixed string off the front of s.
func cut(s string) (field, rest string, ok bool) {
	n, w := binary.Uvarint([]byte(s[:min(len(s), binary.MaxVarintLen64)]))
	if w <= 0 || uint64(len(s)-w) < n {
		return "", "", false
	}
	return s[w : w+int(n)], s[w+int(n):], true
}
