//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
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
	// stopAtOnce is added to the starts of the webhook the scenarios make,
	// so that the next restart stops it without the chart's shutdown
	// delay (5 s): the delay lets a Service drop a stopping replica, and
	// no lane is running when the scenarios restart it.
	stopAtOnce = "--shutdown-delay=0s"
	// admittedForNewNode starts the warning of a pod that no current node
	// can take and a new node can; the zone follows. Under the chart's
	// messageDetail (domains) it does not name the NodePool.
	admittedForNewNode = "admitted: no current node fits; a new node that an autoscaler can add in "

	// poolKey labels and taints the nodes of each lane of the autoscaler
	// scenarios and the nodes its NodePool launches, with the lane's own
	// value: only the lane's pods select and tolerate it, so no other pod
	// lands there or makes Karpenter launch a node from that NodePool.
	poolKey = "e2e.spreadguard.io/pool"
	// autoscalerKey labels, "true", the nodes and NodePools of every lane
	// and so what Karpenter launches from those NodePools (their template
	// carries it): what the autoscaler scenarios remove before and after
	// they run, and not the rebalancing scenario's nodes, which share
	// poolKey.
	autoscalerKey = "e2e.spreadguard.io/autoscaler"
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
)

// The webhook as the lanes of the autoscaler scenarios need it: each
// scenario's control under one of the first two, its awareness part under
// the last.
var (
	withoutAwareness = webhookMode{
		name:  "without NodePool awareness",
		flags: []string{karpenterFlag + "=false"},
	}
	zonesSeenOnNodes = webhookMode{
		name:  "with autoscaler.zones unset, the NodePool's zones are those seen on nodes",
		flags: []string{karpenterFlag + "=true"},
	}
	// The operator's list gives its zones only to a NodePool that leaves
	// the zone open: one that requires zones keeps its own, the list
	// unread (zoneSources.resolve in pkg/autoscale). So the NodePools that
	// require test zones a, b and c yield the same templates with the list
	// as without it, and every scenario's awareness part runs under this
	// one start of the webhook.
	zonesListed = webhookMode{
		name: "with NodePool awareness and autoscaler.zones naming the offerings' 4 zones",
		flags: []string{karpenterFlag + "=true",
			zonesFlag + "=" + strings.Join([]string{testZoneA, testZoneB, testZoneC, testZoneD}, ",")},
	}
)

// TestAutoscaler runs the scenarios of a cluster with a node autoscaler:
// Karpenter's kwok provider launches a node for a pod the scheduler leaves
// Pending, so spreadguard must not refuse a pod that a new node would take.
// Each scenario is a Deployment whose next replica none of its kwok nodes
// can take and that a node of its NodePool can, and it runs in three
// parts, each a lane of its own: a control refused by the webhook, the
// same left out of spreadguard, and the same admitted by the webhook aware
// of NodePools.
//
// A lane has its own nodes, NodePool and pool value, so the lanes run side
// by side, in one group per start of the webhook: the webhook is restarted
// with a group's flags, the group's lanes run at once, and the next group
// starts once they are all done and cleaned up. The lanes left out of
// spreadguard never call the webhook and run with the first group, which
// also keeps the node one of them launches in the fourth zone away from
// the second group, whose webhook takes a NodePool's zones from the nodes.
func TestAutoscaler(t *testing.T) {
	requireKarpenter(t)
	// What a run killed halfway left behind.
	if err := removePools(t.Context(), allLanes); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		if err := removePools(ctx, allLanes); err != nil {
			t.Error(err)
		}
	})
	webhook := newWebhookSwitch(t)
	scenarios := []autoscalerScenario{
		{
			name:      "minDomains 3 with nodes in 2 zones: the third replica needs a node in the third zone",
			id:        "min-domains",
			nodeZones: []string{testZoneA, testZoneB},
			constraint: spreadtest.Constraint(1, zoneKey).DoNotSchedule().MinDomains(3).
				NodeAffinityPolicy(v1.NodeInclusionPolicyHonor).MatchLabel("app", "web").Obj(),
			launchZone: testZoneC,
			control:    &withoutAwareness,
		},
		{
			name:      "a zone whose node is cordoned, counted by nodeTaintsPolicy Ignore: the third replica needs a new node in that zone",
			id:        "cordoned",
			nodeZones: []string{testZoneA, testZoneB, testZoneC},
			cordoned:  testZoneB,
			constraint: spreadtest.Constraint(1, zoneKey).DoNotSchedule().
				NodeAffinityPolicy(v1.NodeInclusionPolicyHonor).NodeTaintsPolicy(v1.NodeInclusionPolicyIgnore).
				MatchLabel("app", "web").Obj(),
			launchZone: testZoneB,
			control:    &withoutAwareness,
		},
		{
			// As the NodePools of Karpenter's getting-started guide: no
			// zone requirement, the zones are the offerings' (here the
			// kwok provider's four). The suite's other nodes are in zones
			// no offering has; the replicas' affinity keeps them out, as
			// in a cluster whose nodes are all Karpenter's. Only
			// autoscaler.zones tells spreadguard the fourth zone.
			name:      "a NodePool with no zone requirement, offerings in 4 zones, nodes in 3, minDomains 4: the fourth replica needs a node in the fourth zone",
			id:        "open-zone",
			nodeZones: []string{testZoneA, testZoneB, testZoneC},
			openZone:  true,
			podZones:  []string{testZoneA, testZoneB, testZoneC, testZoneD},
			constraint: spreadtest.Constraint(1, zoneKey).DoNotSchedule().MinDomains(4).
				NodeAffinityPolicy(v1.NodeInclusionPolicyHonor).MatchLabel("app", "web").Obj(),
			launchZone: testZoneD,
			control:    &zonesSeenOnNodes,
		},
	}
	// One group per start of the webhook, in this order; a lane that
	// needs none goes with the first.
	modes := []*webhookMode{&withoutAwareness, &zonesSeenOnNodes, &zonesListed}
	for i, mode := range modes {
		name := "the webhook started with " + strings.Join(mode.flags, " ")
		if i == 0 {
			name = "namespaces spreadguard leaves out, and " + name
		}
		t.Run(name, func(t *testing.T) {
			unstarted := webhook.restart(t, mode.flags...)
			type scenarioLanes struct {
				autoscalerScenario
				lanes []lane
			}
			var group []scenarioLanes
			for _, s := range scenarios {
				lanes := slices.DeleteFunc(s.lanes(), func(l lane) bool {
					return l.mode != mode && (l.mode != nil || i > 0)
				})
				if len(lanes) > 0 {
					group = append(group, scenarioLanes{s, lanes})
				}
			}
			runAtOnce(t, group, func(s scenarioLanes) string { return s.name }, func(t *testing.T, s scenarioLanes) {
				runAtOnce(t, s.lanes, lane.name, func(t *testing.T, l lane) {
					if l.mode != nil && unstarted != "" {
						t.Skip(unstarted)
					}
					l.run(t)
				})
			})
		})
	}
}

// runAtOnce runs fn on each of items, in a subtest of t named by name, all
// at once, and returns when they are done. t.Run from goroutines, not
// t.Parallel: the lanes of a group must all run at once, whatever
// -parallel (GOMAXPROCS, 2 here) allows.
func runAtOnce[T any](t *testing.T, items []T, name func(T) string, fn func(*testing.T, T)) {
	var wg sync.WaitGroup
	for _, it := range items {
		wg.Go(func() { t.Run(name(it), func(t *testing.T) { fn(t, it) }) })
	}
	wg.Wait()
}

// webhookMode is a start of the webhook: what it knows of NodePools, in
// words for the test names, and the flags that make it so.
type webhookMode struct {
	name  string
	flags []string
}

// autoscalerScenario is a Deployment "web" with one replica on each of
// the scenario's schedulable nodes, whose next replica no current node can
// take and a node from the scenario's NodePool can.
type autoscalerScenario struct {
	name string
	// id names the scenario's pools, NodePools and nodes.
	id string
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
	// control is the webhook under which the next replica is refused;
	// under zonesListed it is admitted.
	control *webhookMode
}

// lanes are the scenario's three parts, each under the webhook it needs.
func (s autoscalerScenario) lanes() []lane {
	return []lane{
		{autoscalerScenario: s, part: refusedPart, mode: s.control},
		{autoscalerScenario: s, part: leftOutPart},
		{autoscalerScenario: s, part: admittedPart, mode: &zonesListed},
	}
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

// lanePart is what a lane shows of its scenario.
type lanePart int

const (
	// refusedPart: the webhook refuses the next replica, and Karpenter,
	// with no Pending pod, launches nothing.
	refusedPart lanePart = iota
	// leftOutPart: in a namespace spreadguard leaves out, Karpenter
	// launches the node the next replica needs.
	leftOutPart
	// admittedPart: the webhook admits the next replica with a warning,
	// and Karpenter launches its node.
	admittedPart
)

// lane is one part of a scenario on a pool of its own: its kwok nodes,
// its NodePool and what Karpenter launches from it carry poolKey=pool(),
// which only its pods select and tolerate, so that lanes side by side
// never share a node, and each counts only its own NodeClaims.
type lane struct {
	autoscalerScenario
	part lanePart
	// mode is the webhook the part runs under; nil for leftOutPart.
	mode *webhookMode
}

// pool is the lane's value of poolKey, and names its NodePool and nodes.
func (l lane) pool() string {
	return l.id + "-" + [...]string{"refused", "left-out", "admitted"}[l.part]
}

func (l lane) nodePool() string { return "e2e-" + l.pool() }

// name is the part in a sentence, for the lane's test.
func (l lane) name() string {
	switch l.part {
	case refusedPart:
		return fmt.Sprintf("%s, the %s replica is refused and Karpenter launches no node", l.mode.name, l.nth())
	case leftOutPart:
		return fmt.Sprintf("with spreadguard left out, Karpenter launches a node in %s for the %s replica", l.launchZone, l.nth())
	}
	return fmt.Sprintf("%s, the %s replica is admitted with a warning, Karpenter launches its node in %s and every replica runs", l.mode.name, l.nth(), l.launchZone)
}

// run creates the lane's nodes and NodePool, runs its part, and removes
// them.
func (l lane) run(t *testing.T) {
	// Registered first, so that it runs last, once the part's pods are
	// gone: kwok removes the pods of a deleted namespace only from nodes
	// that still exist.
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		if err := removePools(ctx, lanePool(l.pool())); err != nil {
			t.Error(err)
		}
	})
	createPoolNodes(t, l.pool(), l.nodeZones, l.cordoned)
	pool := makeNodePool(l.nodePool(), l.pool())
	if !l.openZone {
		pool = pool.Zones(testZoneA, testZoneB, testZoneC)
	}
	if err := k8s.Create(t.Context(), pool.Obj()); err != nil {
		t.Fatalf("create NodePool %s: %v", l.nodePool(), err)
	}
	switch l.part {
	case refusedPart:
		l.refused(t)
	case leftOutPart:
		l.launchedWithoutSpreadguard(t)
	case admittedPart:
		l.admitted(t)
	}
}

// replica is a pod of the Deployment, for its template and for dry runs of
// one more replica: it goes only to the lane's nodes.
func (l lane) replica() *v1.Pod {
	p := spreadtest.MakePod().Name("web-next").Label("app", "web").
		NodeSelector(poolKey, l.pool()).
		Toleration(poolKey, v1.TolerationOpEqual, l.pool(), v1.TaintEffectNoSchedule).
		SpreadConstraint(l.constraint)
	if l.podZones != nil {
		p = p.NodeAffinityIn(zoneKey, l.podZones...)
	}
	return pod(p)
}

func (l lane) deployment(replicas int32) *appsv1.Deployment {
	return makeDeployment("web").Replicas(replicas).PodSpec(l.replica().Spec).Obj()
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

// place runs l.placed() replicas, one in each zone they may use, and
// returns the Deployment's pod selector.
func (l lane) place(f *framework) labels.Selector {
	f.t.Helper()
	web := labels.SelectorFromSet(labels.Set{"app": "web"})
	f.create(l.deployment(l.placed()))
	f.expectZones(f.waitRunning(web, int(l.placed()), placeTimeout), l.placement())
	return web
}

func (l lane) refused(t *testing.T) {
	f := newFramework(t)
	// Before the group's end: the next group's webhook would admit the
	// pod this Deployment keeps trying to create.
	t.Cleanup(f.removeWeb)
	web := l.place(f)
	next := l.replica()
	f.eventually(policyChangeTimeout, fmt.Sprintf("the webhook counts the %d replicas and denies a %s (dry run)", l.placed(), l.nth()), func(ctx context.Context) error {
		if _, err := f.dryRunCreate(ctx, k8s, next); !deniedByWebhook(err) {
			return fmt.Errorf("want a denial, got %v", err)
		}
		return nil
	})
	f.scale("web", l.placed()+1)
	f.eventually(30*time.Second, "the ReplicaSet reports spreadguard's refusal of its "+l.nth()+" pod", func(ctx context.Context) error {
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
	f.consistently(noLaunchWait, fmt.Sprintf("Karpenter launches no node and the Deployment keeps %d pods", l.placed()), func(ctx context.Context) error {
		claims, err := poolNodeClaims(ctx, lanePool(l.pool()))
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
		if len(pods.Items) != int(l.placed()) {
			return fmt.Errorf("%d pods, want the %d placed before the refusal", len(pods.Items), l.placed())
		}
		return nil
	})
}

// launchedWithoutSpreadguard proves the autoscaler half alone: in a
// namespace spreadguard's webhooks leave out, the scheduler leaves the
// next replica Pending and Karpenter launches the node it needs.
func (l lane) launchedWithoutSpreadguard(t *testing.T) {
	f := newFramework(t, func(ns *v1.Namespace) { ns.Labels[v1alpha1.LabelIgnoreNamespace] = "true" })
	t.Cleanup(f.removeWeb)
	web := labels.SelectorFromSet(labels.Set{"app": "web"})
	start := time.Now()
	all := l.placed() + 1
	f.create(l.deployment(all))
	node := f.waitLaunched(l.pool(), l.launchZone)
	f.expectZones(f.waitRunning(web, int(all), launchTimeout), l.placement(l.launchZone))
	t.Logf("Karpenter launched node %s in %s; %d replicas Running %v after the Deployment", node, l.launchZone, all, time.Since(start).Round(time.Millisecond))
}

func (l lane) admitted(t *testing.T) {
	f := newFramework(t)
	t.Cleanup(f.removeWeb)
	web := l.place(f)
	c, warnings := warningClient(t)
	next := l.replica()
	f.eventually(policyChangeTimeout, "the webhook admits a "+l.nth()+" replica, warning that a new node in "+l.launchZone+" would take it, without naming NodePool "+l.nodePool()+" (dry run)", func(ctx context.Context) error {
		warnings.take()
		if _, err := f.dryRunCreate(ctx, c, next); err != nil {
			return err
		}
		return newNodeWarning(warnings.take(), l.nodePool(), l.launchZone)
	})
	start := time.Now()
	all := l.placed() + 1
	f.scale("web", all)
	node := f.waitLaunched(l.pool(), l.launchZone)
	f.expectZones(f.waitRunning(web, int(all), launchTimeout), l.placement(l.launchZone))
	t.Logf("Karpenter launched node %s in %s; %d replicas Running %v after the scale-up", node, l.launchZone, all, time.Since(start).Round(time.Millisecond))
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
// KWOKNodeClass kwokNodeClass for a lane, whose nodes carry poolKey=pool as
// a label and a taint, and autoscalerKey. It is unstructured: the suite
// does not import Karpenter.
type NodePoolWrapper struct {
	name  string
	pool  string
	zones []string
}

func makeNodePool(name, pool string) *NodePoolWrapper {
	return &NodePoolWrapper{name: name, pool: pool}
}

// Zones sets the zones the NodePool may launch nodes in; without, it has
// no zone requirement, and Karpenter launches in its offerings' zones.
func (p *NodePoolWrapper) Zones(zones ...string) *NodePoolWrapper {
	p.zones = zones
	return p
}

// Obj returns the NodePool, labelled as its nodes are. It never
// consolidates: the scenarios decide when its nodes go.
func (p *NodePoolWrapper) Obj() *unstructured.Unstructured {
	requirements := []map[string]any{{"key": "karpenter.sh/capacity-type", "operator": "In", "values": []string{"on-demand"}}}
	if len(p.zones) > 0 {
		requirements = append([]map[string]any{{"key": zoneKey, "operator": "In", "values": p.zones}}, requirements...)
	}
	labels := poolLabels(p.pool)
	pool := map[string]any{
		"apiVersion": nodePoolKind.GroupVersion().String(),
		"kind":       nodePoolKind.Kind,
		"metadata":   map[string]any{"name": p.name, "labels": labels},
		"spec": map[string]any{
			"disruption": map[string]any{"consolidationPolicy": "WhenEmpty", "consolidateAfter": "Never"},
			"template": map[string]any{
				"metadata": map[string]any{"labels": labels},
				"spec": map[string]any{
					"nodeClassRef": map[string]any{"group": kwokNodeClassKind.Group, "kind": kwokNodeClassKind.Kind, "name": kwokNodeClass},
					"taints":       []v1.Taint{{Key: poolKey, Value: p.pool, Effect: v1.TaintEffectNoSchedule}},
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

// poolLabels are the labels of a lane's nodes, NodePool and NodeClaims.
func poolLabels(pool string) map[string]string {
	return map[string]string{poolKey: pool, autoscalerKey: "true"}
}

// lanePool selects the nodes, NodePool and NodeClaims of the lane whose
// pool value is pool.
func lanePool(pool string) labels.Selector {
	return labels.SelectorFromSet(labels.Set{poolKey: pool})
}

// allLanes selects those of every lane.
var allLanes = labels.SelectorFromSet(labels.Set{autoscalerKey: "true"})

// createPoolNodes creates a kwok node of the lane's pool in each of zones,
// as nodes of its NodePool would be but not launched by Karpenter, and
// waits until they are Ready without the taints of a new node; the one in
// cordoned, if any, is cordoned then.
func createPoolNodes(t *testing.T, pool string, zones []string, cordoned string) {
	t.Helper()
	name := func(zone string) string { return "e2e-" + pool + "-" + zone }
	var nodes []*v1.Node
	for _, zone := range zones {
		n := poolNode(name(zone), zone, pool)
		n.Labels[autoscalerKey] = "true"
		nodes = append(nodes, n)
	}
	createReadyNodes(t, nodes...)
	if cordoned != "" {
		if err := setCordon(t.Context(), name(cordoned), true); err != nil {
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

// createReadyNodes creates nodes and waits until the kwok controller has
// made each Ready and the node-lifecycle controller has removed the taints
// of a new node, leaving its own. All are created before the wait, so they
// become Ready together.
func createReadyNodes(t *testing.T, nodes ...*v1.Node) {
	t.Helper()
	own := make([]int, len(nodes))
	for i, n := range nodes {
		own[i] = len(n.Spec.Taints)
		if err := k8s.Create(t.Context(), n); err != nil {
			t.Fatalf("create node %s: %v", n.Name, err)
		}
	}
	for i, n := range nodes {
		eventually(t, 30*time.Second, "node "+n.Name+" is Ready with only its own taints", func(ctx context.Context) error {
			if err := k8s.Get(ctx, client.ObjectKeyFromObject(n), n); err != nil {
				return err
			}
			ready := slices.ContainsFunc(n.Status.Conditions, func(c v1.NodeCondition) bool {
				return c.Type == v1.NodeReady && c.Status == v1.ConditionTrue
			})
			if !ready || len(n.Spec.Taints) != own[i] {
				return fmt.Errorf("ready %v, taints %v", ready, n.Spec.Taints)
			}
			return nil
		})
	}
}

// poolNodeClaims lists the NodeClaims Karpenter made for the NodePools
// that sel selects, which carry their template's labels.
func poolNodeClaims(ctx context.Context, sel labels.Selector) ([]unstructured.Unstructured, error) {
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(nodeClaimListKind)
	if err := k8s.List(ctx, list, client.MatchingLabelsSelector{Selector: sel}); err != nil {
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

// waitLaunched waits until Karpenter has launched one node for the lane
// of pool, in zone, and returns its name; a node launched in another zone
// fails the test at once. The other lanes' NodeClaims, launched meanwhile,
// are not counted: Karpenter makes one per NodePool that a Pending pod
// fits, and a lane's pods fit only the lane's.
func (f *framework) waitLaunched(pool, zone string) string {
	f.t.Helper()
	var node string
	f.eventually(launchTimeout, "Karpenter launches one node in "+zone, func(ctx context.Context) error {
		claims, err := poolNodeClaims(ctx, lanePool(pool))
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

// removeWeb deletes the test's Deployment "web" and waits until its pods
// are gone, before the lane's nodes go: a node's drain evicts its pods,
// which the Deployment would replace, and Karpenter would launch a node
// for those.
func (f *framework) removeWeb() {
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
	if err != nil {
		f.t.Error(err)
	}
}

// removePools deletes the lanes' NodePools that sel selects, what
// Karpenter launched for them and the lanes' own nodes, and waits until
// they are gone.
func removePools(ctx context.Context, sel labels.Selector) error {
	pools := &unstructured.UnstructuredList{}
	pools.SetGroupVersionKind(nodePoolListKind)
	if err := k8s.List(ctx, pools, client.MatchingLabelsSelector{Selector: sel}); err != nil {
		return fmt.Errorf("list NodePools: %w", err)
	}
	for i := range pools.Items {
		if err := k8s.Delete(ctx, &pools.Items[i]); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("delete NodePool %s: %w", pools.Items[i].GetName(), err)
		}
	}
	if err := k8s.DeleteAllOf(ctx, &v1.Node{}, client.MatchingLabelsSelector{Selector: sel}); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete the nodes of %s: %w", sel, err)
	}
	return removeNodeClaims(ctx, sel)
}

// removeNodeClaims deletes the NodeClaims sel selects and waits until
// they and the nodes sel selects are gone: Karpenter deletes a NodeClaim's
// node once it has drained it.
func removeNodeClaims(ctx context.Context, sel labels.Selector) error {
	claims, err := poolNodeClaims(ctx, sel)
	if err != nil {
		return err
	}
	for i := range claims {
		if err := k8s.Delete(ctx, &claims[i]); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("delete NodeClaim %s: %w", claims[i].GetName(), err)
		}
	}
	return poll(ctx, time.Minute, func(ctx context.Context) error {
		claims, err := poolNodeClaims(ctx, sel)
		if err != nil {
			return err
		}
		var left v1.NodeList
		if err := k8s.List(ctx, &left, client.MatchingLabelsSelector{Selector: sel}); err != nil {
			return fmt.Errorf("list nodes: %w", err)
		}
		if len(claims) != 0 || len(left.Items) != 0 {
			return fmt.Errorf("still there: %d NodeClaims (%s) and %d nodes of %s", len(claims), claimNames(claims), len(left.Items), sel)
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

// restart stops the webhook and starts it with flags. Where the suite
// cannot, it returns why, for the tests that need the webhook so started
// to skip.
func (w *webhookSwitch) restart(t *testing.T, flags ...string) (unstarted string) {
	t.Helper()
	if os.Getenv(envStopCmd) == "" || os.Getenv(envStartFlagsCmd) == "" || os.Getenv(envStartCmd) == "" {
		return fmt.Sprintf("%s, %s or %s unset: the suite cannot restart the webhook with %v", envStopCmd, envStartFlagsCmd, envStartCmd, flags)
	}
	w.restarted = true
	if err := runHook(t.Context(), t, envStopCmd); err != nil {
		t.Fatal(err)
	}
	if err := runHook(t.Context(), t, envStartFlagsCmd, append(slices.Clone(flags), stopAtOnce)...); err != nil {
		t.Fatal(err)
	}
	return ""
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
