package parity

import (
	"fmt"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/labels"
	apitypes "k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
	appslisters "k8s.io/client-go/listers/apps/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/helper"
	"k8s.io/utils/ptr"

	"github.com/spreadguard/spreadguard/pkg/spread"
)

// selectorCase is one pod and the objects of its cluster that
// DefaultSelector may consult.
type selectorCase struct {
	Pod      *v1.Pod
	Services []*v1.Service
	RCs      []*v1.ReplicationController
	RSs      []*appsv1.ReplicaSet
	SSs      []*appsv1.StatefulSet
}

// TestDefaultSelectorParity requires that spread.DefaultSelector selects
// exactly the pods kube-scheduler's helper.DefaultSelector selects, and that
// the LabelSelector spreadguard injects (SelectorToLabelSelector) is valid
// and selects exactly those pods too. "Exactly" is checked over every label
// set of the vocabulary the objects are drawn from, so no pod can be missed.
func TestDefaultSelectorParity(t *testing.T) {
	universe := labelUniverse()
	for _, seed := range seeds(t) {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			t.Logf("seed %d (replay with -parity.seed=%d)", seed, seed)
			var failures []failure
			var empty, nonEmpty int
			indexes := caseIndexes(t)
			for _, i := range indexes {
				c := newGen(seed^selectorStream, i).selectorCase()
				upstream := realDefaultSelector(t, c)
				if upstream.Empty() {
					empty++
				} else {
					nonEmpty++
				}
				if diffs := compareSelector(c, upstream, universe); len(diffs) > 0 {
					failures = append(failures, failure{index: i, size: len(c.Services) + len(c.RCs) + len(c.RSs) + len(c.SSs), text: formatSelectorCase(c, upstream), diffs: diffs})
				}
			}
			report(t, "TestDefaultSelectorParity", seed, len(indexes), failures)
			t.Logf("%d cases: %d with an empty selector, %d with a non-empty one", len(indexes), empty, nonEmpty)
			if len(indexes) >= 500 && (empty < len(indexes)/20 || nonEmpty < len(indexes)/5) {
				t.Errorf("the generator no longer covers both empty (%d) and non-empty (%d) selectors", empty, nonEmpty)
			}
		})
	}
}

// selectorStream keeps the selector cases apart from the cluster cases of
// the same seed.
const selectorStream uint64 = 0x51ec7012

// realDefaultSelector runs helper.DefaultSelector over listers backed by
// indexers, as the scheduler's informers provide them.
func realDefaultSelector(t *testing.T, c *selectorCase) labels.Selector {
	t.Helper()
	newIndexer := func() cache.Indexer {
		return cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	}
	add := func(ix cache.Indexer, obj any) {
		if err := ix.Add(obj); err != nil {
			t.Fatalf("indexing %T: %v", obj, err)
		}
	}
	svc, rc, rs, ss := newIndexer(), newIndexer(), newIndexer(), newIndexer()
	for _, o := range c.Services {
		add(svc, o)
	}
	for _, o := range c.RCs {
		add(rc, o)
	}
	for _, o := range c.RSs {
		add(rs, o)
	}
	for _, o := range c.SSs {
		add(ss, o)
	}
	return helper.DefaultSelector(c.Pod, corelisters.NewServiceLister(svc), corelisters.NewReplicationControllerLister(rc),
		appslisters.NewReplicaSetLister(rs), appslisters.NewStatefulSetLister(ss))
}

func compareSelector(c *selectorCase, upstream labels.Selector, universe []labels.Set) []string {
	pod := c.Pod.DeepCopy()
	src, err := c.sources()
	if err != nil {
		return []string{fmt.Sprintf("storing the Services and owners: %v", err)}
	}
	got, err := spread.DefaultSelector(pod, src)
	if err != nil {
		return []string{fmt.Sprintf("DefaultSelector returned error %v, want a selector", err)}
	}
	if got == nil {
		return []string{"DefaultSelector returned a nil selector"}
	}
	var diffs []string
	if got.Empty() != upstream.Empty() {
		diffs = append(diffs, fmt.Sprintf("DefaultSelector %q is empty=%t, the scheduler's %q is empty=%t (an empty selector means no injection)", got, got.Empty(), upstream, upstream.Empty()))
	}
	diffs = append(diffs, sameSelection("DefaultSelector "+quote(got), got, upstream, universe)...)
	if upstream.Empty() {
		return diffs // nothing is injected for an empty selector
	}
	ls, err := spread.SelectorToLabelSelector(got)
	if err != nil {
		return append(diffs, fmt.Sprintf("SelectorToLabelSelector(%q) returned error %v", got, err))
	}
	if errs := metav1validation.ValidateLabelSelector(ls, metav1validation.LabelSelectorValidationOptions{}, field.NewPath("labelSelector")); len(errs) > 0 {
		diffs = append(diffs, fmt.Sprintf("injected labelSelector %s is refused by the apiserver: %v", formatSelector(ls), errs.ToAggregate()))
	}
	injected, err := metav1.LabelSelectorAsSelector(ls)
	if err != nil {
		return append(diffs, fmt.Sprintf("injected labelSelector %s does not parse: %v", formatSelector(ls), err))
	}
	return append(diffs, sameSelection("injected labelSelector "+formatSelector(ls), injected, upstream, universe)...)
}

func quote(s labels.Selector) string { return fmt.Sprintf("%q", s.String()) }

// sameSelection lists the label sets on which got and upstream disagree.
func sameSelection(what string, got, upstream labels.Selector, universe []labels.Set) []string {
	var wrong []string
	for _, l := range universe {
		if got.Matches(l) != upstream.Matches(l) {
			wrong = append(wrong, fmt.Sprintf("{%s}: selected=%t, scheduler=%t", l, got.Matches(l), upstream.Matches(l)))
		}
	}
	if len(wrong) == 0 {
		return nil
	}
	n := len(wrong)
	if len(wrong) > 4 {
		wrong = append(wrong[:4], "...")
	}
	return []string{fmt.Sprintf("%s disagrees with the scheduler's %q on %d label sets: %s", what, upstream, n, strings.Join(wrong, "; "))}
}

// labelUniverse enumerates every label set over the vocabulary keys, each
// key absent, set to one of its values or to a value no selector names.
func labelUniverse() []labels.Set {
	out := []labels.Set{{}}
	for _, k := range podLabelKeys {
		var next []labels.Set
		for _, s := range out {
			next = append(next, s)
			for _, v := range append(podLabelSet[k], "other") {
				l := labels.Set{}
				for kk, vv := range s {
					l[kk] = vv
				}
				l[k] = v
				next = append(next, l)
			}
		}
		out = next
	}
	return out
}

var ownerKinds = []metav1.TypeMeta{
	{APIVersion: "v1", Kind: "ReplicationController"},
	{APIVersion: "apps/v1", Kind: "ReplicaSet"},
	{APIVersion: "apps/v1", Kind: "StatefulSet"},
	{APIVersion: "apps/v1", Kind: "Deployment"},
	{APIVersion: "batch/v1", Kind: "Job"},
	{APIVersion: "extensions/v1beta1", Kind: "ReplicaSet"}, // not apps/v1: not a supported controller
}

func (g *gen) selectorCase() *selectorCase {
	c := &selectorCase{Pod: &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: namespaces[0], Labels: g.podLabels(0.7)}}}
	for _, ns := range namespaces {
		for i := range g.intn(0, 3) {
			c.Services = append(c.Services, &v1.Service{
				ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("svc-%d", i), Namespace: ns},
				Spec:       v1.ServiceSpec{Selector: g.mapSelector(c.Pod.Labels)},
			})
		}
		// The same names in both namespaces: only the pod's own may count.
		for i := range g.intn(0, 2) {
			c.RCs = append(c.RCs, &v1.ReplicationController{
				ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("rc-%d", i), Namespace: ns},
				Spec:       v1.ReplicationControllerSpec{Selector: g.mapSelector(c.Pod.Labels)},
			})
		}
		for i := range g.intn(0, 2) {
			c.RSs = append(c.RSs, &appsv1.ReplicaSet{
				ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("rs-%d", i), Namespace: ns},
				Spec:       appsv1.ReplicaSetSpec{Selector: g.ownerSelector(c.Pod.Labels)},
			})
		}
		for i := range g.intn(0, 2) {
			c.SSs = append(c.SSs, &appsv1.StatefulSet{
				ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("ss-%d", i), Namespace: ns},
				Spec:       appsv1.StatefulSetSpec{Selector: g.ownerSelector(c.Pod.Labels)},
			})
		}
	}
	// At most one owner reference is the controller, as the apiserver
	// requires.
	controller := g.r.IntN(4)
	for i := range g.intn(0, 3) {
		kind := pick(g, ownerKinds)
		prefix := map[string]string{"ReplicationController": "rc", "ReplicaSet": "rs", "StatefulSet": "ss"}[kind.Kind]
		name := fmt.Sprintf("%s-%d", prefix, g.r.IntN(2))
		if prefix == "" || g.chance(0.1) {
			name = "missing"
		}
		c.Pod.OwnerReferences = append(c.Pod.OwnerReferences, metav1.OwnerReference{
			APIVersion: kind.APIVersion, Kind: kind.Kind, Name: name, UID: apitypes.UID("uid-" + name),
			Controller: ptr.To(i == controller),
		})
	}
	return c
}

// mapSelector draws a Service or ReplicationController selector: nil
// (selects nothing), empty (selects everything), a subset of the pod's
// labels, or random labels that may not match the pod.
func (g *gen) mapSelector(podLabels map[string]string) map[string]string {
	switch x := g.r.Float64(); {
	case x < 0.15:
		return nil
	case x < 0.25:
		return map[string]string{}
	case x < 0.7:
		m := map[string]string{}
		for k, v := range podLabels {
			if g.chance(0.6) {
				m[k] = v
			}
		}
		return m
	}
	return g.podLabels(0.4)
}

// ownerSelector draws a ReplicaSet or StatefulSet selector with matchLabels
// and matchExpressions, nil, or empty.
func (g *gen) ownerSelector(podLabels map[string]string) *metav1.LabelSelector {
	switch x := g.r.Float64(); {
	case x < 0.08:
		return nil
	case x < 0.16:
		return &metav1.LabelSelector{}
	}
	ls := g.labelSelector()
	if ls == nil {
		ls = &metav1.LabelSelector{}
	}
	if g.chance(0.5) && len(podLabels) > 0 {
		k := pick(g, sortedKeys(podLabels))
		if ls.MatchLabels == nil {
			ls.MatchLabels = map[string]string{}
		}
		ls.MatchLabels[k] = podLabels[k]
	}
	return ls
}

func formatSelectorCase(c *selectorCase, upstream labels.Selector) string {
	var b strings.Builder
	fmt.Fprintf(&b, "pod %s/%s {%s}", c.Pod.Namespace, c.Pod.Name, labels.Set(c.Pod.Labels))
	for _, o := range c.Pod.OwnerReferences {
		fmt.Fprintf(&b, " owner=%s/%s %s controller=%t", o.APIVersion, o.Kind, o.Name, ptr.Deref(o.Controller, false))
	}
	for _, s := range c.Services {
		fmt.Fprintf(&b, "\n  service %s/%s selector=%s", s.Namespace, s.Name, formatMap(s.Spec.Selector))
	}
	for _, o := range c.RCs {
		fmt.Fprintf(&b, "\n  rc %s/%s selector=%s", o.Namespace, o.Name, formatMap(o.Spec.Selector))
	}
	for _, o := range c.RSs {
		fmt.Fprintf(&b, "\n  rs %s/%s selector=%s", o.Namespace, o.Name, formatSelector(o.Spec.Selector))
	}
	for _, o := range c.SSs {
		fmt.Fprintf(&b, "\n  ss %s/%s selector=%s", o.Namespace, o.Name, formatSelector(o.Spec.Selector))
	}
	if upstream != nil {
		fmt.Fprintf(&b, "\n  scheduler's DefaultSelector: %q", upstream)
	}
	return b.String()
}

func formatMap(m map[string]string) string {
	if m == nil {
		return "nil"
	}
	return "{" + labels.Set(m).String() + "}"
}
