package policy

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/spreadguard/spreadguard/pkg/apis/spreadguard/v1alpha1"
)

// Applied is the one policy that applies to a pod.
type Applied struct {
	// Kind is "SpreadPolicy" or "ClusterSpreadPolicy".
	Kind string
	// Name is the value of the spreadguard.io/policy annotation:
	// "<ns>/<name>" for a SpreadPolicy, "<name>" for a ClusterSpreadPolicy.
	Name     string
	Priority int32
	// Constraints are the policy's constraints, without labelSelector. They
	// are copies: changing them never changes the cached policy.
	Constraints []v1.TopologySpreadConstraint
	// Action is "" when the policy does not set one; the webhook's default
	// applies then.
	Action v1alpha1.ValidationAction
	// DeletionCost is Enabled or Disabled; unset (a policy the API server
	// did not default) is Enabled.
	DeletionCost v1alpha1.DeletionCostMode
}

// String is the policy's Name, or "" for none, as logs and outputs show it.
func (a *Applied) String() string {
	if a == nil {
		return ""
	}
	return a.Name
}

// candidate is a policy in scope for the pod, before matching.
type candidate struct {
	kind       string
	name       string // the object's name; the rank's last key
	annotation string
	namespaced bool
	spec       *v1alpha1.PolicySpec
	nsSelector *metav1.LabelSelector // cluster policies only
	uid        types.UID
	generation int64
	validate   func() field.ErrorList
}

// Resolve returns the one policy that applies to pod, or nil, nil when none
// applies. pod.Namespace must be set (an admission request carries the
// namespace beside the object; the caller copies it in). Policies that fail
// validation are skipped, and so are those whose selectors do not parse,
// since whether they match cannot be known.
func Resolve(pod *v1.Pod, l Lister) (*Applied, error) {
	if pod == nil {
		return nil, errors.New("no pod to resolve a policy for")
	}
	if pod.Namespace == "" {
		return nil, fmt.Errorf("pod %q has no namespace", pod.Name)
	}
	cands, err := candidates(pod.Namespace, l)
	if err != nil {
		return nil, err
	}
	slices.SortFunc(cands, rank)

	nsLabels := namespaceLabels{name: pod.Namespace, lister: l}
	podLabels := labels.Set(pod.Labels)
	verdicts, _ := l.(Verdicts)
	for _, c := range cands {
		matched, selErrs, err := c.matches(podLabels, &nsLabels)
		if err != nil {
			return nil, err
		}
		if selErrs != nil || !matched || !c.valid(verdicts) {
			continue
		}
		return c.applied(), nil
	}
	return nil, nil
}

func candidates(namespace string, l Lister) ([]candidate, error) {
	sps, err := l.SpreadPolicies(namespace)
	if err != nil {
		return nil, fmt.Errorf("listing the SpreadPolicies of namespace %q: %w", namespace, err)
	}
	csps, err := l.ClusterSpreadPolicies()
	if err != nil {
		return nil, fmt.Errorf("listing the ClusterSpreadPolicies: %w", err)
	}
	out := make([]candidate, 0, len(sps)+len(csps))
	out = appendCandidates(out, sps, spreadPolicyCandidate)
	return appendCandidates(out, csps, clusterSpreadPolicyCandidate), nil
}

// appendCandidates appends the candidate of each policy of ps; a nil entry,
// which a lister may hand out, is none.
func appendCandidates[P any](out []candidate, ps []*P, candidateOf func(*P) candidate) []candidate {
	for _, p := range ps {
		if p != nil {
			out = append(out, candidateOf(p))
		}
	}
	return out
}

func spreadPolicyCandidate(p *v1alpha1.SpreadPolicy) candidate {
	return candidate{
		kind: v1alpha1.KindSpreadPolicy, name: p.Name, annotation: p.Namespace + "/" + p.Name,
		spec: &p.Spec, namespaced: true, uid: p.UID, generation: p.Generation,
		validate: func() field.ErrorList { return ValidateSpreadPolicy(p) },
	}
}

func clusterSpreadPolicyCandidate(p *v1alpha1.ClusterSpreadPolicy) candidate {
	return candidate{
		kind: v1alpha1.KindClusterSpreadPolicy, name: p.Name, annotation: p.Name,
		spec: &p.Spec.PolicySpec, nsSelector: p.Spec.NamespaceSelector, uid: p.UID, generation: p.Generation,
		validate: func() field.ErrorList { return ValidateClusterSpreadPolicy(p) },
	}
}

// valid reports whether the candidate passes validation: the verdict
// reached when it entered the cache, when v has one for this generation;
// otherwise validating it now. An object without uid or generation (a
// file, a test) is always validated.
func (c candidate) valid(v Verdicts) bool {
	if v != nil && c.uid != "" && c.generation != 0 {
		if valid, known := v.PolicyVerdict(c.uid, c.generation); known {
			return valid
		}
	}
	return len(c.validate()) == 0
}

// rank orders candidates: highest priority first, then SpreadPolicy before
// ClusterSpreadPolicy, then name. Names are unique within each kind, so
// the order is total and resolution is deterministic.
func rank(a, b candidate) int {
	if c := cmp.Compare(b.spec.Priority, a.spec.Priority); c != 0 {
		return c
	}
	if a.namespaced != b.namespaced {
		if a.namespaced {
			return -1
		}
		return 1
	}
	return cmp.Compare(a.name, b.name)
}

// matches reports whether the candidate selects the pod. selErr is non-nil
// when a selector does not parse; err when the namespace lookup failed.
func (c candidate) matches(pod labels.Set, ns *namespaceLabels) (matched bool, selErr error, err error) {
	sel := c.selectors()
	if sel.podErr != nil {
		return false, sel.podErr, nil
	}
	if !sel.pod.Matches(pod) {
		return false, nil, nil
	}
	if c.namespaced || c.nsSelector == nil {
		return true, nil, nil
	}
	// Parsed before the lookup, so a broken selector costs no read, and an
	// empty one, which selects every namespace, none either.
	if sel.nsErr != nil {
		return false, sel.nsErr, nil
	}
	if sel.namespace.Empty() {
		return true, nil, nil
	}
	set, err := ns.get()
	if err != nil {
		return false, nil, err
	}
	return sel.namespace.Matches(set), nil, nil
}

// parsedSelectors are a policy's selectors parsed, at one generation. A nil
// podSelector selects every pod (metav1.LabelSelectorAsSelector would say
// none).
type parsedSelectors struct {
	generation     int64
	pod, namespace labels.Selector
	podErr, nsErr  error
}

// parse parses the candidate's selectors.
func (c candidate) parse() *parsedSelectors {
	p := &parsedSelectors{generation: c.generation, pod: labels.Everything(), namespace: labels.Everything()}
	if c.spec.PodSelector != nil {
		p.pod, p.podErr = metav1.LabelSelectorAsSelector(c.spec.PodSelector)
	}
	if c.nsSelector != nil {
		p.namespace, p.nsErr = metav1.LabelSelectorAsSelector(c.nsSelector)
	}
	return p
}

// selectorCache holds the parsed selectors of the stored policies by uid,
// each for the generation it was parsed at: a policy's spec, and so its
// selectors, change only with its generation, and parsing them (every key
// and value checked against its pattern) was on the path of every pod
// reviewed. A labels.Selector is never changed once built, so requests
// share them. The cache is emptied when it holds maxCachedPolicies, so
// that policies deleted over a long run do not pile up.
var selectorCache struct {
	m sync.Map // types.UID -> *parsedSelectors
	n atomic.Int64
}

const maxCachedPolicies = 4096

// selectors returns the candidate's selectors parsed: from selectorCache
// when the candidate is a stored object (it has a uid and a generation), and
// parsed again for an object without them (a file, a test), which may
// change without a new generation.
func (c candidate) selectors() *parsedSelectors {
	if c.uid == "" || c.generation == 0 {
		return c.parse()
	}
	if v, ok := selectorCache.m.Load(c.uid); ok {
		if p := v.(*parsedSelectors); p.generation == c.generation {
			return p
		}
	}
	p := c.parse()
	if _, loaded := selectorCache.m.Swap(c.uid, p); !loaded && selectorCache.n.Add(1) > maxCachedPolicies {
		selectorCache.m.Clear()
		selectorCache.n.Store(0)
	}
	return p
}

func (c candidate) applied() *Applied {
	a := &Applied{
		Kind:        c.kind,
		Name:        c.annotation,
		Priority:    c.spec.Priority,
		Constraints: make([]v1.TopologySpreadConstraint, 0, len(c.spec.Constraints)),
	}
	for _, con := range c.spec.Constraints {
		a.Constraints = append(a.Constraints, con.ToTopologySpreadConstraint())
	}
	if c.spec.Validation != nil {
		a.Action = c.spec.Validation.Action
	}
	a.DeletionCost = c.spec.DeletionCost
	if a.DeletionCost == "" {
		a.DeletionCost = v1alpha1.DeletionCostEnabled
	}
	return a
}

// namespaceLabels reads the pod's namespace once, and only when a
// ClusterSpreadPolicy with a namespaceSelector needs its labels.
type namespaceLabels struct {
	name   string
	lister Lister
	set    labels.Set
	done   bool
}

// get returns the namespace's labels. The apiserver gives every namespace
// the label kubernetes.io/metadata.name=<name>; it is added when missing
// (a namespace absent from a snapshot file, or built by hand), so that a
// selector on the name works the same everywhere. A namespace that does
// not exist has that label only.
func (n *namespaceLabels) get() (labels.Set, error) {
	if n.done {
		return n.set, nil
	}
	ns, err := n.lister.Namespace(n.name)
	if err != nil {
		return nil, fmt.Errorf("reading namespace %q: %w", n.name, err)
	}
	set := labels.Set{}
	if ns != nil {
		for k, v := range ns.Labels {
			set[k] = v
		}
	}
	if _, ok := set[v1.LabelMetadataName]; !ok {
		set[v1.LabelMetadataName] = n.name
	}
	n.set, n.done = set, true
	return set, nil
}
