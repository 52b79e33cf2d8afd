package engine_test

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/utils/ptr"

	"github.com/spreadguard/spreadguard/pkg/apis/spreadguard/v1alpha1"
	"github.com/spreadguard/spreadguard/pkg/engine"
	"github.com/spreadguard/spreadguard/pkg/lookup"
	"github.com/spreadguard/spreadguard/pkg/spread"
	"github.com/spreadguard/spreadguard/pkg/spread/spreadtest"
)

// cluster has namespace shop with a SpreadPolicy for every pod, a Warn policy
// for canaries, a ReplicaSet web-abc and a Service.
const cluster = `
apiVersion: v1
kind: Namespace
metadata: {name: shop}
---
apiVersion: v1
kind: Namespace
metadata: {name: plain}
---
apiVersion: spreadguard.io/v1alpha1
kind: SpreadPolicy
metadata: {name: zones, namespace: shop}
spec: {constraints: [{maxSkew: 1, topologyKey: topology.kubernetes.io/zone, whenUnsatisfiable: DoNotSchedule}]}
---
apiVersion: spreadguard.io/v1alpha1
kind: SpreadPolicy
metadata: {name: warn, namespace: shop}
spec:
  priority: 10
  podSelector: {matchLabels: {tier: canary}}
  validation: {action: Warn}
  constraints:
  - {maxSkew: 1, topologyKey: topology.kubernetes.io/zone, whenUnsatisfiable: DoNotSchedule}
---
apiVersion: apps/v1
kind: ReplicaSet
metadata: {name: web-abc, namespace: shop}
spec:
  selector: {matchLabels: {app: web, pod-template-hash: abc}}
  template:
    metadata: {labels: {app: web, pod-template-hash: abc}}
    spec: {containers: [{name: c, image: i}]}
---
apiVersion: v1
kind: Service
metadata: {name: web, namespace: shop}
spec: {selector: {app: web}}
`

// nodes are three zones of two nodes; zone c is cordoned and tainted as the
// node lifecycle controller does.
const nodes = `
---
{apiVersion: v1, kind: Node, metadata: {name: a1, labels: {kubernetes.io/hostname: a1, topology.kubernetes.io/zone: a}}}
---
{apiVersion: v1, kind: Node, metadata: {name: a2, labels: {kubernetes.io/hostname: a2, topology.kubernetes.io/zone: a}}}
---
{apiVersion: v1, kind: Node, metadata: {name: b1, labels: {kubernetes.io/hostname: b1, topology.kubernetes.io/zone: b}}}
---
{apiVersion: v1, kind: Node, metadata: {name: b2, labels: {kubernetes.io/hostname: b2, topology.kubernetes.io/zone: b}}}
---
apiVersion: v1
kind: Node
metadata: {name: c1, labels: {kubernetes.io/hostname: c1, topology.kubernetes.io/zone: c}}
spec: {unschedulable: true, taints: [{key: node.kubernetes.io/unschedulable, effect: NoSchedule}]}
---
apiVersion: v1
kind: Node
metadata: {name: c2, labels: {kubernetes.io/hostname: c2, topology.kubernetes.io/zone: c}}
spec: {unschedulable: true, taints: [{key: node.kubernetes.io/unschedulable, effect: NoSchedule}]}
`

// boundPods are web-abc's pods: counts [2,2,0] over zones a, b, c.
const boundPods = `
---
{apiVersion: v1, kind: Pod, metadata: {name: web-1, namespace: shop, labels: {app: web, pod-template-hash: abc}}, spec: {nodeName: a1, containers: [{name: c, image: i}]}}
---
{apiVersion: v1, kind: Pod, metadata: {name: web-2, namespace: shop, labels: {app: web, pod-template-hash: abc}}, spec: {nodeName: a2, containers: [{name: c, image: i}]}}
---
{apiVersion: v1, kind: Pod, metadata: {name: web-3, namespace: shop, labels: {app: web, pod-template-hash: abc}}, spec: {nodeName: b1, containers: [{name: c, image: i}]}}
---
{apiVersion: v1, kind: Pod, metadata: {name: web-4, namespace: shop, labels: {app: web, pod-template-hash: abc}}, spec: {nodeName: b2, containers: [{name: c, image: i}]}}
`

// loaded is the test cluster as the engine reads it: through the
// webhook's Sources, over a Store decoded from the file.
type loaded struct {
	*lookup.Sources
	store *lookup.Store
}

// Snapshot is the store's nodes and pods.
func (l loaded) Snapshot() spread.Snapshot { return l.store.Snapshot() }

func load(t *testing.T) loaded {
	t.Helper()
	store, err := lookup.Decode("cluster.yaml", strings.NewReader(cluster+nodes+boundPods))
	if err != nil {
		t.Fatalf("decoding the test cluster: %v", err)
	}
	return loaded{Sources: lookup.NewSources(store), store: store}
}

func webPod() *spreadtest.PodWrapper {
	return spreadtest.MakePod().Name("web-5").Namespace("shop").
		Label("app", "web").Label("pod-template-hash", "abc").
		ControlledBy("ReplicaSet", "apps/v1", "web-abc")
}

// injectedBy is a web pod annotated with policy and carrying one hard zone
// constraint of maxSkew that selects app=old: what the policy wrote while
// the pod was labelled app=old or, with a maxSkew the policy does not
// write, a constraint someone else wrote.
func injectedBy(policy string, maxSkew int32) *v1.Pod {
	return webPod().Annotation(v1alpha1.AnnotationPolicy, policy).SpreadConstraint(
		spreadtest.Constraint(maxSkew, v1.LabelTopologyZone).DoNotSchedule().MatchLabel("app", "old").
			NodeTaintsPolicy(v1.NodeInclusionPolicyHonor).Obj()).Obj()
}

var config = engine.Config{DefaultAction: v1alpha1.ActionDeny, ExcludedNamespaces: []string{"kube-system"}}

func TestMutate(t *testing.T) {
	injected := []v1.TopologySpreadConstraint{{
		MaxSkew:           1,
		TopologyKey:       v1.LabelTopologyZone,
		WhenUnsatisfiable: v1.DoNotSchedule,
		LabelSelector:     &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web", "pod-template-hash": "abc"}},
		NodeTaintsPolicy:  ptr.To(v1.NodeInclusionPolicyHonor),
	}}
	tests := []struct {
		name         string
		pod          *v1.Pod
		wantInjected []v1.TopologySpreadConstraint
		wantPolicy   string
		wantSkipped  engine.SkipReason
	}{
		{
			name:         "a ReplicaSet's pod gets the namespace policy's constraints with the ReplicaSet and Service selector",
			pod:          webPod().Obj(),
			wantInjected: injected,
			wantPolicy:   "shop/zones",
		},
		{
			name:         "a pod with annotations of its own gets the policy annotation in a map of the copy's, its own map unchanged",
			pod:          webPod().Annotation("team", "shop").Obj(),
			wantInjected: injected,
			wantPolicy:   "shop/zones",
		},
		{
			name:        "a pod that declares its own constraint is left as it is",
			pod:         webPod().SpreadConstraint(spreadtest.Constraint(2, v1.LabelHostname).ScheduleAnyway().MatchLabel("app", "web").Obj()).Obj(),
			wantSkipped: engine.SkipOwnConstraints,
		},
		{
			name:        "a pod nobody owns or selects gets nothing though a policy applies",
			pod:         spreadtest.MakePod().Name("lonely").Namespace("shop").Label("app", "other").Obj(),
			wantSkipped: engine.SkipNoSelector,
			wantPolicy:  "shop/zones",
		},
		{
			name:        "a pod in a namespace without a policy gets nothing",
			pod:         spreadtest.MakePod().Name("p").Namespace("plain").Label("app", "web").Obj(),
			wantSkipped: engine.SkipNoPolicy,
		},
		{
			name:        "a kube-system pod is never touched",
			pod:         spreadtest.MakePod().Name("dns").Namespace("kube-system").Label("app", "web").Obj(),
			wantSkipped: engine.SkipExcludedNamespace,
		},
		{
			name: "a DaemonSet's pod that a Service selects -> never mutated, it runs on its node",
			pod: spreadtest.MakePod().Name("agent-x1").Namespace("shop").Label("app", "web").
				ControlledBy("DaemonSet", "apps/v1", "agent").NodeAffinityField(metav1.ObjectNameField, v1.NodeSelectorOpIn, "node-1").Obj(),
			wantSkipped: engine.SkipDaemonSet,
		},
		{
			name:        "a mirror pod that a Service selects -> never mutated, the kubelet runs it",
			pod:         spreadtest.MakePod().Name("static-node-1").Namespace("shop").Label("app", "web").Annotation(v1.MirrorPodAnnotationKey, "abc").Obj(),
			wantSkipped: engine.SkipMirror,
		},
		{
			name: "a ReplicaSet's pod pinned to node-1 by metadata.name -> never mutated",
			pod: webPod().NodeAffinityField(metav1.ObjectNameField, v1.NodeSelectorOpIn, "node-1").
				OrNodeAffinityTerm().NodeAffinityField(metav1.ObjectNameField, v1.NodeSelectorOpIn, "node-1").Obj(),
			wantSkipped: engine.SkipPinnedNode,
		},
		{
			name: "a ReplicaSet's pod whose affinity terms name two nodes -> mutated, the scheduler still chooses",
			pod: webPod().NodeAffinityField(metav1.ObjectNameField, v1.NodeSelectorOpIn, "node-1").
				OrNodeAffinityTerm().NodeAffinityField(metav1.ObjectNameField, v1.NodeSelectorOpIn, "node-2").Obj(),
			wantInjected: injected,
			wantPolicy:   "shop/zones",
		},
		{
			name:         "a ReplicaSet's pod whose metadata.name affinity lists two nodes -> mutated",
			pod:          webPod().NodeAffinityField(metav1.ObjectNameField, v1.NodeSelectorOpIn, "node-1", "node-2").Obj(),
			wantInjected: injected,
			wantPolicy:   "shop/zones",
		},
		{
			name:         "reinvoked after a later webhook changed the labels: the injected selector app=old is recomputed from the pod as it is now",
			pod:          injectedBy("shop/zones", 1),
			wantInjected: injected,
			wantPolicy:   "shop/zones",
		},
		{
			name:        "annotated by the policy but with maxSkew 3, which the policy does not write -> someone else's constraint, left alone",
			pod:         injectedBy("shop/zones", 3),
			wantSkipped: engine.SkipOwnConstraints,
			wantPolicy:  "shop/zones",
		},
		{
			name:        "annotated by a policy that no longer applies -> left alone",
			pod:         injectedBy("shop/gone", 1),
			wantSkipped: engine.SkipOwnConstraints,
			wantPolicy:  "shop/zones",
		},
		{
			name:        "a pod annotated spreadguard.io/skip is left as it is",
			pod:         webPod().Annotation(v1alpha1.AnnotationSkip, "true").Obj(),
			wantSkipped: engine.SkipAnnotation,
		},
	}
	src := load(t)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			before := tc.pod.DeepCopy()
			m, err := engine.Mutate(tc.pod, src, config)
			if err != nil {
				t.Fatalf("Mutate: %v", err)
			}
			if diff := cmp.Diff(before, tc.pod); diff != "" {
				t.Errorf("Mutate changed its input (-before +after):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantInjected, m.Injected); diff != "" {
				t.Errorf("injected constraints (-want +got):\n%s", diff)
			}
			if m.Skipped != tc.wantSkipped {
				t.Errorf("Skipped = %q, want %q", m.Skipped, tc.wantSkipped)
			}
			gotPolicy := ""
			if m.Policy != nil {
				gotPolicy = m.Policy.Name
			}
			if gotPolicy != tc.wantPolicy {
				t.Errorf("policy = %q, want %q", gotPolicy, tc.wantPolicy)
			}
			if tc.wantInjected == nil {
				if m.Pod != nil {
					t.Errorf("Mutate returned a mutated pod though nothing was injected")
				}
				return
			}
			if diff := cmp.Diff(tc.wantInjected, m.Pod.Spec.TopologySpreadConstraints); diff != "" {
				t.Errorf("mutated pod's constraints (-want +got):\n%s", diff)
			}
			if got := m.Pod.Annotations[v1alpha1.AnnotationPolicy]; got != tc.wantPolicy {
				t.Errorf("policy annotation = %q, want %q", got, tc.wantPolicy)
			}
			again, err := engine.Mutate(m.Pod, src, config)
			if err != nil {
				t.Fatalf("second Mutate: %v", err)
			}
			if again.Pod != nil || again.Skipped != engine.SkipUpToDate {
				t.Errorf("a second pass changed the pod (skipped %q): not idempotent", again.Skipped)
			}
		})
	}
}

func TestValidate(t *testing.T) {
	pinned := spreadtest.Constraint(1, v1.LabelTopologyZone).DoNotSchedule().
		MatchLabel("app", "web").NodeTaintsPolicy(v1.NodeInclusionPolicyIgnore).Obj()
	tests := []struct {
		name         string
		pod          *v1.Pod
		wantAllowed  bool
		wantAction   v1alpha1.ValidationAction
		wantPolicy   string
		wantWarnings int
		wantSkipped  engine.SkipReason
		wantInMsg    []string
	}{
		{
			name:        "counts [2,2,0] with zone c cordoned, nodeTaintsPolicy Ignore, maxSkew 1 -> denied naming zone c",
			pod:         webPod().SpreadConstraint(pinned).Obj(),
			wantAllowed: false,
			wantAction:  v1alpha1.ActionDeny,
			wantPolicy:  "shop/zones",
			wantInMsg:   []string{"spec.topologySpreadConstraints[0]", "c"},
		},
		{
			name:         "the same pod under a Warn policy is allowed with the message as a warning",
			pod:          webPod().Label("tier", "canary").SpreadConstraint(pinned).Obj(),
			wantAllowed:  true,
			wantAction:   v1alpha1.ActionWarn,
			wantPolicy:   "shop/warn",
			wantWarnings: 1,
			wantInMsg:    []string{"spec.topologySpreadConstraints[0]"},
		},
		{
			name: "the same constraint with nodeTaintsPolicy Honor -> allowed",
			pod: webPod().SpreadConstraint(spreadtest.Constraint(1, v1.LabelTopologyZone).DoNotSchedule().
				MatchLabel("app", "web").NodeTaintsPolicy(v1.NodeInclusionPolicyHonor).Obj()).Obj(),
			wantAllowed: true,
		},
		{
			name:         "a pod whose nodeSelector matches no node is allowed with a warning: not a spread problem",
			pod:          webPod().NodeSelector(v1.LabelTopologyZone, "mars").SpreadConstraint(pinned).Obj(),
			wantAllowed:  true,
			wantWarnings: 1,
		},
		{
			name:        "a pod already bound to a node is not checked",
			pod:         webPod().Node("c1").SpreadConstraint(pinned).Obj(),
			wantAllowed: true,
			wantSkipped: engine.SkipBound,
		},
		{
			name:        "a kube-system pod is never checked",
			pod:         webPod().Namespace("kube-system").SpreadConstraint(pinned).Obj(),
			wantAllowed: true,
			wantSkipped: engine.SkipExcludedNamespace,
		},
	}
	c := load(t)
	checkers := map[string]spread.Checker{"snapshot": c.Snapshot(), "index": spread.IndexFromSnapshot(c.Snapshot())}
	for _, tc := range tests {
		for checkerName, checker := range checkers {
			for _, explain := range []bool{false, true} {
				t.Run(tc.name, func(t *testing.T) {
					v, err := engine.Validate(tc.pod, c, checker, config, explain)
					if err != nil {
						t.Fatalf("Validate (%s, explain %v): %v", checkerName, explain, err)
					}
					if v.Allowed != tc.wantAllowed || v.Action != tc.wantAction || v.Policy.String() != tc.wantPolicy ||
						len(v.Warnings) != tc.wantWarnings || v.Skipped != tc.wantSkipped {
						t.Errorf("Validate (%s, explain %v) = allowed %v action %q policy %q %d warnings skipped %q, "+
							"want allowed %v action %q policy %q %d warnings skipped %q; message: %s",
							checkerName, explain, v.Allowed, v.Action, v.Policy.String(), len(v.Warnings), v.Skipped,
							tc.wantAllowed, tc.wantAction, tc.wantPolicy, tc.wantWarnings, tc.wantSkipped, v.Message)
					}
					for _, s := range tc.wantInMsg {
						if !strings.Contains(v.Message, s) {
							t.Errorf("message %q does not contain %q", v.Message, s)
						}
					}
				})
			}
		}
	}
}

func TestReviewPodMutatesThenValidatesTheStoredPod(t *testing.T) {
	c := load(t)
	r, err := engine.ReviewPod(webPod().Obj(), c, spread.IndexFromSnapshot(c.Snapshot()), config)
	if err != nil {
		t.Fatalf("ReviewPod: %v", err)
	}
	if r.Mutation.Pod == nil || r.Pod != r.Mutation.Pod {
		t.Fatalf("ReviewPod did not validate the mutated pod (skipped %q)", r.Mutation.Skipped)
	}
	// Injected constraints honour taints, so cordoned zone c does not pin
	// the minimum at 0: counts [2,2], global minimum 2, both zones feasible.
	if !r.Validation.Allowed || r.Validation.Result == nil {
		t.Fatalf("the injected pod was not allowed: %s", r.Validation.Message)
	}
	if diff := cmp.Diff([]string{"a1", "a2", "b1", "b2"}, r.Validation.Result.FeasibleNodes); diff != "" {
		t.Errorf("feasible nodes (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(map[string]int{"a": 2, "b": 2}, r.Validation.Result.Constraints[0].Domains); diff != "" {
		t.Errorf("domains (-want +got):\n%s", diff)
	}
}

func TestNoCandidateWarningNamesTheZonesNoNodeComesUpIn(t *testing.T) {
	// The pod asks for zone d by nodeSelector; no node is there, and the
	// NodePool that requires d has a node class that cannot serve it.
	nodes := []*v1.Node{spreadtest.MakeNode().Name("a1").Zone("a").Obj(), spreadtest.MakeNode().Name("b1").Zone("b").Obj()}
	zoneD := []spread.UnservedZone{{Zone: "d", NodePool: "general", NodeClass: "EC2NodeClass default"}}
	overZones := spreadtest.Constraint(1, v1.LabelTopologyZone).DoNotSchedule().MatchLabel("app", "web").Obj()
	overHosts := spreadtest.Constraint(1, v1.LabelHostname).DoNotSchedule().MatchLabel("app", "web").Obj()
	tests := []struct {
		name       string
		constraint v1.TopologySpreadConstraint
		unserved   []spread.UnservedZone
		detail     spread.MessageDetail
		want       string
	}{
		{
			name:       "zone constraint, nodeSelector zone d, d unserved, messageDetail domains -> the warning names zone d, not the NodePool",
			constraint: overZones, unserved: zoneD, detail: spread.DetailDomains,
			want: engine.NoCandidateNodesWarning + ". Zone d is required by an autoscaler's node pool whose node class cannot serve it: no node comes up there, so pods that need it stay Pending.",
		},
		{
			name:       "the same under messageDetail nodes -> the NodePool and its node class named",
			constraint: overZones, unserved: zoneD, detail: spread.DetailNodes,
			want: engine.NoCandidateNodesWarning + ". Zone d is required by NodePool general (EC2NodeClass default), whose node class cannot serve it: no node comes up there, so pods that need it stay Pending.",
		},
		{
			name:       "zone constraint, every zone served -> the plain warning",
			constraint: overZones, detail: spread.DetailDomains,
			want: engine.NoCandidateNodesWarning,
		},
		{
			name:       "hostname constraint, d unserved -> the plain warning: the pod's spread does not count zones",
			constraint: overHosts, unserved: zoneD, detail: spread.DetailDomains,
			want: engine.NoCandidateNodesWarning,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			snap := spread.Snapshot{Nodes: nodes, UnservedZones: tt.unserved}
			pod := webPod().NodeSelector(v1.LabelTopologyZone, "d").SpreadConstraint(tt.constraint).Obj()
			cfg := config
			cfg.MessageDetail = tt.detail
			v, err := engine.Validate(pod, load(t), snap, cfg, false)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff([]string{tt.want}, v.Warnings); diff != "" {
				t.Errorf("warnings (-want +got):\n%s", diff)
			}
		})
	}
}

func TestMutateLeavesTheNamespacesItDoesNotServe(t *testing.T) {
	ns := func(name string, ls map[string]string) *v1.Namespace {
		return &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: ls}}
	}
	store, err := lookup.NewStore(
		ns("ignored", map[string]string{v1alpha1.LabelIgnoreNamespace: "true", "env": "prod"}),
		ns("dev", map[string]string{"env": "dev"}),
		ns("prod", map[string]string{"env": "prod"}))
	if err != nil {
		t.Fatal(err)
	}
	prod, err := labels.Parse("env=prod")
	if err != nil {
		t.Fatal(err)
	}
	cfg := engine.Config{DefaultAction: v1alpha1.ActionDeny, ExcludedNamespaces: []string{"kube-system"}, NamespaceSelector: prod}
	tests := []struct {
		name      string
		namespace string
		want      engine.SkipReason
	}{
		{name: "a pod of a namespace labelled spreadguard.io/ignore=true -> excluded", namespace: "ignored", want: engine.SkipExcludedNamespace},
		{name: "a pod of a namespace the namespaceSelector env=prod does not select -> excluded", namespace: "dev", want: engine.SkipExcludedNamespace},
		{name: "a pod of kube-system, excluded by name -> excluded", namespace: "kube-system", want: engine.SkipExcludedNamespace},
		{name: "a pod of a namespace the namespaceSelector selects -> served (no policy there)", namespace: "prod", want: engine.SkipNoPolicy},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pod := spreadtest.MakePod().Name("p").Namespace(tt.namespace).Label("app", "web").Obj()
			m, err := engine.Mutate(pod, lookup.NewSources(store), cfg)
			if err != nil {
				t.Fatal(err)
			}
			if m.Skipped != tt.want {
				t.Errorf("Mutate skipped %v, want %v", m.Skipped, tt.want)
			}
		})
	}
}
