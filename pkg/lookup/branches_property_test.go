package lookup

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/go-logr/logr"
	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/spreadguard/spreadguard/pkg/apis/spreadguard/v1alpha1"
	"github.com/spreadguard/spreadguard/pkg/cache"
	"github.com/spreadguard/spreadguard/pkg/controller/policies"
	"github.com/spreadguard/spreadguard/pkg/engine"
	"github.com/spreadguard/spreadguard/pkg/spread"
	"github.com/spreadguard/spreadguard/pkg/state"
	"github.com/spreadguard/spreadguard/pkg/workload"
)

// The two branches of Sources: kubectl-spread and the parity module read
// a cluster through a Store; the webhook reads owners, namespaces and
// policies from its informers' stores, Services from the Service index,
// and what the cache misses from the API server. Parity is proven on the
// first; this test holds the second to it, on generated clusters, so that
// the proof covers the path production takes.

// drawn is a cluster as the API server stores it, drawn at random with the
// odd inputs people write: label values that are empty, Services without a
// selector or with an empty one, owner selectors with set-based
// requirements, nil or not parsing, owners the pods name but the cluster
// lacks (or under another API version), namespaces without an object,
// policies tied on priority or invalid, managedFields everywhere.
type drawn struct {
	objects []client.Object // everything but the pods
	pods    []*v1.Pod
	// owners are the names of the owners the pods name, by kind, with
	// names no object has.
	owners map[string][]string
}

var (
	propNamespaces = []string{"shop", "other", "tools"}
	// The labels of pods, and of the selectors that select them.
	podLabels = labelPool{keys: []string{"app", "tier", "pod-template-hash", "example.com/team"}, values: []string{"web", "db", "", "7d"}}
	// The labels of namespaces, and of policies' namespaceSelectors.
	namespaceLabels = labelPool{keys: []string{"team", "env"}, values: []string{"a", "b", "prod", ""}}
)

// labelPool is the keys and values labels and selectors are drawn from:
// few of each, so that selectors often match.
type labelPool struct{ keys, values []string }

type drawer struct{ *rand.Rand }

func (d drawer) pick(xs []string) string { return xs[d.IntN(len(xs))] }

// labelSet draws up to n labels of pool.
func (d drawer) labelSet(pool labelPool, n int) map[string]string {
	if d.IntN(5) == 0 {
		return nil
	}
	m := map[string]string{}
	for range d.IntN(n + 1) {
		m[d.pick(pool.keys)] = d.pick(pool.values)
	}
	return m
}

// labelSelector draws a selector as a controller or a policy spells one:
// nil, empty (everything), equalities, set-based requirements, or one that
// does not parse.
func (d drawer) labelSelector(pool labelPool) *metav1.LabelSelector {
	switch d.IntN(8) {
	case 0:
		return nil
	case 1:
		return &metav1.LabelSelector{}
	case 2:
		return &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: pool.keys[0], Operator: "in", Values: pool.values[:1]}}}
	}
	sel := &metav1.LabelSelector{MatchLabels: d.labelSet(pool, 2)}
	if d.IntN(2) == 0 {
		ops := []metav1.LabelSelectorOperator{metav1.LabelSelectorOpIn, metav1.LabelSelectorOpNotIn, metav1.LabelSelectorOpExists, metav1.LabelSelectorOpDoesNotExist}
		r := metav1.LabelSelectorRequirement{Key: d.pick(pool.keys), Operator: ops[d.IntN(len(ops))]}
		if r.Operator == metav1.LabelSelectorOpIn || r.Operator == metav1.LabelSelectorOpNotIn {
			r.Values = []string{d.pick(pool.values), d.pick(pool.values)}
		}
		sel.MatchExpressions = append(sel.MatchExpressions, r)
	}
	return sel
}

// meta draws an object's metadata, with the fields the API server adds.
func (d drawer) meta(namespace, name string) metav1.ObjectMeta {
	m := metav1.ObjectMeta{Namespace: namespace, Name: name, UID: types.UID(fmt.Sprintf("uid-%s-%s", namespace, name)),
		ResourceVersion: fmt.Sprint(1 + d.IntN(1000)), Generation: int64(1 + d.IntN(3))}
	if d.IntN(2) == 0 {
		m.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "kubectl", Operation: metav1.ManagedFieldsOperationApply, APIVersion: "v1"}}
	}
	if d.IntN(4) == 0 {
		m.Annotations = map[string]string{workload.RevisionAnnotation: fmt.Sprint(d.IntN(3)), "note": "kept by a Store"}
	}
	return m
}

func (d drawer) cluster() drawn {
	c := drawn{owners: map[string][]string{}}
	add := func(obj client.Object) { c.objects = append(c.objects, obj) }
	for _, ns := range propNamespaces {
		m := d.meta("", ns)
		m.Labels = d.labelSet(namespaceLabels, 2)
		if m.Labels == nil {
			m.Labels = map[string]string{}
		}
		// The API server labels every namespace with its name.
		m.Labels[v1.LabelMetadataName] = ns
		add(&v1.Namespace{ObjectMeta: m})

		for _, name := range []string{"web", "db", "headless", "external"}[:d.IntN(5)] {
			svc := &v1.Service{ObjectMeta: d.meta(ns, name), Spec: v1.ServiceSpec{Selector: d.labelSet(podLabels, 2)}}
			switch {
			case name == "external":
				svc.Spec = v1.ServiceSpec{Type: v1.ServiceTypeExternalName, ExternalName: "db.example.com"}
			case d.IntN(8) == 0:
				svc.Spec.Selector = map[string]string{}
			}
			add(svc)
		}
		for _, name := range []string{"web-7d", "web-old", "api"}[:d.IntN(4)] {
			rs := &appsv1.ReplicaSet{ObjectMeta: d.meta(ns, name), Spec: appsv1.ReplicaSetSpec{Selector: d.labelSelector(podLabels),
				Template: v1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: d.labelSet(podLabels, 2)}}}}
			if d.IntN(3) == 0 {
				// A Deployment's old revision, scaled to zero.
				rs.Spec.Replicas = ptr.To[int32](0)
			}
			if d.IntN(2) == 0 {
				rs.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "Deployment", Name: "web",
					UID: "uid-deployment", Controller: ptr.To(true)}}
			}
			add(rs)
		}
		if d.IntN(2) == 0 {
			add(&v1.ReplicationController{ObjectMeta: d.meta(ns, "legacy"), Spec: v1.ReplicationControllerSpec{Selector: d.labelSet(podLabels, 2)}})
		}
		if d.IntN(2) == 0 {
			add(&appsv1.StatefulSet{ObjectMeta: d.meta(ns, "db"), Spec: appsv1.StatefulSetSpec{Selector: d.labelSelector(podLabels)}})
		}
		for i := range d.IntN(3) {
			p := &v1alpha1.SpreadPolicy{ObjectMeta: d.meta(ns, fmt.Sprintf("p%d", i)), Spec: d.policySpec()}
			add(p)
		}
	}
	for i := range 1 + d.IntN(3) {
		p := &v1alpha1.ClusterSpreadPolicy{ObjectMeta: d.meta("", fmt.Sprintf("c%d", i)),
			Spec: v1alpha1.ClusterSpreadPolicySpec{PolicySpec: d.policySpec(), NamespaceSelector: d.labelSelector(namespaceLabels)}}
		add(p)
	}

	owners := map[string][]string{
		"ReplicaSet":            {"web-7d", "web-old", "api", "younger"},
		"ReplicationController": {"legacy", "gone"},
		"StatefulSet":           {"db", "gone"},
	}
	c.owners = owners
	for i := range 1 + d.IntN(8) {
		// "gone" has no Namespace object; "tools" is excluded.
		ns := d.pick([]string{"shop", "shop", "other", "other", "tools", "gone"})
		pod := &v1.Pod{ObjectMeta: d.meta(ns, fmt.Sprintf("pod-%d", i))}
		pod.Labels = d.labelSet(podLabels, 3)
		if d.IntN(2) == 0 {
			// The labels of a template that a selector of the namespace
			// selects, as a controller's pods carry them.
			if sel := d.selectorIn(c.objects, ns); len(sel) > 0 {
				pod.Labels = maps.Clone(sel)
				if d.IntN(2) == 0 {
					pod.Labels[d.pick(podLabels.keys)] = d.pick(podLabels.values)
				}
			}
		}
		switch d.IntN(8) {
		case 0, 1, 2:
			pod.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: d.pick(owners["ReplicaSet"]), Controller: ptr.To(true)}}
		case 3:
			pod.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "ReplicationController", Name: d.pick(owners["ReplicationController"]), Controller: ptr.To(true)}}
		case 4:
			pod.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "StatefulSet", Name: d.pick(owners["StatefulSet"]), Controller: ptr.To(true)}}
		case 5:
			// An old API version, or a reference that does not control:
			// DefaultSelector follows neither.
			pod.OwnerReferences = []metav1.OwnerReference{
				{APIVersion: "extensions/v1beta1", Kind: "ReplicaSet", Name: "web-7d", Controller: ptr.To(true)},
				{APIVersion: "apps/v1", Kind: "StatefulSet", Name: "db"},
			}
		case 6:
			pod.OwnerReferences = []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "Job", Name: "nightly", Controller: ptr.To(true)}}
		}
		if d.IntN(10) == 0 {
			pod.Annotations = map[string]string{v1alpha1.AnnotationSkip: "true"}
		}
		c.pods = append(c.pods, pod)
	}
	return c
}

// selectorIn returns the equalities of a selector of a Service or an owner
// of namespace, drawn among objs; nil when it draws none.
func (d drawer) selectorIn(objs []client.Object, namespace string) map[string]string {
	var sels []map[string]string
	for _, obj := range objs {
		if obj.GetNamespace() != namespace {
			continue
		}
		switch o := obj.(type) {
		case *v1.Service:
			sels = append(sels, o.Spec.Selector)
		case *v1.ReplicationController:
			sels = append(sels, o.Spec.Selector)
		case *appsv1.ReplicaSet:
			if o.Spec.Selector != nil {
				sels = append(sels, o.Spec.Selector.MatchLabels)
			}
		case *appsv1.StatefulSet:
			if o.Spec.Selector != nil {
				sels = append(sels, o.Spec.Selector.MatchLabels)
			}
		}
	}
	if len(sels) == 0 {
		return nil
	}
	return sels[d.IntN(len(sels))]
}

// policySpec draws a policy's spec: priorities that tie, selectors of
// every kind, and now and then one the webhook rejects (a constraint with
// the labelSelector it derives itself).
func (d drawer) policySpec() v1alpha1.PolicySpec {
	spec := v1alpha1.PolicySpec{Priority: []int32{0, 0, 1, 5}[d.IntN(4)]}
	if d.IntN(2) == 0 {
		spec.PodSelector = d.labelSelector(podLabels)
	}
	for range 1 + d.IntN(2) {
		c := v1alpha1.Constraint{MaxSkew: int32(1 + d.IntN(2)), TopologyKey: d.pick([]string{v1.LabelTopologyZone, v1.LabelHostname}),
			WhenUnsatisfiable: []v1.UnsatisfiableConstraintAction{v1.DoNotSchedule, v1.ScheduleAnyway}[d.IntN(2)]}
		if d.IntN(4) == 0 {
			c.MatchLabelKeys = []string{"pod-template-hash"}
		}
		if d.IntN(10) == 0 {
			c.LabelSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}
		}
		spec.Constraints = append(spec.Constraints, c)
	}
	if d.IntN(3) == 0 {
		spec.Validation = &v1alpha1.ValidationSpec{Action: []v1alpha1.ValidationAction{v1alpha1.ActionDeny, v1alpha1.ActionWarn}[d.IntN(2)]}
	}
	return spec
}

// asCached is obj as the webhook's informer keeps it: through its kind's
// transform, or the default one, as cache.Options sets them.
func asCached(t *testing.T, obj client.Object) client.Object {
	t.Helper()
	opts := cache.Options()
	transform := opts.DefaultTransform
	for o, by := range opts.ByObject {
		if reflect.TypeOf(o) == reflect.TypeOf(obj) && by.Transform != nil {
			transform = by.Transform
		}
	}
	out, err := transform(obj.DeepCopyObject())
	if err != nil {
		t.Fatal(err)
	}
	return out.(client.Object)
}

// refusingReader fails every read: the webhook's cache reader, which the
// informer branch must not need once the caches have synced.
type refusingReader struct{}

var errCacheRead = errors.New("read the cache's client.Reader")

func (refusingReader) Get(context.Context, client.ObjectKey, client.Object, ...client.GetOption) error {
	return errCacheRead
}
func (refusingReader) List(context.Context, client.ObjectList, ...client.ListOption) error {
	return errCacheRead
}

// branches returns the Sources of the two branches over c: the Store's,
// and the informers' as Run wires them, the Store standing for the API
// server behind the cache; live counts the informer branch's reads of it.
func branches(t *testing.T, c drawn) (store, informers *Sources, live *countingReader) {
	t.Helper()
	objs := make([]runtime.Object, len(c.objects))
	for i, obj := range c.objects {
		objs[i] = obj.DeepCopyObject()
	}
	s, err := NewStore(objs...)
	if err != nil {
		t.Fatal(err)
	}
	var cached []client.Object
	cluster := state.NewCluster(spread.NewIndex(), cache.NewServiceIndex())
	services := cluster.Services()
	verdicts, err := policies.New(cluster, logr.Discard(), nil, prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	for _, obj := range c.objects {
		obj := asCached(t, obj)
		cluster.Add(obj)
		cached = append(cached, obj)
	}
	live = &countingReader{Reader: s}
	informers = NewSources(refusingReader{}).WithFallback(live, func() bool { return true }).WithServiceIndex(services).
		WithInformerStores(storesOf(t, cached...)).WithPolicyVerdicts(verdicts).WithContext(t.Context())
	return NewSources(s).WithContext(t.Context()), informers, live
}

// same fails t unless the informer branch answered what the Store's did,
// as the cache keeps it, without asking the API server for an object the
// cache holds: liveReads is how often it asked.
func same[T client.Object](t *testing.T, what string, fromStore T, errStore error, fromInformers T, errInformers error, liveReads int) {
	t.Helper()
	if errStore != nil || errInformers != nil {
		t.Fatalf("%s: errors %v (Store), %v (informers)", what, errStore, errInformers)
	}
	if !reflect.ValueOf(fromStore).IsNil() && liveReads > 0 {
		t.Fatalf("%s: read from the API server %d times, though the cache holds it", what, liveReads)
	}
	var want client.Object
	if !reflect.ValueOf(fromStore).IsNil() {
		want = asCached(t, fromStore)
	}
	var got client.Object
	if !reflect.ValueOf(fromInformers).IsNil() {
		got = fromInformers
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("%s (-Store, as cached +informers):\n%s", what, diff)
	}
}

// selecting is the names of the Services of svcs that select a pod
// labelled podLabels, sorted.
func selecting(svcs []*v1.Service, podLabels map[string]string) []string {
	var out []string
	for _, s := range svcs {
		if s.Spec.Selector != nil && labels.SelectorFromValidatedSet(s.Spec.Selector).Matches(labels.Set(podLabels)) {
			out = append(out, s.Name)
		}
	}
	slices.Sort(out)
	return out
}

func sortedByName[T client.Object](objs []T) []T {
	slices.SortFunc(objs, func(a, b T) int {
		return strings.Compare(a.GetNamespace()+"/"+a.GetName(), b.GetNamespace()+"/"+b.GetName())
	})
	return objs
}

func TestTheInformersBranchAnswersAsTheStoreBranch(t *testing.T) {
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	rounds := 300
	if testing.Short() {
		rounds = 30
	}
	d := drawer{rand.New(rand.NewPCG(seed, 0))}
	// outcomes tallies the mutations compared, so that a run shows what it
	// covered (go test -v).
	outcomes := map[string]int{}
	defer func() { t.Logf("mutations compared, by outcome: %v", outcomes) }()
	for round := range rounds {
		c := d.cluster()
		t.Run(fmt.Sprintf("seed %d round %d", seed, round), func(t *testing.T) {
			store, informers, live := branches(t, c)
			reads := func() int { n := live.gets + live.lists; live.gets, live.lists = 0, 0; return n }
			for _, ns := range append(slices.Clone(propNamespaces), "gone") {
				a, errA := store.Namespace(ns)
				b, errB := informers.Namespace(ns)
				same(t, "Namespace "+ns, a, errA, b, errB, reads())
				for _, name := range c.owners["ReplicaSet"] {
					a, errA := store.ReplicaSet(ns, name)
					b, errB := informers.ReplicaSet(ns, name)
					same(t, "ReplicaSet "+ns+"/"+name, a, errA, b, errB, reads())
				}
				for _, name := range c.owners["ReplicationController"] {
					a, errA := store.ReplicationController(ns, name)
					b, errB := informers.ReplicationController(ns, name)
					same(t, "ReplicationController "+ns+"/"+name, a, errA, b, errB, reads())
				}
				for _, name := range c.owners["StatefulSet"] {
					a, errA := store.StatefulSet(ns, name)
					b, errB := informers.StatefulSet(ns, name)
					same(t, "StatefulSet "+ns+"/"+name, a, errA, b, errB, reads())
				}
				pa, errA := store.SpreadPolicies(ns)
				pb, errB := informers.SpreadPolicies(ns)
				if errA != nil || errB != nil || len(pa) != len(pb) {
					t.Fatalf("SpreadPolicies of %s: %d (%v) from the Store, %d (%v) from the informers", ns, len(pa), errA, len(pb), errB)
				}
				for i, p := range sortedByName(pb) {
					same(t, "SpreadPolicy "+p.Name, sortedByName(pa)[i], nil, p, nil, reads())
				}
			}
			ca, errA := store.ClusterSpreadPolicies()
			cb, errB := informers.ClusterSpreadPolicies()
			if errA != nil || errB != nil || len(ca) != len(cb) {
				t.Fatalf("ClusterSpreadPolicies: %d (%v) from the Store, %d (%v) from the informers", len(ca), errA, len(cb), errB)
			}
			for i, p := range sortedByName(cb) {
				same(t, "ClusterSpreadPolicy "+p.Name, sortedByName(ca)[i], nil, p, nil, reads())
			}

			for _, pod := range c.pods {
				sa, errA := store.ServicesSelecting(pod.Namespace, pod.Labels)
				sb, errB := informers.ServicesSelecting(pod.Namespace, pod.Labels)
				if errA != nil || errB != nil {
					t.Fatalf("Services of pod %s/%s: %v (Store), %v (informers)", pod.Namespace, pod.Name, errA, errB)
				}
				if diff := cmp.Diff(selecting(sa, pod.Labels), selecting(sb, pod.Labels)); diff != "" {
					t.Fatalf("Services selecting pod %s/%s %v (-Store +informers):\n%s", pod.Namespace, pod.Name, pod.Labels, diff)
				}
				selA, errA := spread.DefaultSelector(pod, store)
				selB, errB := spread.DefaultSelector(pod, informers)
				if errA != nil || errB != nil || selA.String() != selB.String() {
					t.Fatalf("DefaultSelector of pod %s/%s: %q (%v) from the Store, %q (%v) from the informers",
						pod.Namespace, pod.Name, selA, errA, selB, errB)
				}
				cfg := engine.Config{DefaultAction: v1alpha1.ActionDeny, ExcludedNamespaces: []string{"kube-system", "tools"}}
				ma, errA := engine.Mutate(pod, store, cfg)
				mb, errB := engine.Mutate(pod, informers, cfg)
				if errA != nil || errB != nil {
					t.Fatalf("Mutate of pod %s/%s: %v (Store), %v (informers)", pod.Namespace, pod.Name, errA, errB)
				}
				if diff := cmp.Diff(ma, mb); diff != "" {
					t.Fatalf("Mutate of pod %s/%s (-Store +informers):\n%s", pod.Namespace, pod.Name, diff)
				}
				switch {
				case ma.Pod != nil:
					outcomes[fmt.Sprintf("injected by a %s", ma.Policy.Kind)]++
				default:
					outcomes[ma.Skipped.Label()]++
				}
			}
		})
	}
}
