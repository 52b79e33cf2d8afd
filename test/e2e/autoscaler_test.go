//go:build e2e

package e2e

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/spreadguard/spreadguard/pkg/apis/spreadguard/v1alpha1"
	"github.com/spreadguard/spreadguard/pkg/spread/spreadtest"
)

const (
	// envStartFlagsCmd is a shell command that starts the stopped webhook
	// with the flags it is given added to its command line, for that start
	// only (`hack/dev.sh webhook-start` for `make e2e`). The autoscaler
	// scenarios switch NodePool awareness with it; without it they run only
	// the part that leaves spreadguard out.
	envStartFlagsCmd = "SPREADGUARD_E2E_START_FLAGS_CMD"
	// envRequireKarpenter, "1" where the cluster runs Karpenter's kwok
	// provider, makes its absence a failure instead of a skip.
	envRequireKarpenter = "SPREADGUARD_E2E_REQUIRE_KARPENTER"

	// karpenterFlag switches the webhook's reading of Karpenter NodePools.
	karpenterFlag = "--autoscaler-karpenter"
	// zonesFlag is the chart's autoscaler.zones: the zones new nodes may
	// come up in, for a NodePool that leaves the zone open.
	zonesFlag = "--autoscaler-zones"
	// admittedForNewNode starts the warning of a pod that no current node
	// can take and a new node can; the zone follows. Under the chart's
	// messageDetail (domains) it does not name the NodePool.
	admittedForNewNode = "admitted: no current node fits; a new node that an autoscaler can add in "

	// poolKey labels and taints the nodes of the autoscaler scenarios and
	// the nodes their NodePool launches: the scenarios' pods select and
	// tolerate it, so no other pod lands there or makes Karpenter launch a
	// node.
	poolKey   = "e2e.spreadguard.io/pool"
	poolValue = "karpenter"
	// kwokNodeAnnotation marks the nodes the local cluster's kwok
	// controller keeps Ready; Karpenter's kwok provider sets it on the
	// nodes it launches too.
	kwokNodeAnnotation = "kwok.x-k8s.io/node"
	// kwokNodeClass is the KWOKNodeClass hack/local-cluster.sh creates.
	kwokNodeClass = "default"

	// launchTimeout bounds Karpenter's batch window, its NodeClaim, the
	// node registered and Ready, and the pod bound to it.
	launchTimeout = time.Minute
	// noLaunchWait is how long a scenario watches for a NodeClaim that must
	// not come: three times the local cluster's longest batch window (3s),
	// and four times what Karpenter takes there to launch a node for a pod
	// left Pending (2.3s from the Deployment to 3 replicas Running).
	noLaunchWait = 10 * time.Second
)

// The zones of the instance types of Karpenter's kwok provider, apart from
// the zones of the suite's other nodes.
const (
	testZoneA = "test-zone-a"
	testZoneB = "test-zone-b"
	testZoneC = "test-zone-c"
	testZoneD = "test-zone-d"
)

var (
	nodePoolKind      = schema.GroupVersionKind{Group: "karpenter.sh", Version: "v1", Kind: "NodePool"}
	nodePoolListKind  = schema.GroupVersionKind{Group: "karpenter.sh", Version: "v1", Kind: "NodePoolList"}
	nodeClaimListKind = schema.GroupVersionKind{Group: "karpenter.sh", Version: "v1", Kind: "NodeClaimList"}
	kwokNodeClassKind = schema.GroupVersionKind{Group: "karpenter.kwok.sh", Version: "v1alpha1", Kind: "KWOKNodeClass"}
	// nodePoolExists selects what Karpenter launched: it labels its
	// NodeClaims and nodes with their NodePool's name.
	nodePoolExists = mustRequirement(labels.NewRequirement("karpenter.sh/nodepool", selection.Exists, nil))
)

// TestAutoscaler runs the scenarios of a cluster with a node autoscaler:
// Karpenter's kwok provider launches a node for a pod the scheduler leaves
// Pending, so spreadguard must not refuse a pod that a new node would take.
// Each scenario has kwok nodes of its own for a Deployment whose next
// replica none of them can take, and a NodePool that can add the node it
// needs. They run after one another, as they restart the webhook.
func TestAutoscaler(t *testing.T) {
	requireKarpenter(t)
	// What a run killed halfway left behind.
	if err := removeAutoscalerNodes(t.Context()); err != nil {
		t.Fatal(err)
	}
	webhook := newWebhookSwitch(t)
	scenarios := []autoscalerScenario{
		{
			name:      "minDomains 3 with nodes in 2 zones: the third replica needs a node in the third zone",
			nodePool:  "e2e-min-domains",
			nodeZones: []string{testZoneA, testZoneB},
			constraint: spreadtest.Constraint(1, zoneKey).DoNotSchedule().MinDomains(3).
				NodeAffinityPolicy(v1.NodeInclusionPolicyHonor).MatchLabel("app", "web").Obj(),
			launchZone: testZoneC,
		},
		{
			name:      "a zone whose node is cordoned, counted by nodeTaintsPolicy Ignore: the third replica needs a new node in that zone",
			nodePool:  "e2e-cordoned",
			nodeZones: []string{testZoneA, testZoneB, testZoneC},
			cordoned:  testZoneB,
			constraint: spreadtest.Constraint(1, zoneKey).DoNotSchedule().
				NodeAffinityPolicy(v1.NodeInclusionPolicyHonor).NodeTaintsPolicy(v1.NodeInclusionPolicyIgnore).
				MatchLabel("app", "web").Obj(),
			launchZone: testZoneB,
		},
		{
			// As the NodePools of Karpenter's getting-started guide: no
			// zone requirement, the zones are the offerings' (here the
			// kwok provider's four). The suite's other nodes are in zones
			// no offering has; the replicas' affinity keeps them out, as
			// in a cluster whose nodes are all Karpenter's.
			name:      "a NodePool with no zone requirement, offerings in 4 zones, nodes in 3, minDomains 4: the fourth replica needs a node in the fourth zone",
			nodePool:  "e2e-open-zone",
			nodeZones: []string{testZoneA, testZoneB, testZoneC},
			openZone:  true,
			podZones:  []string{testZoneA, testZoneB, testZoneC, testZoneD},
			constraint: spreadtest.Constraint(1, zoneKey).DoNotSchedule().MinDomains(4).
				NodeAffinityPolicy(v1.NodeInclusionPolicyHonor).MatchLabel("app", "web").Obj(),
			launchZone:   testZoneD,
			control:      "with autoscaler.zones unset, the NodePool's zones are those seen on nodes",
			controlFlags: []string{karpenterFlag + "=true"},
			awareness:    "with autoscaler.zones naming the offerings' 4 zones",
			awareFlags: []string{karpenterFlag + "=true",
				zonesFlag + "=" + strings.Join([]string{testZoneA, testZoneB, testZoneC, testZoneD}, ",")},
		},
	}
	for _, s := range scenarios {
		t.Run(s.name, func(t *testing.T) { s.run(t, webhook) })
	}
}

// autoscalerScenario is a Deployment "web" with one replica on each of
// the scenario's schedulable nodes, whose next replica no current node can
// take and a node from the scenario's NodePool can.
type autoscalerScenario struct {
	name     string
	nodePool string
	// nodeZones are the zones of the scenario's nodes, one node each.
	nodeZones []string
	// cordoned is the zone whose node is cordoned, if any.
	cordoned string
	// openZone leaves the zone out of the NodePool's requirements; else
	// it requires test zones a, b and c.
	openZone bool
	// podZones, if set, are the zones the replicas' node affinity requires.
	podZones []string
	// constraint is the replicas' hard zone constraint.
	constraint v1.TopologySpreadConstraint
	// launchZone is where the next replica's node must be launched.
	launchZone string
	// control and controlFlags are the webhook under which the next
	// replica is refused; awareness and awareFlags the one under which it
	// is admitted. Empty: without, then with, NodePool awareness.
	control, awareness       string
	controlFlags, awareFlags []string
}

// placed is how many replicas the scenario's nodes take: one per
// schedulable node.
func (s autoscalerScenario) placed() int32 {
	n := int32(len(s.nodeZones))
	if s.cordoned != "" {
		n--
	}
	return n
}

// nth names the next replica.
func (s autoscalerScenario) nth() string {
	return [...]string{"first", "second", "third", "fourth", "fifth"}[s.placed()]
}

func (s autoscalerScenario) run(t *testing.T, webhook *webhookSwitch) {
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		if err := removeAutoscalerNodes(ctx); err != nil {
			t.Error(err)
		}
	})
	for _, zone := range s.nodeZones {
		createPoolNode(t, zone, zone == s.cordoned)
	}
	pool := makeNodePool(s.nodePool)
	if !s.openZone {
		pool = pool.Zones(testZoneA, testZoneB, testZoneC)
	}
	if err := k8s.Create(t.Context(), pool.Obj()); err != nil {
		t.Fatalf("create NodePool %s: %v", s.nodePool, err)
	}
	control, controlFlags := cmp.Or(s.control, "without NodePool awareness"), s.controlFlags
	if controlFlags == nil {
		controlFlags = []string{karpenterFlag + "=false"}
	}
	awareness, awareFlags := cmp.Or(s.awareness, "with NodePool awareness"), s.awareFlags
	if awareFlags == nil {
		awareFlags = []string{karpenterFlag + "=true"}
	}

	t.Run(fmt.Sprintf("%s, the %s replica is refused and Karpenter launches no node", control, s.nth()), func(t *testing.T) {
		webhook.restart(t, controlFlags...)
		s.refused(t)
	})
	t.Run(fmt.Sprintf("with spreadguard left out, Karpenter launches a node in %s for the %s replica", s.launchZone, s.nth()), s.launchedWithoutSpreadguard)
	t.Run(fmt.Sprintf("%s, the %s replica is admitted with a warning, Karpenter launches its node in %s and every replica runs", awareness, s.nth(), s.launchZone), func(t *testing.T) {
		webhook.restart(t, awareFlags...)
		s.admitted(t)
	})
}

// replica is a pod of the Deployment, for its template and for dry runs of
// one more replica.
func (s autoscalerScenario) replica() *v1.Pod {
	p := spreadtest.MakePod().Name("web-next").Label("app", "web").
		NodeSelector(poolKey, poolValue).
		Toleration(poolKey, v1.TolerationOpEqual, poolValue, v1.TaintEffectNoSchedule).
		SpreadConstraint(s.constraint)
	if s.podZones != nil {
		p = p.NodeAffinityIn(zoneKey, s.podZones...)
	}
	return pod(p)
}

func (s autoscalerScenario) deployment(replicas int32) *appsv1.Deployment {
	return makeDeployment("web").Replicas(replicas).PodSpec(s.replica().Spec).Obj()
}

// placement is one replica in each schedulable zone of the scenario and
// in each of launched, and none in the cluster's other zones.
func (s autoscalerScenario) placement(launched ...string) map[string]int {
	want := map[string]int{}
	for _, z := range cluster.zones {
		want[z] = 0
	}
	for _, z := range s.nodeZones {
		if z != s.cordoned {
			want[z]++
		}
	}
	for _, z := range launched {
		want[z]++
	}
	return want
}

// place runs s.placed() replicas, one in each zone they may use, and
// returns the Deployment's pod selector.
func (s autoscalerScenario) place(f *framework) labels.Selector {
	f.t.Helper()
	web := labels.SelectorFromSet(labels.Set{"app": "web"})
	f.create(s.deployment(s.placed()))
	f.expectZones(f.waitRunning(web, int(s.placed()), placeTimeout), s.placement())
	return web
}

func (s autoscalerScenario) refused(t *testing.T) {
	f := newFramework(t)
	// Before the next part: its webhook would admit the pod this
	// Deployment keeps trying to create.
	t.Cleanup(f.removeLaunched)
	web := s.place(f)
	next := s.replica()
	f.eventually(policyChangeTimeout, fmt.Sprintf("the webhook counts the %d replicas and denies a %s (dry run)", s.placed(), s.nth()), func(ctx context.Context) error {
		if _, err := f.dryRunCreate(ctx, k8s, next); !deniedByWebhook(err) {
			return fmt.Errorf("want a denial, got %v", err)
		}
		return nil
	})
	f.scale("web", s.placed()+1)
	f.eventually(30*time.Second, "the ReplicaSet reports spreadguard's refusal of its "+s.nth()+" pod", func(ctx context.Context) error {
		msgs, err := f.failedCreates(ctx)
		if err != nil {
			return err
		}
		if !slices.ContainsFunc(msgs, func(m string) bool { return strings.Contains(m, "spreadguard") }) {
			return fmt.Errorf("no FailedCreate event naming spreadguard; FailedCreate events: %q", msgs)
		}
		return nil
	})
	// A refused pod never goes Pending, so Karpenter has nothing to act on.
	f.consistently(noLaunchWait, fmt.Sprintf("Karpenter launches no node and the Deployment keeps %d pods", s.placed()), func(ctx context.Context) error {
		claims, err := poolNodeClaims(ctx)
		if err != nil {
			return err
		}
		if len(claims) != 0 {
			return fmt.Errorf("Karpenter launched %s", claimNames(claims))
		}
		var pods v1.PodList
		if err := k8s.List(ctx, &pods, client.InNamespace(f.ns), client.MatchingLabelsSelector{Selector: web}); err != nil {
			return err
		}
		if len(pods.Items) != int(s.placed()) {
			return fmt.Errorf("%d pods, want the %d placed before the refusal", len(pods.Items), s.placed())
		}
		return nil
	})
}

// launchedWithoutSpreadguard proves the autoscaler half alone: in a
// namespace spreadguard's webhooks leave out, the scheduler leaves the
// next replica Pending and Karpenter launches the node it needs.
func (s autoscalerScenario) launchedWithoutSpreadguard(t *testing.T) {
	f := newFramework(t, func(ns *v1.Namespace) { ns.Labels[v1alpha1.LabelIgnoreNamespace] = "true" })
	t.Cleanup(f.removeLaunched)
	web := labels.SelectorFromSet(labels.Set{"app": "web"})
	start := time.Now()
	all := s.placed() + 1
	f.create(s.deployment(all))
	node := f.waitLaunched(s.launchZone)
	f.expectZones(f.waitRunning(web, int(all), launchTimeout), s.placement(s.launchZone))
	t.Logf("Karpenter launched node %s in %s; %d replicas Running %v after the Deployment", node, s.launchZone, all, time.Since(start).Round(time.Millisecond))
}

func (s autoscalerScenario) admitted(t *testing.T) {
	f := newFramework(t)
	t.Cleanup(f.removeLaunched)
	web := s.place(f)
	c, warnings := warningClient(t)
	next := s.replica()
	f.eventually(policyChangeTimeout, "the webhook admits a "+s.nth()+" replica, warning that a new node in "+s.launchZone+" would take it, without naming NodePool "+s.nodePool+" (dry run)", func(ctx context.Context) error {
		warnings.take()
		if _, err := f.dryRunCreate(ctx, c, next); err != nil {
			return err
		}
		return newNodeWarning(warnings.take(), s.nodePool, s.launchZone)
	})
	start := time.Now()
	all := s.placed() + 1
	f.scale("web", all)
	node := f.waitLaunched(s.launchZone)
	f.expectZones(f.waitRunning(web, int(all), launchTimeout), s.placement(s.launchZone))
	t.Logf("Karpenter launched node %s in %s; %d replicas Running %v after the scale-up", node, s.launchZone, all, time.Since(start).Round(time.Millisecond))
	msgs, err := f.failedCreates(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if len(msgs) != 0 {
		t.Errorf("the ReplicaSet failed to create pods: %q", msgs)
	}
}

// newNodeWarning succeeds when one of warnings is the admission of a pod
// that only a new node in zone can take, worded as a tenant may read it:
// the zone, and not nodePool.
func newNodeWarning(warnings []string, nodePool, zone string) error {
	for _, w := range warnings {
		if strings.HasPrefix(w, admittedForNewNode) && strings.Contains(w, zone) && !strings.Contains(w, nodePool) {
			return nil
		}
	}
	return fmt.Errorf("no warning starting %q, naming %s and not NodePool %s, among %q", admittedForNewNode, zone, nodePool, warnings)
}

// ---------------------------------------------------------------- Karpenter

// requireKarpenter skips the test where Karpenter's kwok provider does not
// run: the suite runs on any cluster, and only the local one of `make e2e`
// has it. Where the cluster was started with Karpenter
// (envRequireKarpenter, set by hack/e2e.sh), its absence fails the test: a
// skip would let a Karpenter that did not start pass unnoticed.
func requireKarpenter(t *testing.T) {
	t.Helper()
	missing := t.Skipf
	if os.Getenv(envRequireKarpenter) == "1" {
		missing = t.Fatalf
	}
	if _, err := k8s.RESTMapper().RESTMapping(nodePoolKind.GroupKind(), nodePoolKind.Version); err != nil {
		missing("no Karpenter here (the %s kind is not served: %v); make e2e runs its kwok provider", nodePoolKind.GroupKind(), err)
	}
	nodeClass := &unstructured.Unstructured{}
	nodeClass.SetGroupVersionKind(kwokNodeClassKind)
	if err := k8s.Get(t.Context(), client.ObjectKey{Name: kwokNodeClass}, nodeClass); err != nil {
		missing("no %s %q: these scenarios need Karpenter's kwok provider as hack/local-cluster.sh runs it (%v)", kwokNodeClassKind.Kind, kwokNodeClass, err)
	}
}

// NodePoolWrapper builds a Karpenter NodePool (karpenter.sh/v1) of the
// KWOKNodeClass kwokNodeClass, whose nodes carry poolKey as a label and a
// taint. It is unstructured: the suite does not import Karpenter.
type NodePoolWrapper struct {
	name  string
	zones []string
}

func makeNodePool(name string) *NodePoolWrapper { return &NodePoolWrapper{name: name} }

// Zones sets the zones the NodePool may launch nodes in; without, it has
// no zone requirement, and Karpenter launches in its offerings' zones.
func (p *NodePoolWrapper) Zones(zones ...string) *NodePoolWrapper {
	p.zones = zones
	return p
}

// Obj returns the NodePool. It never consolidates: the scenarios decide
// when its nodes go.
func (p *NodePoolWrapper) Obj() *unstructured.Unstructured {
	requirements := []map[string]any{{"key": "karpenter.sh/capacity-type", "operator": "In", "values": []string{"on-demand"}}}
	if len(p.zones) > 0 {
		requirements = append([]map[string]any{{"key": zoneKey, "operator": "In", "values": p.zones}}, requirements...)
	}
	pool := map[string]any{
		"apiVersion": nodePoolKind.GroupVersion().String(),
		"kind":       nodePoolKind.Kind,
		"metadata":   map[string]any{"name": p.name, "labels": map[string]string{e2eLabel: "true"}},
		"spec": map[string]any{
			"disruption": map[string]any{"consolidationPolicy": "WhenEmpty", "consolidateAfter": "Never"},
			"template": map[string]any{
				"metadata": map[string]any{"labels": map[string]string{poolKey: poolValue}},
				"spec": map[string]any{
					"nodeClassRef": map[string]any{"group": kwokNodeClassKind.Group, "kind": kwokNodeClassKind.Kind, "name": kwokNodeClass},
					"taints":       []v1.Taint{poolTaint()},
					"requirements": requirements,
				},
			},
		},
	}
	// Through JSON, so that the object holds only the types unstructured
	// objects may hold.
	data, err := json.Marshal(pool)
	if err != nil {
		panic(fmt.Sprintf("NodePool %s: %v", p.name, err))
	}
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON(data); err != nil {
		panic(fmt.Sprintf("NodePool %s: %v", p.name, err))
	}
	return u
}

func mustRequirement(r *labels.Requirement, err error) labels.Requirement {
	if err != nil {
		panic(err)
	}
	return *r
}

func poolTaint() v1.Taint {
	return v1.Taint{Key: poolKey, Value: poolValue, Effect: v1.TaintEffectNoSchedule}
}

// createPoolNode creates a kwok node of the scenario in zone, as a node of
// the NodePool would be but not launched by Karpenter, and waits until it
// is Ready without the taints of a new node; cordoned, it is cordoned then.
func createPoolNode(t *testing.T, zone string, cordoned bool) {
	t.Helper()
	n := poolNode("e2e-pool-"+zone, zone, poolValue)
	createReadyNode(t, n)
	if cordoned {
		if err := setCordon(t.Context(), n.Name, true); err != nil {
			t.Fatal(err)
		}
	}
}

// poolNode is a kwok node in zone labelled and tainted poolKey=pool, on
// which only the pods that select and tolerate pool land.
func poolNode(name, zone, pool string) *v1.Node {
	return spreadtest.MakeNode().Name(name).Zone(zone).Label(poolKey, pool).
		Label(v1.LabelOSStable, "linux").Label(v1.LabelArchStable, "amd64").
		Annotation(kwokNodeAnnotation, "fake").Taint(poolKey, pool, v1.TaintEffectNoSchedule).Obj()
}

// createReadyNode creates n and waits until the kwok controller has made
// it Ready and the node-lifecycle controller has removed the taints of a
// new node, leaving n's own.
func createReadyNode(t *testing.T, n *v1.Node) {
	t.Helper()
	want := len(n.Spec.Taints)
	if err := k8s.Create(t.Context(), n); err != nil {
		t.Fatalf("create node %s: %v", n.Name, err)
	}
	eventually(t, 30*time.Second, "node "+n.Name+" is Ready with only its own taints", func(ctx context.Context) error {
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(n), n); err != nil {
			return err
		}
		ready := slices.ContainsFunc(n.Status.Conditions, func(c v1.NodeCondition) bool {
			return c.Type == v1.NodeReady && c.Status == v1.ConditionTrue
		})
		if !ready || len(n.Spec.Taints) != want {
			return fmt.Errorf("ready %v, taints %v", ready, n.Spec.Taints)
		}
		return nil
	})
}

// poolNodeClaims lists the NodeClaims Karpenter made for the scenarios'
// NodePools, which carry their template's labels.
func poolNodeClaims(ctx context.Context) ([]unstructured.Unstructured, error) {
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(nodeClaimListKind)
	if err := k8s.List(ctx, list, client.MatchingLabels{poolKey: poolValue}); err != nil {
		return nil, fmt.Errorf("list NodeClaims: %w", err)
	}
	return list.Items, nil
}

func claimNames(claims []unstructured.Unstructured) string {
	var out []string
	for _, c := range claims {
		out = append(out, fmt.Sprintf("NodeClaim %s (zone %q, node %q)", c.GetName(), c.GetLabels()[zoneKey], nodeOfClaim(c)))
	}
	return strings.Join(out, ", ")
}

func nodeOfClaim(c unstructured.Unstructured) string {
	name, _, _ := unstructured.NestedString(c.Object, "status", "nodeName")
	return name
}

// waitLaunched waits until Karpenter has launched one node, in zone, and
// returns its name; a node launched in another zone fails the test at once.
func (f *framework) waitLaunched(zone string) string {
	f.t.Helper()
	var node string
	f.eventually(launchTimeout, "Karpenter launches one node in "+zone, func(ctx context.Context) error {
		claims, err := poolNodeClaims(ctx)
		if err != nil {
			return err
		}
		if len(claims) != 1 {
			return fmt.Errorf("%d NodeClaims: %s", len(claims), claimNames(claims))
		}
		if z := claims[0].GetLabels()[zoneKey]; z != "" && z != zone {
			f.t.Fatalf("Karpenter launched %s, want a node in %s", claimNames(claims), zone)
		}
		if node = nodeOfClaim(claims[0]); node == "" || claims[0].GetLabels()[zoneKey] == "" {
			return fmt.Errorf("not launched yet: %s", claimNames(claims))
		}
		return nil
	})
	return node
}

// removeLaunched deletes the test's Deployment "web" and waits until its
// pods are gone, then deletes the nodes Karpenter launched and waits until
// they are gone, so that the next part starts from the scenario's own
// nodes. In this order: a node's drain evicts its pods, which the
// Deployment would replace, and Karpenter would launch a node for those.
func (f *framework) removeLaunched() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "web"}}
	if err := k8s.Delete(ctx, d, client.PropagationPolicy(metav1.DeletePropagationForeground)); client.IgnoreNotFound(err) != nil {
		f.t.Errorf("delete Deployment %s: %v", d.Name, err)
	}
	err := poll(ctx, time.Minute, func(ctx context.Context) error {
		var pods v1.PodList
		if err := k8s.List(ctx, &pods, client.InNamespace(f.ns)); err != nil {
			return err
		}
		if n := len(pods.Items); n != 0 {
			return fmt.Errorf("%d pods left in %s", n, f.ns)
		}
		return nil
	})
	if err == nil {
		// Karpenter's nodes, not the scenario's own: those have no NodeClaim.
		launched := labels.SelectorFromSet(labels.Set{poolKey: poolValue}).Add(nodePoolExists)
		err = removeNodeClaims(ctx, launched)
	}
	if err != nil {
		f.t.Error(err)
	}
}

// removeAutoscalerNodes deletes the scenarios' NodePools, what Karpenter
// launched for them and the scenarios' own nodes, and waits until they are
// gone.
func removeAutoscalerNodes(ctx context.Context) error {
	pools := &unstructured.UnstructuredList{}
	pools.SetGroupVersionKind(nodePoolListKind)
	if err := k8s.List(ctx, pools, client.MatchingLabels{e2eLabel: "true"}); err != nil {
		return fmt.Errorf("list NodePools: %w", err)
	}
	for i := range pools.Items {
		if err := k8s.Delete(ctx, &pools.Items[i]); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("delete NodePool %s: %w", pools.Items[i].GetName(), err)
		}
	}
	nodes := labels.SelectorFromSet(labels.Set{poolKey: poolValue})
	if err := k8s.DeleteAllOf(ctx, &v1.Node{}, client.MatchingLabelsSelector{Selector: nodes}); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete the scenarios' nodes: %w", err)
	}
	return removeNodeClaims(ctx, nodes)
}

// removeNodeClaims deletes the NodeClaims of the scenarios' NodePools and
// waits until they and the nodes nodes selects are gone: Karpenter deletes
// a NodeClaim's node once it has drained it.
func removeNodeClaims(ctx context.Context, nodes labels.Selector) error {
	claims, err := poolNodeClaims(ctx)
	if err != nil {
		return err
	}
	for i := range claims {
		if err := k8s.Delete(ctx, &claims[i]); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("delete NodeClaim %s: %w", claims[i].GetName(), err)
		}
	}
	return poll(ctx, time.Minute, func(ctx context.Context) error {
		claims, err := poolNodeClaims(ctx)
		if err != nil {
			return err
		}
		var left v1.NodeList
		if err := k8s.List(ctx, &left, client.MatchingLabelsSelector{Selector: nodes}); err != nil {
			return fmt.Errorf("list nodes: %w", err)
		}
		if len(claims) != 0 || len(left.Items) != 0 {
			return fmt.Errorf("still there: %d NodeClaims (%s) and %d nodes", len(claims), claimNames(claims), len(left.Items))
		}
		return nil
	})
}

// ---------------------------------------------------------------- the webhook

// webhookSwitch restarts the webhook with flags, and once the test is over
// restarts it as it was, for the tests that follow.
type webhookSwitch struct {
	restarted bool
}

func newWebhookSwitch(t *testing.T) *webhookSwitch {
	w := &webhookSwitch{}
	t.Cleanup(func() {
		if !w.restarted {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		if err := errors.Join(runHook(ctx, t, envStopCmd), runHook(ctx, t, envStartCmd)); err != nil {
			t.Errorf("restart the webhook as it was: %v", err)
		}
	})
	return w
}

// restart stops the webhook and starts it with flags, or skips the test
// where the suite cannot.
func (w *webhookSwitch) restart(t *testing.T, flags ...string) {
	t.Helper()
	if os.Getenv(envStopCmd) == "" || os.Getenv(envStartFlagsCmd) == "" || os.Getenv(envStartCmd) == "" {
		t.Skipf("%s, %s or %s unset: the suite cannot restart the webhook with %v", envStopCmd, envStartFlagsCmd, envStartCmd, flags)
	}
	w.restarted = true
	if err := runHook(t.Context(), t, envStopCmd); err != nil {
		t.Fatal(err)
	}
	if err := runHook(t.Context(), t, envStartFlagsCmd, flags...); err != nil {
		t.Fatal(err)
	}
}

// ---------------------------------------------------------------- helpers

// scale sets the replicas of the test's Deployment name.
func (f *framework) scale(name string, replicas int32) {
	f.t.Helper()
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: name}}
	patch := fmt.Sprintf(`{"spec":{"replicas":%d}}`, replicas)
	if err := k8s.Patch(f.t.Context(), d, client.RawPatch(types.MergePatchType, []byte(patch))); err != nil {
		f.t.Fatalf("scale Deployment %s to %d: %v", name, replicas, err)
	}
}

// failedCreates returns the messages of the FailedCreate events of the
// test's ReplicaSets: why their controller could not create a pod.
func (f *framework) failedCreates(ctx context.Context) ([]string, error) {
	var events v1.EventList
	if err := k8s.List(ctx, &events, client.InNamespace(f.ns)); err != nil {
		return nil, fmt.Errorf("list events: %w", err)
	}
	var out []string
	for _, e := range events.Items {
		if e.InvolvedObject.Kind == "ReplicaSet" && e.Reason == "FailedCreate" {
			out = append(out, e.Message)
		}
	}
	return out, nil
}

// consistently calls check every 250ms for d and fails the test at the
// first error.
func (f *framework) consistently(d time.Duration, what string, check func(ctx context.Context) error) {
	f.t.Helper()
	for deadline := time.Now().Add(d); time.Now().Before(deadline); {
		ctx, cancel := context.WithTimeout(f.t.Context(), 15*time.Second)
		err := check(ctx)
		cancel()
		if err != nil {
			f.t.Fatalf("%s: not so within %v: %v", what, d, err)
		}
		select {
		case <-f.t.Context().Done():
			f.t.Fatalf("%s: %v", what, f.t.Context().Err())
		case <-time.After(250 * time.Millisecond):
		}
	}
}
