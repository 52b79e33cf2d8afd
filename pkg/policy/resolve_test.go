package policy_test

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/spreadguard/spreadguard/pkg/apis/spreadguard/v1alpha1"
	"github.com/spreadguard/spreadguard/pkg/policy"
	pt "github.com/spreadguard/spreadguard/pkg/policy/policytest"
	"github.com/spreadguard/spreadguard/pkg/spread/spreadtest"
)

// zoneHard and hostSoft start a constraint; each call is a fresh builder,
// since option methods change the builder they are called on.
func zoneHard() *pt.ConstraintWrapper { return pt.MakeConstraint().Zone().MaxSkew(1).DoNotSchedule() }
func hostSoft() *pt.ConstraintWrapper {
	return pt.MakeConstraint().Hostname().MaxSkew(2).ScheduleAnyway()
}

// zoneHardTSC is zoneHard as Applied carries it.
var zoneHardTSC = v1.TopologySpreadConstraint{MaxSkew: 1, TopologyKey: v1.LabelTopologyZone, WhenUnsatisfiable: v1.DoNotSchedule}

func sp(ns, name string) *pt.SpreadPolicyWrapper {
	return pt.MakeSpreadPolicy().Namespace(ns).Name(name).Constraint(zoneHard().Obj())
}

func csp(name string) *pt.ClusterSpreadPolicyWrapper {
	return pt.MakeClusterSpreadPolicy().Name(name).Constraint(zoneHard().Obj())
}

func appliedSP(ns, name string, priority int32) *policy.Applied {
	return &policy.Applied{Kind: v1alpha1.KindSpreadPolicy, Name: ns + "/" + name, Priority: priority, DeletionCost: v1alpha1.DeletionCostEnabled,
		Constraints: []v1.TopologySpreadConstraint{zoneHardTSC}}
}

func appliedCSP(name string, priority int32) *policy.Applied {
	return &policy.Applied{Kind: v1alpha1.KindClusterSpreadPolicy, Name: name, Priority: priority, DeletionCost: v1alpha1.DeletionCostEnabled,
		Constraints: []v1.TopologySpreadConstraint{zoneHardTSC}}
}

func TestResolve(t *testing.T) {
	webPod := spreadtest.MakePod().Name("web-1").Namespace("shop").Label("app", "web").Label("tier", "front").Obj()
	withLabelSelector := pt.MakeConstraint().Zone().MaxSkew(1).DoNotSchedule().
		LabelSelector(&metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}).Obj()

	tests := []struct {
		name   string
		lister policy.SliceLister
		want   *policy.Applied
	}{
		{
			name: "no policies at all -> none applies",
			want: nil,
		},
		{
			name: "one SpreadPolicy without podSelector in the pod's namespace -> it applies, with every field converted",
			lister: pt.Lister(pt.MakeSpreadPolicy().Namespace("shop").Name("zones").Priority(3).Action(v1alpha1.ActionWarn).DeletionCost(v1alpha1.DeletionCostDisabled).Constraint(
				pt.MakeConstraint().Zone().MaxSkew(1).DoNotSchedule().MinDomains(3).
					NodeAffinityPolicy(v1.NodeInclusionPolicyIgnore).NodeTaintsPolicy(v1.NodeInclusionPolicyHonor).
					MatchLabelKeys("pod-template-hash").Obj(),
				hostSoft().Obj(),
			)),
			want: &policy.Applied{Kind: "SpreadPolicy", Name: "shop/zones", Priority: 3, Action: v1alpha1.ActionWarn, DeletionCost: v1alpha1.DeletionCostDisabled,
				Constraints: []v1.TopologySpreadConstraint{
					{MaxSkew: 1, TopologyKey: v1.LabelTopologyZone, WhenUnsatisfiable: v1.DoNotSchedule, MinDomains: ptr(int32(3)),
						NodeAffinityPolicy: ptr(v1.NodeInclusionPolicyIgnore), NodeTaintsPolicy: ptr(v1.NodeInclusionPolicyHonor),
						MatchLabelKeys: []string{"pod-template-hash"}},
					{MaxSkew: 2, TopologyKey: v1.LabelHostname, WhenUnsatisfiable: v1.ScheduleAnyway},
				}},
		},
		{
			name:   "SpreadPolicy of another namespace -> none applies",
			lister: pt.Lister(sp("billing", "zones")),
			want:   nil,
		},
		{
			name:   "podSelector app=api, pod app=web -> none applies",
			lister: pt.Lister(sp("shop", "api").PodLabel("app", "api")),
			want:   nil,
		},
		{
			name: "podSelector app=web and tier In (front, back), pod app=web tier=front -> applies",
			lister: pt.Lister(
				sp("shop", "web").PodLabel("app", "web").PodExpression("tier", metav1.LabelSelectorOpIn, "front", "back"),
			),
			want: appliedSP("shop", "web", 0),
		},
		{
			name:   "empty podSelector {} selects every pod -> applies",
			lister: pt.Lister(sp("shop", "all").PodSelector(&metav1.LabelSelector{})),
			want:   appliedSP("shop", "all", 0),
		},
		{
			name:   "SpreadPolicies at priority 1 and 5 -> priority 5 applies",
			lister: pt.Lister(sp("shop", "low").Priority(1), sp("shop", "high").Priority(5)),
			want:   appliedSP("shop", "high", 5),
		},
		{
			name:   "negative priority -10 loses to the default 0",
			lister: pt.Lister(sp("shop", "a-negative").Priority(-10), sp("shop", "z-default")),
			want:   appliedSP("shop", "z-default", 0),
		},
		{
			name:   "ClusterSpreadPolicy at priority 10 beats a SpreadPolicy at priority 0",
			lister: pt.Lister(sp("shop", "local"), csp("global").Priority(10)),
			want:   appliedCSP("global", 10),
		},
		{
			name:   "SpreadPolicy and ClusterSpreadPolicy both at priority 0 -> the namespaced one applies",
			lister: pt.Lister(sp("shop", "zz-local"), csp("aa-global")),
			want:   appliedSP("shop", "zz-local", 0),
		},
		{
			name:   "two SpreadPolicies b and a at equal priority -> a applies by name",
			lister: pt.Lister(sp("shop", "b").Priority(2), sp("shop", "a").Priority(2)),
			want:   appliedSP("shop", "a", 2),
		},
		{
			name:   "two ClusterSpreadPolicies defaults and base at equal priority -> base applies by name",
			lister: pt.Lister(csp("defaults"), csp("base")),
			want:   appliedCSP("base", 0),
		},
		{
			name:   "ClusterSpreadPolicy without namespaceSelector, namespace absent from the lister -> applies",
			lister: pt.Lister(csp("global")),
			want:   appliedCSP("global", 0),
		},
		{
			name:   "namespaceSelector env=prod, namespace labelled env=prod -> applies",
			lister: pt.Lister(pt.MakeNamespace("shop").Label("env", "prod"), csp("prod").NamespaceLabel("env", "prod")),
			want:   appliedCSP("prod", 0),
		},
		{
			name:   "namespaceSelector env=prod, namespace labelled env=dev -> none applies",
			lister: pt.Lister(pt.MakeNamespace("shop").Label("env", "dev"), csp("prod").NamespaceLabel("env", "prod")),
			want:   nil,
		},
		{
			name: "namespaceSelector env=prod misses, the next ClusterSpreadPolicy without one applies",
			lister: pt.Lister(
				pt.MakeNamespace("shop").Label("env", "dev"),
				csp("prod").Priority(9).NamespaceLabel("env", "prod"),
				csp("everyone"),
			),
			want: appliedCSP("everyone", 0),
		},
		{
			name: "namespaceSelector on kubernetes.io/metadata.name, namespace stored without that label -> matches by name",
			lister: pt.Lister(
				pt.MakeNamespace("shop").RemoveLabel(v1.LabelMetadataName),
				csp("named").NamespaceExpression(v1.LabelMetadataName, metav1.LabelSelectorOpIn, "shop", "cart"),
			),
			want: appliedCSP("named", 0),
		},
		{
			name:   "namespaceSelector env NotIn (dev), namespace absent from the lister -> matches, as a namespace without env",
			lister: pt.Lister(csp("not-dev").NamespaceExpression("env", metav1.LabelSelectorOpNotIn, "dev")),
			want:   appliedCSP("not-dev", 0),
		},
		{
			name: "namespaceSelector matches but podSelector app=api does not -> none applies",
			lister: pt.Lister(
				pt.MakeNamespace("shop").Label("env", "prod"),
				csp("api").NamespaceLabel("env", "prod").PodLabel("app", "api"),
			),
			want: nil,
		},
		{
			name: "SpreadPolicy at priority 5 sets labelSelector (invalid) -> skipped, the one at priority 1 applies",
			lister: pt.Lister(
				pt.MakeSpreadPolicy().Namespace("shop").Name("bad").Priority(5).Constraint(withLabelSelector),
				sp("shop", "good").Priority(1),
			),
			want: appliedSP("shop", "good", 1),
		},
		{
			name: "ClusterSpreadPolicy at priority 9 with minDomains and ScheduleAnyway (invalid) -> skipped, the SpreadPolicy applies",
			lister: pt.Lister(
				sp("shop", "local"),
				pt.MakeClusterSpreadPolicy().Name("bad").Priority(9).Constraint(hostSoft().MinDomains(2).Obj()),
			),
			want: appliedSP("shop", "local", 0),
		},
		{
			name:   "the only matching policy repeats {zone, DoNotSchedule} (invalid) -> none applies, never half of it",
			lister: pt.Lister(sp("shop", "twice").Constraint(hostSoft().Obj(), zoneHard().Obj())),
			want:   nil,
		},
		{
			name:   "SpreadPolicy whose podSelector does not parse -> skipped, the ClusterSpreadPolicy applies",
			lister: pt.Lister(sp("shop", "broken").Priority(3).PodExpression("app", "Like", "web"), csp("global")),
			want:   appliedCSP("global", 0),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := policy.Resolve(webPod, tt.lister)
			if err != nil {
				t.Fatalf("Resolve: %v", err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Resolve (-want +got):\n%s", diff)
			}
		})
	}
}

func TestResolvePassesOverInvalidPolicies(t *testing.T) {
	pod := spreadtest.MakePod().Name("web-1").Namespace("shop").Label("app", "web").Obj()
	lister := pt.Lister(
		// Ranks first and is invalid: passed over.
		sp("shop", "bad-skew").Priority(7).Constraint(hostSoft().MaxSkew(0).Obj()),
		// Selector does not parse: cannot tell whether it matches, so passed over.
		sp("shop", "bad-selector").Priority(5).PodExpression("app", metav1.LabelSelectorOpIn),
		sp("shop", "good").Priority(4),
	)
	got, err := policy.Resolve(pod, lister)
	if err != nil {
		t.Fatalf("Resolve: %v", err)
	}
	if diff := cmp.Diff(appliedSP("shop", "good", 4), got); diff != "" {
		t.Errorf("Resolve (-want +got):\n%s", diff)
	}
}

func TestResolveReturnsCopies(t *testing.T) {
	p := sp("shop", "zones").Constraint(hostSoft().NodeTaintsPolicy(v1.NodeInclusionPolicyHonor).MatchLabelKeys("a").Obj()).Obj()
	before := p.DeepCopy()
	got, err := policy.Resolve(spreadtest.MakePod().Name("p").Namespace("shop").Obj(), policy.SliceLister{Policies: []*v1alpha1.SpreadPolicy{p}})
	if err != nil || got == nil {
		t.Fatalf("Resolve = %v, %v; want the policy", got, err)
	}
	*got.Constraints[1].NodeTaintsPolicy = v1.NodeInclusionPolicyIgnore
	got.Constraints[1].MatchLabelKeys[0] = "changed"
	if diff := cmp.Diff(before, p); diff != "" {
		t.Errorf("changing the result changed the cached policy (-before +after):\n%s", diff)
	}
}

// countingLister wraps a SliceLister, counts Namespace reads and fails on
// demand.
type countingLister struct {
	policy.SliceLister
	namespaceReads                                   int
	failNamespace, failPolicies, failClusterPolicies error
}

func (c *countingLister) Namespace(name string) (*v1.Namespace, error) {
	c.namespaceReads++
	if c.failNamespace != nil {
		return nil, c.failNamespace
	}
	return c.SliceLister.Namespace(name)
}

func (c *countingLister) SpreadPolicies(ns string) ([]*v1alpha1.SpreadPolicy, error) {
	if c.failPolicies != nil {
		return nil, c.failPolicies
	}
	return c.SliceLister.SpreadPolicies(ns)
}

func (c *countingLister) ClusterSpreadPolicies() ([]*v1alpha1.ClusterSpreadPolicy, error) {
	if c.failClusterPolicies != nil {
		return nil, c.failClusterPolicies
	}
	return c.SliceLister.ClusterSpreadPolicies()
}

func TestResolveReadsTheNamespaceOnlyWhenASelectorNeedsIt(t *testing.T) {
	pod := spreadtest.MakePod().Name("p").Namespace("shop").Obj()
	tests := []struct {
		name      string
		policies  []*v1alpha1.ClusterSpreadPolicy
		wantReads int
	}{
		{name: "no namespaceSelector anywhere -> 0 reads", policies: []*v1alpha1.ClusterSpreadPolicy{csp("a").Obj(), csp("b").Obj()}, wantReads: 0},
		{name: "3 policies with namespaceSelectors, none matching -> 1 read", wantReads: 1, policies: []*v1alpha1.ClusterSpreadPolicy{
			csp("a").NamespaceLabel("env", "a").Obj(), csp("b").NamespaceLabel("env", "b").Obj(), csp("c").NamespaceLabel("env", "c").Obj(),
		}},
		{name: "namespaceSelector on a policy whose podSelector misses -> 0 reads", wantReads: 0, policies: []*v1alpha1.ClusterSpreadPolicy{
			csp("a").PodLabel("app", "api").NamespaceLabel("env", "a").Obj(),
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := &countingLister{SliceLister: policy.SliceLister{ClusterPolicies: tt.policies}}
			if _, err := policy.Resolve(pod, l); err != nil {
				t.Fatalf("Resolve: %v", err)
			}
			if l.namespaceReads != tt.wantReads {
				t.Errorf("Namespace was read %d times, want %d", l.namespaceReads, tt.wantReads)
			}
		})
	}
}

func TestResolveErrors(t *testing.T) {
	errBoom := errors.New("boom")
	withNsSelector := pt.Lister(csp("prod").NamespaceLabel("env", "prod"))
	tests := []struct {
		name    string
		pod     *v1.Pod
		lister  *countingLister
		wantErr error
		wantMsg string
	}{
		{name: "nil pod -> error", pod: nil, lister: &countingLister{}, wantMsg: "no pod to resolve a policy for"},
		{name: "pod without namespace -> error naming the pod", pod: spreadtest.MakePod().Name("web-1").Namespace("").Obj(),
			lister: &countingLister{}, wantMsg: `pod "web-1" has no namespace`},
		{name: "listing SpreadPolicies fails -> wrapped error", pod: spreadtest.MakePod().Name("p").Namespace("shop").Obj(),
			lister: &countingLister{failPolicies: errBoom}, wantErr: errBoom, wantMsg: `listing the SpreadPolicies of namespace "shop": boom`},
		{name: "listing ClusterSpreadPolicies fails -> wrapped error", pod: spreadtest.MakePod().Name("p").Namespace("shop").Obj(),
			lister: &countingLister{failClusterPolicies: errBoom}, wantErr: errBoom, wantMsg: "listing the ClusterSpreadPolicies: boom"},
		{name: "reading the namespace fails -> wrapped error, not 'no policy'", pod: spreadtest.MakePod().Name("p").Namespace("shop").Obj(),
			lister: &countingLister{SliceLister: withNsSelector, failNamespace: errBoom}, wantErr: errBoom, wantMsg: `reading namespace "shop": boom`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := policy.Resolve(tt.pod, tt.lister)
			if err == nil {
				t.Fatalf("Resolve = %+v, nil; want an error", got)
			}
			if err.Error() != tt.wantMsg {
				t.Errorf("error = %q, want %q", err, tt.wantMsg)
			}
			if tt.wantErr != nil && !errors.Is(err, tt.wantErr) {
				t.Errorf("error %q does not wrap %q", err, tt.wantErr)
			}
		})
	}
}

func ptr[T any](v T) *T { return &v }

// verdictLister is a Lister that knows a verdict on each policy uid, at the
// generation it validated.
type verdictLister struct {
	policy.SliceLister
	verdicts map[types.UID]verdictAt
}

type verdictAt struct {
	generation int64
	valid      bool
}

func (l verdictLister) PolicyVerdict(uid types.UID, generation int64) (valid, known bool) {
	v, ok := l.verdicts[uid]
	if !ok || v.generation != generation {
		return false, false
	}
	return v.valid, true
}

func TestResolveTakesTheVerdictOfTheGenerationItIsAsked(t *testing.T) {
	pod := spreadtest.MakePod().Namespace("shop").Name("web-1").Label("app", "web").Obj()
	withMeta := func(w *pt.SpreadPolicyWrapper, uid types.UID, gen int64) *v1alpha1.SpreadPolicy {
		p := w.Generation(gen).Obj()
		p.UID = uid
		return p
	}
	high := withMeta(sp("shop", "high").Priority(5), "uid-high", 2)
	low := withMeta(sp("shop", "low").Priority(1), "uid-low", 1)
	// invalid selects the pod, but a maxSkew of 0 fails validation.
	invalid := withMeta(pt.MakeSpreadPolicy().Namespace("shop").Name("invalid").Priority(9).
		Constraint(pt.MakeConstraint().Hostname().MaxSkew(0).DoNotSchedule().Obj()), "uid-invalid", 1)
	tests := []struct {
		name     string
		verdicts map[types.UID]verdictAt
		want     string
	}{
		{name: "no verdicts -> each policy validated: the invalid one passed over, high applies", want: "shop/high"},
		{name: "verdict 'rejected' on high's generation -> high passed over without validating it, low applies",
			verdicts: map[types.UID]verdictAt{"uid-high": {generation: 2, valid: false}}, want: "shop/low"},
		{name: "verdict on an older generation of high -> not taken: high validated, and applies",
			verdicts: map[types.UID]verdictAt{"uid-high": {generation: 1, valid: false}}, want: "shop/high"},
		{name: "verdict 'accepted' on the invalid policy's generation -> taken, it applies",
			verdicts: map[types.UID]verdictAt{"uid-invalid": {generation: 1, valid: true}}, want: "shop/invalid"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := verdictLister{SliceLister: policy.SliceLister{Policies: []*v1alpha1.SpreadPolicy{high, low, invalid}}, verdicts: tt.verdicts}
			got, err := policy.Resolve(pod, l)
			if err != nil {
				t.Fatal(err)
			}
			if got.String() != tt.want {
				t.Errorf("Resolve = %q, want %q", got.String(), tt.want)
			}
		})
	}
}

// brokenNamespaces is a Lister whose namespace reads fail.
type brokenNamespaces struct{ policy.SliceLister }

func (brokenNamespaces) Namespace(string) (*v1.Namespace, error) {
	return nil, errors.New("the namespace cannot be read")
}

func TestResolveParsesEachGenerationsSelectors(t *testing.T) {
	web := spreadtest.MakePod().Namespace("shop").Name("web-1").Label("app", "web").Obj()
	api := spreadtest.MakePod().Namespace("shop").Name("api-1").Label("app", "api").Obj()
	stored := func(w *pt.SpreadPolicyWrapper, gen int64) *v1alpha1.SpreadPolicy {
		p := w.Generation(gen).Obj()
		p.UID = "uid-selecting"
		return p
	}
	// The steps run in order, against the selectors kept of the steps
	// before: the same policy (one uid) edited from one generation to the
	// next.
	steps := []struct {
		name   string
		policy *v1alpha1.SpreadPolicy
		pod    *v1.Pod
		want   string
	}{
		{name: "generation 1 selects app=web -> it applies to a web pod",
			policy: stored(sp("shop", "selecting").PodLabel("app", "web"), 1), pod: web, want: "shop/selecting"},
		{name: "generation 1 again -> not to an api pod",
			policy: stored(sp("shop", "selecting").PodLabel("app", "web"), 1), pod: api, want: ""},
		{name: "generation 2 selects app=api -> it applies to an api pod: the selector of generation 1 is not kept",
			policy: stored(sp("shop", "selecting").PodLabel("app", "api"), 2), pod: api, want: "shop/selecting"},
		{name: "generation 2 again -> no longer to a web pod",
			policy: stored(sp("shop", "selecting").PodLabel("app", "api"), 2), pod: web, want: ""},
	}
	for _, st := range steps {
		t.Run(st.name, func(t *testing.T) {
			got, err := policy.Resolve(st.pod, policy.SliceLister{Policies: []*v1alpha1.SpreadPolicy{st.policy}})
			if err != nil {
				t.Fatal(err)
			}
			if got.String() != st.want {
				t.Errorf("Resolve = %q, want %q", got.String(), st.want)
			}
		})
	}
}

func TestResolveReadsTheNamespaceOnlyForASelectorOfNamespaces(t *testing.T) {
	pod := spreadtest.MakePod().Namespace("shop").Name("web-1").Label("app", "web").Obj()
	tests := []struct {
		name    string
		policy  *v1alpha1.ClusterSpreadPolicy
		want    string
		wantErr bool
	}{
		{name: "an empty namespaceSelector selects every namespace -> applies without reading the namespace",
			policy: csp("everywhere").NamespaceSelector(&metav1.LabelSelector{}).Obj(), want: "everywhere"},
		{name: "no namespaceSelector -> applies without reading the namespace",
			policy: csp("unscoped").Obj(), want: "unscoped"},
		{name: "a namespaceSelector with a label -> the namespace is read, and its failure returned",
			policy: csp("prod").NamespaceLabel("env", "prod").Obj(), wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := brokenNamespaces{policy.SliceLister{ClusterPolicies: []*v1alpha1.ClusterSpreadPolicy{tt.policy}}}
			got, err := policy.Resolve(pod, l)
			if (err != nil) != tt.wantErr {
				t.Fatalf("Resolve error = %v, want an error: %v", err, tt.wantErr)
			}
			if got.String() != tt.want {
				t.Errorf("Resolve = %q, want %q", got.String(), tt.want)
			}
		})
	}
}
