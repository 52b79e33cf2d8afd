package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	admissionv1 "k8s.io/api/admission/v1"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
	"sigs.k8s.io/yaml"

	sgadmission "github.com/spreadguard/spreadguard/pkg/admission"
	karpenterv1 "github.com/spreadguard/spreadguard/pkg/apis/karpenter/v1"
	nodeclassv1 "github.com/spreadguard/spreadguard/pkg/apis/nodeclass/v1"
	"github.com/spreadguard/spreadguard/pkg/apis/spreadguard/v1alpha1"
	"github.com/spreadguard/spreadguard/pkg/autoscale"
	"github.com/spreadguard/spreadguard/pkg/controller/policies"
	"github.com/spreadguard/spreadguard/pkg/engine"
	"github.com/spreadguard/spreadguard/pkg/forecast"
	"github.com/spreadguard/spreadguard/pkg/forecast/forecasttest"
	"github.com/spreadguard/spreadguard/pkg/health"
	"github.com/spreadguard/spreadguard/pkg/lookup"
	"github.com/spreadguard/spreadguard/pkg/policy"
	"github.com/spreadguard/spreadguard/pkg/policy/policytest"
	"github.com/spreadguard/spreadguard/pkg/spread"
	st "github.com/spreadguard/spreadguard/pkg/spread/spreadtest"
	"github.com/spreadguard/spreadguard/pkg/state"
)

// TestDomainsDetailNamesNoNodeLabelTaintOrTemplate renders every string a
// tenant can read, for random clusters shared by tenants, under
// messageDetail domains, and fails when one names what that setting hides.
//
// What a string may name under domains (the chart's values.yaml and README,
// docs/health.md): what the tenant's own objects say (its namespace, pods,
// workloads and their labels and selectors, its constraints, its policy),
// and the domains its constraints count by: their topology keys and, for
// every key but kubernetes.io/hostname, their values (zone us-east-1a,
// rack-12), since the pod's creator needs them to act ("add capacity in
// zone c") and they are values the constraint itself names by its key. A
// hostname's values are node names, so they are never named. Everything
// else about the nodes is hidden: a node's name, its hostname, any other
// label key or value (instance types, teams, node groups), a taint's key or
// value, and the nodes an autoscaler can add: a template's name and the
// NodeTemplate, NodePool or node group it comes from. A value that is both
// (a zone named like a node, a team reused as a zone) is allowed: the
// constraint counts by it.
//
// The strings: the pod webhook's denial, warnings, audit annotation and the
// events on the pod's owners (at CREATE) and on the pod (when its last
// scheduling gate is removed); the workload forecast's warnings, of a
// scale-up and of a scale-down, and at a StatefulSet's CREATE, a scale
// (a StatefulSet's scale-down among them) and an UPDATE; the Reports' messages and properties (a workload that
// cannot be audited's error result among them) and the policies' Ready
// conditions; the InvalidPolicy events; kubectl-spread's check, explain,
// plan and status in every output format: readable, and the whole -o json
// and -o yaml documents (less what the tenant wrote into its pod), plan's
// being refused under domains. The nodes detail renders the same strings,
// to show that they do name what domains hides: the check finds names when
// they are there.
func TestDomainsDetailNamesNoNodeLabelTaintOrTemplate(t *testing.T) {
	seed, rounds := seedOf(t), 150
	if testing.Short() {
		// The rarest cases come in about one round in ten.
		rounds = 60
	}
	rendered := map[string]int{}
	namedUnderNodes := 0
	failed := map[string]int{}
	failures := 0
	for round := range rounds {
		c := drawTenantCluster(t, rand.New(rand.NewPCG(seed, uint64(round))))
		for _, detail := range []spread.MessageDetail{spread.DetailNodes, spread.DetailDomains} {
			for _, s := range c.render(t, detail) {
				named := c.hidden.in(s.text)
				if detail == spread.DetailNodes {
					if len(named) > 0 {
						namedUnderNodes++
					}
					continue
				}
				rendered[s.path]++
				for what, is := range cases {
					if is(s) {
						rendered[what]++
					}
				}
				if len(named) > 0 {
					// The first of each path is shown whole.
					if failed[s.path] == 0 {
						t.Errorf("seed %d round %d: %s names %q under messageDetail domains:\n%s", seed, round, s.path, named, s.text)
					}
					failed[s.path]++
					failures++
				}
			}
		}
	}
	if failures > 0 {
		t.Errorf("%d strings named what domains hides, by path: %v", failures, failed)
	}
	t.Logf("strings rendered under domains, by path: %v; under nodes, %d named a node, label, taint or template", rendered, namedUnderNodes)
	for _, path := range []string{pathDenial, pathWarning, pathNewNode, pathOwnerEvent, pathPodEvent, pathForecast,
		pathReportMessage, pathReportProperty, pathReady, pathCheck, pathCheckDoc, pathExplain, pathExplainDoc, pathPlan,
		pathPlanRefusal, pathStatus, pathStatusLive, pathStatusDoc, pathStatefulSetForecast, pathScaleForecast,
		pathUpdateForecast, pathStatefulSetScaleDown, pathErrorResult, pathInvalidPolicy, pathScaleDown, pathPlanScaleDown, caseHostDenial, caseHostForecast, caseHostScale, caseTemplates,
		caseUnservedPod, caseUnservedPolicy} {
		if rendered[path] == 0 {
			t.Errorf("no %s was rendered in %d rounds: the generator never reaches it", path, rounds)
		}
	}
	if namedUnderNodes == 0 {
		t.Errorf("under messageDetail nodes no string named a node, label, taint or template: the check finds nothing")
	}
}

// seedOf is $SPREADGUARD_SEED, to run a failure again, or a random seed,
// logged.
func seedOf(t *testing.T) uint64 {
	t.Helper()
	seed := rand.Uint64()
	if s := os.Getenv("SPREADGUARD_SEED"); s != "" {
		var err error
		if seed, err = strconv.ParseUint(s, 10, 64); err != nil {
			t.Fatalf("SPREADGUARD_SEED: %v", err)
		}
	}
	t.Logf("seed %d (SPREADGUARD_SEED=%d runs it again)", seed, seed)
	return seed
}

// The paths a tenant reads a string from.
const (
	pathDenial               = "the pod's denial"
	pathWarning              = "a warning on the pod's CREATE"
	pathNewNode              = "the warning of a pod only a new node fits"
	pathAudit                = "the audit annotation"
	pathOwnerEvent           = "an event on the pod's owner"
	pathPodEvent             = "an event on a pod whose gates were removed"
	pathGateWarning          = "a warning on the removal of the pod's gates"
	pathForecast             = "the forecast's warning"
	pathReportMessage        = "a Report's message"
	pathReportProperty       = "a Report's property"
	pathReady                = "a policy's Ready condition"
	pathCheck                = "kubectl-spread check's report"
	pathCheckDoc             = "kubectl-spread check -o json and -o yaml"
	pathExplain              = "kubectl-spread explain's report"
	pathExplainDoc           = "kubectl-spread explain -o json and -o yaml"
	pathPlan                 = "kubectl-spread plan's report"
	pathPlanDoc              = "kubectl-spread plan -o json and -o yaml (nodes only)"
	pathPlanRefusal          = "kubectl-spread plan -o json and -o yaml's refusal"
	pathStatusLive           = "kubectl-spread status's table of a live cluster"
	pathStatusDoc            = "kubectl-spread status -o json and -o yaml"
	pathStatefulSetForecast  = "the forecast's warning at a StatefulSet's CREATE"
	pathScaleForecast        = "the forecast's warning at a scale"
	pathStatefulSetScaleDown = "the forecast's warning at a StatefulSet's scale-down"
	pathUpdateForecast       = "the forecast's warning at an UPDATE"
	pathErrorResult          = "a Report's error result"
	pathInvalidPolicy        = "an InvalidPolicy event"
	pathScaleDown            = "the forecast's scale-down warning"
	pathPlanScaleDown        = "kubectl-spread plan's scale-down report"
	pathStatus               = "kubectl-spread status's table"
)

// The cases that name the most under nodes, which every run must reach.
const (
	caseHostDenial   = "pod message over hostnames"
	caseHostForecast = "forecast warning over hostnames"
	caseHostScale    = "scale-down warning over hostnames"
	caseTemplates    = "pod message about templates"
	// caseUnservedPod and caseUnservedPolicy say a zone is required by a
	// node pool whose node class cannot serve it.
	caseUnservedPod    = "pod message about an unserved zone"
	caseUnservedPolicy = "policy status and Report about an unserved zone"
)

var cases = map[string]func(rendered) bool{
	caseHostDenial: func(s rendered) bool {
		return (s.path == pathDenial || s.path == pathWarning || s.path == pathAudit) &&
			strings.Contains(s.text, "(topologyKey kubernetes.io/hostname,")
	},
	caseHostForecast: func(s rendered) bool { return s.path == pathForecast && strings.Contains(s.text, "; hostname: ") },
	caseHostScale:    func(s rendered) bool { return s.path == pathScaleDown && strings.Contains(s.text, "; hostname: ") },
	caseTemplates: func(s rendered) bool {
		return (s.path == pathDenial || s.path == pathWarning || s.path == pathAudit) &&
			strings.Contains(s.text, "No node an autoscaler can add fits either")
	},
	caseUnservedPod: func(s rendered) bool {
		return (s.path == pathDenial || s.path == pathWarning || s.path == pathAudit || s.path == pathNewNode) && strings.Contains(s.text, "whose node class cannot serve")
	},
	caseUnservedPolicy: func(s rendered) bool {
		return (s.path == pathReady || s.path == pathReportMessage) && strings.Contains(s.text, "whose node class cannot serve")
	},
}

// rendered is one string and where a tenant reads it.
type rendered struct{ path, text string }

const (
	tenantNamespace = "shop"
	otherNamespace  = "tenant-b-apps"
	// rackKey is a node label some clusters spread over, as a zone.
	rackKey = "example.com/rack"
	// nodeGroupKey names the node group of a node, as EKS labels it.
	nodeGroupKey = "eks.amazonaws.com/nodegroup"
	teamKey      = "example.com/team"
	poolKey      = "example.com/pool"
)

// tenantCluster is a cluster of nodes of several tenants, the nodes an
// autoscaler can add, and tenant "shop", whose Deployment web creates the
// pod under review.
type tenantCluster struct {
	objs      []runtime.Object
	store     *lookup.Store
	index     *spread.Index
	templates lookup.TemplateOptions
	// derived is what the templates were derived with: the zones a
	// NodePool requires that its node class cannot serve.
	derived    autoscale.Derived
	deployment *appsv1.Deployment
	// statefulSet is db, whose pods run: a scale-down deletes its highest
	// ordinals.
	statefulSet *appsv1.StatefulSet
	pod         *v1.Pod
	policies    []*v1alpha1.SpreadPolicy
	cluster     []*v1alpha1.ClusterSpreadPolicy
	// invalid are policies stored past the webhook, which it passes over.
	invalid []*v1alpha1.SpreadPolicy
	hidden  names
}

// drawTenantCluster draws the odd inputs real clusters have: node names of
// the clouds' styles, hostnames that differ from the node name or are
// shared, zones named like nodes or like a team's label, nodes without a
// zone, taints with and without a value, cordoned nodes, templates from
// NodeTemplates (one with a hostname of its own), NodePools and node
// groups in zones no node has, NodePools requiring a zone their
// EC2NodeClass cannot serve, and constraints over zones, hostnames,
// racks, node groups and capacity types with minDomains and both
// inclusion policies. A quarter of the rounds are the per-host case that
// names the most: the tenant's pods on each of its nodes, another tenant's
// tainted nodes counted at 0 (nodeTaintsPolicy Ignore), and no template,
// whose fresh hostname would take the pod.
func drawTenantCluster(t *testing.T, rng *rand.Rand) *tenantCluster {
	t.Helper()
	pick := func(items ...string) string { return items[rng.IntN(len(items))] }
	c := &tenantCluster{templates: lookup.TemplateOptions{NodeTemplates: true, Karpenter: true, NodeGroupLabel: nodeGroupKey}}
	zoneStyle := rng.IntN(4)
	zones := [][]string{{"us-east-1a", "us-east-1b", "us-east-1c"}, {"zone-a", "zone-b"}}[rng.IntN(2)]
	teams := []string{"tenant-b", "gpu-team-x", "team-payments"}
	taints := []v1.Taint{
		{Key: "dedicated", Value: "tenant-b", Effect: v1.TaintEffectNoSchedule},
		{Key: "nvidia.com/gpu", Effect: v1.TaintEffectNoSchedule},
		{Key: teamKey, Value: "gpu-team-x", Effect: v1.TaintEffectNoExecute},
		{Key: "example.com/maintenance-window", Effect: v1.TaintEffectNoExecute},
		{Key: "spot-interruption", Value: "imminent", Effect: v1.TaintEffectPreferNoSchedule},
		{Key: "tenant-b-only", Effect: v1.TaintEffectNoSchedule},
	}

	pinnedHosts := rng.IntN(4) == 0
	nodes := 3 + rng.IntN(10)
	reserving, reserved := pinnedHosts || rng.IntN(2) == 0, map[string]bool{}
	var nodeNames []string
	for i := range nodes {
		var name, short string
		switch rng.IntN(6) {
		case 5:
			// Named like a zone, as bare-metal and edge clusters do.
			name = zones[rng.IntN(len(zones))]
			if slices.Contains(nodeNames, name) {
				name += fmt.Sprintf("-%d", i)
			}
		case 0:
			short = fmt.Sprintf("ip-10-0-%d-%d", i, 10+rng.IntN(240))
			name = short + ".ec2.internal"
		case 1:
			name = fmt.Sprintf("gke-prod-tenant-b-pool-%08x-%d", rng.Uint32(), i)
		case 2:
			name = fmt.Sprintf("aks-gpupool-%d-vmss%06d", 10000000+rng.IntN(89999999), i)
		case 3:
			name = fmt.Sprintf("tenant-b-secret-node-%d", i)
		default:
			name = fmt.Sprintf("gpu-team-x-node%d", i)
		}
		nodeNames = append(nodeNames, name)
		n := st.MakeNode().Name(name).Label("kubernetes.io/os", "linux").
			Label("node.kubernetes.io/instance-type", pick("m5.2xlarge", "p4d.24xlarge", "Standard_NC6s_v3"))
		switch {
		case short != "" && rng.IntN(2) == 0:
			n.Label(v1.LabelHostname, short)
		case i > 0 && rng.IntN(10) == 0:
			n.Label(v1.LabelHostname, nodeNames[i-1])
		case rng.IntN(12) == 0:
			n.RemoveLabel(v1.LabelHostname)
		}
		team := teams[rng.IntN(len(teams))]
		if rng.IntN(2) == 0 {
			n.Label(teamKey, team)
		}
		if rng.IntN(8) > 0 {
			switch zoneStyle {
			case 2:
				// A zone per node, named after it: bare metal.
				n.Zone(name)
			case 3:
				// A team's label value reused as the zone.
				n.Zone(team)
			default:
				n.Zone(zones[rng.IntN(len(zones))])
			}
			n.Region("us-east-1")
		}
		if rng.IntN(2) == 0 {
			n.Label(rackKey, fmt.Sprintf("rack-%02d", rng.IntN(4)))
		}
		if rng.IntN(2) == 0 {
			n.Label(nodeGroupKey, pick("ng-tenant-b-gpu", "ng-general"))
		}
		if rng.IntN(2) == 0 {
			n.Label(karpenterv1.CapacityTypeLabelKey, pick("spot", "on-demand"))
		}
		if rng.IntN(4) == 0 {
			n.Label("node-role.kubernetes.io/tenant-b-infra", "")
		}
		if rng.IntN(3) == 0 {
			// Odd values users write: dots and underscores, two characters,
			// a zone's name.
			n.Label(poolKey, pick("tenant_b.gpu-01", "Q7", "reserved__x.y", zones[0]))
		}
		for range rng.IntN(3) {
			tt := taints[rng.IntN(len(taints))]
			n.Taint(tt.Key, tt.Value, tt.Effect)
		}
		if reserving && (rng.IntN(3) == 0 || i == 0) {
			// Another tenant's node, which a constraint counting tainted
			// nodes counts at 0: "gpu-team-x-node has no schedulable node".
			tt := taints[rng.IntN(3)]
			n.Taint(tt.Key, tt.Value, tt.Effect)
			reserved[name] = true
		}
		if rng.IntN(6) == 0 {
			n.Cordoned()
		}
		c.objs = append(c.objs, n.Obj())
	}

	// The nodes an autoscaler can add, in two rounds of three: a template
	// the pod can use is a fresh hostname, which a per-host constraint
	// always takes.
	autoscaled := !pinnedHosts && rng.IntN(3) > 0
	if !autoscaled {
		c.templates = lookup.TemplateOptions{}
	}
	newZone := pick("us-east-1d", "zone-z", "tenant-b")
	// A node class whose subnets serve only the first zone: the NodePools
	// that name it require newZone, which it cannot serve.
	nodeClass := pick("tenant-b-private-subnets", "team-x-nodeclass")
	unservable := autoscaled && rng.IntN(3) > 0
	if unservable {
		c.objs = append(c.objs, &nodeclassv1.EC2NodeClass{ObjectMeta: metav1.ObjectMeta{Name: nodeClass},
			Status: nodeclassv1.NodeClassStatus{Subnets: []nodeclassv1.Subnet{{Zone: zones[0]}}}})
	}
	for i := range rng.IntN(3) * btoi(autoscaled) {
		nt := &v1alpha1.NodeTemplate{ObjectMeta: metav1.ObjectMeta{Name: pick("tenant-b-gpu-scale-from-zero", "team-payments-highmem") + fmt.Sprint(i)}}
		nt.Spec.Labels = map[string]string{teamKey: teams[rng.IntN(len(teams))], v1.LabelTopologyZone: pick(append(zones, newZone)...)}
		if rng.IntN(5) == 0 {
			nt.Spec.Labels[v1.LabelHostname] = "tenant-b-reserved-host"
		}
		if rng.IntN(2) == 0 {
			nt.Spec.Labels[rackKey] = fmt.Sprintf("rack-%02d", rng.IntN(6))
		}
		if rng.IntN(2) == 0 {
			nt.Spec.Taints = []v1.Taint{taints[rng.IntN(len(taints))]}
		}
		c.objs = append(c.objs, nt)
	}
	for range max(rng.IntN(3)*btoi(autoscaled), btoi(unservable)) {
		np := &karpenterv1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: pick("tenant-b-batch", "team-x-spot")}}
		if slices.ContainsFunc(c.objs, func(o runtime.Object) bool {
			p, ok := o.(*karpenterv1.NodePool)
			return ok && p.Name == np.Name
		}) {
			continue
		}
		np.Spec.Template.Labels = map[string]string{teamKey: teams[rng.IntN(len(teams))]}
		np.Spec.Template.Spec.Requirements = []karpenterv1.NodeSelectorRequirementWithMinValues{
			{Key: v1.LabelTopologyZone, Operator: v1.NodeSelectorOpIn, Values: []string{zones[0], newZone}},
			{Key: karpenterv1.CapacityTypeLabelKey, Operator: v1.NodeSelectorOpIn, Values: []string{"spot"}},
		}
		if rng.IntN(2) == 0 {
			np.Spec.Template.Spec.Taints = []v1.Taint{taints[rng.IntN(len(taints))]}
		}
		if unservable {
			np.Spec.Template.Spec.NodeClassRef = &karpenterv1.NodeClassReference{Group: nodeclassv1.EC2GroupName, Kind: nodeclassv1.KindEC2NodeClass, Name: nodeClass}
		}
		c.objs = append(c.objs, np)
	}

	// Tenant shop's Deployment web, its ReplicaSet and its pods, and
	// another tenant's pods beside them.
	keys := []string{v1.LabelTopologyZone, v1.LabelTopologyZone, v1.LabelHostname, v1.LabelHostname, v1.LabelHostname,
		rackKey, nodeGroupKey, karpenterv1.CapacityTypeLabelKey}
	// Half the clusters with an unserved zone spread over zones first, the
	// tenant's pods piled up, so that a denial says so in enough rounds.
	zoneRound := unservable && rng.IntN(2) == 0
	zoneFirst := zoneRound
	constraint := func(soft bool) v1alpha1.Constraint {
		key := keys[rng.IntN(len(keys))]
		if zoneFirst {
			key, zoneFirst = v1.LabelTopologyZone, false
		}
		k := policytest.MakeConstraint().TopologyKey(key).MaxSkew(int32(1 + rng.IntN(3)/2))
		if soft {
			return k.ScheduleAnyway().Obj()
		}
		k.DoNotSchedule()
		if rng.IntN(3) == 0 {
			k.MinDomains(int32(2 + rng.IntN(4)))
		}
		if p := rng.IntN(4); p < 3 {
			k.NodeTaintsPolicy([]v1.NodeInclusionPolicy{v1.NodeInclusionPolicyHonor, v1.NodeInclusionPolicyIgnore, v1.NodeInclusionPolicyIgnore}[p])
		}
		if rng.IntN(3) == 0 {
			k.NodeAffinityPolicy(v1.NodeInclusionPolicyIgnore)
		}
		return k.Obj()
	}
	actions := []v1alpha1.ValidationAction{v1alpha1.ActionDeny, v1alpha1.ActionDeny, v1alpha1.ActionWarn, v1alpha1.ActionAudit}
	sp := policytest.MakeSpreadPolicy().Namespace(tenantNamespace).Name("spread").Action(actions[rng.IntN(len(actions))])
	if pinnedHosts {
		sp.Constraint(policytest.MakeConstraint().Hostname().MaxSkew(1).DoNotSchedule().NodeTaintsPolicy(v1.NodeInclusionPolicyIgnore).Obj())
	} else {
		sp.Constraint(constraint(false))
	}
	if rng.IntN(3) == 0 {
		sp.Constraint(constraint(rng.IntN(2) == 0))
	}
	c.policies = []*v1alpha1.SpreadPolicy{sp.Obj()}
	if rng.IntN(2) == 0 {
		c.cluster = []*v1alpha1.ClusterSpreadPolicy{policytest.MakeClusterSpreadPolicy().Name("everyone").Action(v1alpha1.ActionWarn).
			Constraint(constraint(rng.IntN(3) == 0)).Obj()}
	}

	d := forecasttest.MakeDeployment(tenantNamespace, "web").Replicas(int32(1 + rng.IntN(12))).Obj()
	tmpl := &d.Spec.Template.Spec
	if !pinnedHosts && rng.IntN(4) == 0 {
		tmpl.NodeSelector = map[string]string{teamKey: pick("team-payments", "tenant-b")}
	}
	for range rng.IntN(3) * btoi(!pinnedHosts) {
		tt := taints[rng.IntN(len(taints))]
		tmpl.Tolerations = append(tmpl.Tolerations, v1.Toleration{Key: tt.Key, Operator: v1.TolerationOpExists, Effect: tt.Effect})
	}
	if !pinnedHosts && rng.IntN(4) == 0 {
		// The pod declares its own constraint rather than the policy's.
		own := constraint(false)
		tmpl.TopologySpreadConstraints = []v1.TopologySpreadConstraint{{
			MaxSkew: own.MaxSkew, TopologyKey: own.TopologyKey, WhenUnsatisfiable: own.WhenUnsatisfiable, MinDomains: own.MinDomains,
			NodeTaintsPolicy: own.NodeTaintsPolicy, NodeAffinityPolicy: own.NodeAffinityPolicy,
			LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
		}}
	}
	c.deployment = d
	hash := forecast.PodTemplateHash(&d.Spec.Template, nil)
	rs := st.MakeReplicaSet().Namespace(tenantNamespace).Name("web-"+hash).MatchLabel("app", "web").
		MatchLabel(appsv1.DefaultDeploymentUniqueLabelKey, hash).Obj()
	rs.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "Deployment", Name: d.Name, UID: d.UID, Controller: new(true)}}
	rs.Spec.Template = *d.Spec.Template.DeepCopy()
	rs.Spec.Template.Labels[appsv1.DefaultDeploymentUniqueLabelKey] = hash
	c.pod = forecast.ReplicaSetPod(rs)
	c.objs = append(c.objs, policytest.MakeNamespace(tenantNamespace).Obj(), policytest.MakeNamespace(otherNamespace).Obj(), rs, d)
	if rng.IntN(3) == 0 {
		// A ReplicaSet stored before the API server validated label values
		// in selectors: it cannot be audited (its Report's error result).
		legacy := st.MakeReplicaSet().Namespace(tenantNamespace).Name("legacy").Obj()
		legacy.Spec.Selector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
			{Key: "app", Operator: metav1.LabelSelectorOpIn, Values: []string{"legacy", "front end"}}}}
		legacy.Spec.Template.Labels = map[string]string{"app": "legacy"}
		c.objs = append(c.objs, legacy)
	}
	if rng.IntN(3) == 0 {
		// A policy stored past the webhook: its InvalidPolicy event.
		bad := policytest.MakeSpreadPolicy().Namespace(tenantNamespace).Name("legacy-spread").
			Constraint(policytest.MakeConstraint().Zone().MaxSkew(1).DoNotSchedule().Obj()).Obj()
		bad.UID = "legacy-spread-uid"
		bad.Spec.PodSelector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
			{Key: "app", Operator: "Within", Values: []string{"web"}}}}
		c.invalid = []*v1alpha1.SpreadPolicy{bad}
		c.objs = append(c.objs, bad)
	}
	ours := slices.DeleteFunc(slices.Clone(nodeNames), func(n string) bool { return reserved[n] })
	if len(ours) == 0 {
		ours = nodeNames
	}
	var bound []string
	if pinnedHosts || (!zoneRound && rng.IntN(2) == 0) {
		// One or two on each node of the tenant's.
		for _, n := range ours {
			for range 1 + rng.IntN(2) {
				bound = append(bound, n)
			}
		}
	} else {
		// Piled on the first nodes, so that the spread is uneven.
		for range rng.IntN(3 * len(ours)) {
			bound = append(bound, ours[rng.IntN(1+rng.IntN(len(ours)))])
		}
	}
	for i, node := range bound {
		p := st.MakePod().Namespace(tenantNamespace).Name(fmt.Sprintf("web-%s-%d", hash, i)).Labels(rs.Spec.Template.Labels).
			ControlledBy("ReplicaSet", "apps/v1", rs.Name).Phase(v1.PodRunning).Obj()
		p.Spec = *rs.Spec.Template.Spec.DeepCopy()
		p.Spec.NodeName = node
		if rng.IntN(2) == 0 {
			// A cost someone set, which the ReplicaSet controller
			// deletes by.
			p.Annotations = map[string]string{v1.PodDeletionCost: strconv.Itoa(rng.IntN(10) - 5)}
		}
		c.objs = append(c.objs, p)
	}
	// StatefulSet db, its ordinals piled on the first of the tenant's
	// nodes, which a scale-down deletes from the highest.
	dbPods := 2 + rng.IntN(2*len(ours))
	db := &appsv1.StatefulSet{TypeMeta: metav1.TypeMeta{APIVersion: "apps/v1", Kind: "StatefulSet"},
		ObjectMeta: metav1.ObjectMeta{Namespace: tenantNamespace, Name: "db", UID: "db-uid"},
		Spec: appsv1.StatefulSetSpec{Replicas: new(int32(dbPods)), ServiceName: "db",
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "db"}},
			Template: v1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "db"}},
				Spec: *d.Spec.Template.Spec.DeepCopy()}}}
	for i := range dbPods {
		name := fmt.Sprintf("db-%d", i)
		p := st.MakePod().Namespace(tenantNamespace).Name(name).Label("app", "db").Label(appsv1.StatefulSetPodNameLabel, name).
			Label(appsv1.PodIndexLabel, strconv.Itoa(i)).ControlledBy("StatefulSet", "apps/v1", "db").Phase(v1.PodRunning).Obj()
		p.Spec = *db.Spec.Template.Spec.DeepCopy()
		p.Spec.NodeName = ours[rng.IntN(1+rng.IntN(len(ours)))]
		c.objs = append(c.objs, p)
	}
	c.statefulSet = db
	c.objs = append(c.objs, db)
	for i := range rng.IntN(nodes) {
		c.objs = append(c.objs, st.MakePod().Namespace(otherNamespace).Name(fmt.Sprintf("batch-%d", i)).Label("app", "batch").
			Node(nodeNames[rng.IntN(nodes)]).Phase(v1.PodRunning).Obj())
	}
	for _, p := range c.policies {
		c.objs = append(c.objs, p)
	}
	for _, p := range c.cluster {
		c.objs = append(c.objs, p)
	}

	var err error
	if c.store, err = lookup.NewStore(c.objs...); err != nil {
		t.Fatal(err)
	}
	c.index = spread.IndexFromSnapshot(c.store.Snapshot())
	derived, err := lookup.Derive(t.Context(), c.store, c.templates)
	if err != nil {
		t.Fatal(err)
	}
	c.derived = derived.Derived
	c.index.SetTemplates(derived.Templates)
	c.index.SetUnservedZones(derived.Unserved())
	c.hidden = c.hiddenNames(derived.Templates)
	return c
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// hiddenNames are the names of the nodes, their labels and taints, and the
// templates, less what the constraints in play count by (see the test's
// comment).
func (c *tenantCluster) hiddenNames(ts []spread.Template) names {
	hidden, allowed := map[string]bool{}, map[string]bool{}
	var keys []string
	addKeys := func(cs []v1alpha1.Constraint) {
		for _, k := range cs {
			keys = append(keys, k.TopologyKey)
		}
	}
	for _, p := range c.policies {
		addKeys(p.Spec.Constraints)
	}
	for _, p := range c.cluster {
		addKeys(p.Spec.Constraints)
	}
	for _, p := range c.invalid {
		addKeys(p.Spec.Constraints)
	}
	for _, k := range c.deployment.Spec.Template.Spec.TopologySpreadConstraints {
		keys = append(keys, k.TopologyKey)
	}
	labelled := func(ls map[string]string, taints []v1.Taint) {
		for k, v := range ls {
			hidden[k], hidden[v] = true, true
			if slices.Contains(keys, k) && k != v1.LabelHostname {
				allowed[v] = true
			}
		}
		for _, tt := range taints {
			hidden[tt.Key], hidden[tt.Value] = true, true
		}
	}
	for _, o := range c.objs {
		switch o := o.(type) {
		case *v1.Node:
			hidden[o.Name] = true
			labelled(o.Labels, o.Spec.Taints)
		case *v1alpha1.NodeTemplate:
			hidden[o.Name] = true
			labelled(o.Spec.Labels, o.Spec.Taints)
		case *karpenterv1.NodePool:
			hidden[o.Name] = true
			labelled(o.Spec.Template.Labels, o.Spec.Template.Spec.Taints)
		case *nodeclassv1.EC2NodeClass:
			hidden[o.Name] = true
		}
	}
	for _, tm := range ts {
		hidden[tm.Name] = true
		labelled(tm.Labels, tm.Taints)
	}
	// A zone a NodePool requires but cannot serve is a domain of the
	// zone key all the same: Karpenter counts it.
	for _, z := range c.derived.Unserved() {
		if slices.Contains(keys, v1.LabelTopologyZone) {
			allowed[z.Zone] = true
		}
	}
	for _, k := range keys {
		allowed[k] = true
	}
	var out names
	for s := range hidden {
		if s != "" && !allowed[s] {
			out = append(out, s)
		}
	}
	slices.Sort(out)
	return out
}

// render returns every string a tenant can read about the cluster, worded
// under detail.
func (c *tenantCluster) render(t *testing.T, detail spread.MessageDetail) []rendered {
	t.Helper()
	cfg := engine.Config{DefaultAction: v1alpha1.ActionDeny, ExcludedNamespaces: []string{metav1.NamespaceSystem}, MessageDetail: detail}
	src := lookup.NewSources(c.store)
	// The handlers log to their request's context: here, nowhere.
	ctx := logf.IntoContext(t.Context(), logr.Discard())
	var out []rendered
	add := func(path string, texts ...string) {
		for _, s := range texts {
			if s != "" {
				out = append(out, rendered{path, s})
			}
		}
	}

	// The pod webhook, at CREATE of the pod as mutated, and when the last
	// scheduling gate of the same pod is removed.
	m, err := engine.Mutate(c.pod, src, cfg)
	if err != nil {
		t.Fatalf("mutating: %v", err)
	}
	pod := c.pod
	if m.Pod != nil {
		pod = m.Pod
	}
	events := &recordedEvents{}
	validator := &sgadmission.PodValidator{
		PodWebhook: sgadmission.PodWebhook{Sources: func(_ context.Context) engine.Sources { return src }, Config: cfg},
		Checker:    c.index, Recorder: events,
	}
	resp := validator.Handle(ctx, podRequest(t, admissionv1.Create, pod, nil))
	if !resp.Allowed {
		add(pathDenial, resp.Result.Message)
	}
	for _, w := range resp.Warnings {
		if strings.HasPrefix(w, engine.NewNodeWarningPrefix) {
			add(pathNewNode, w)
		} else {
			add(pathWarning, w)
		}
	}
	for _, a := range resp.AuditAnnotations {
		add(pathAudit, a)
	}
	add(pathOwnerEvent, events.notes...)
	events.notes = nil
	gated := pod.DeepCopy()
	gated.Name = "web-gated"
	gated.Spec.SchedulingGates = []v1.PodSchedulingGate{{Name: "example.com/quota"}}
	lifted := gated.DeepCopy()
	lifted.Spec.SchedulingGates = nil
	resp = validator.Handle(ctx, podRequest(t, admissionv1.Update, lifted, gated))
	add(pathGateWarning, resp.Warnings...)
	add(pathPodEvent, events.notes...)

	// The workload webhook's forecast, at CREATE of the Deployment.
	forecaster := &sgadmission.WorkloadForecaster{Sources: func(_ context.Context) engine.Sources { return src }, Config: cfg, Cluster: c.index,
		Workloads: c.store}
	resp = forecaster.Handle(ctx, workloadRequest(t, c.deployment))
	add(pathForecast, resp.Warnings...)

	// The audit: Reports and policy status.
	st, err := healthOfObjects(t.Context(), c.objs, "", cfg, c.templates, io.Discard)
	if err != nil {
		t.Fatalf("auditing: %v", err)
	}
	results := st.results
	for _, u := range st.unreachable {
		add(pathReady, u.reason+": "+u.message)
	}
	for _, rep := range health.Reports(results, detail) {
		for _, r := range rep.Results {
			if r.Result == health.ResultError {
				add(pathErrorResult, r.Message)
			}
			add(pathReportMessage, r.Message)
			for _, p := range r.Properties {
				add(pathReportProperty, p)
			}
		}
	}
	// The results the controller of spread health adds to the Reports of
	// the policies' namespaces: minDomains out of reach, unserved zones.
	judged := func(name string, ref v1.ObjectReference, spec *v1alpha1.PolicySpec) {
		ready := metav1.Condition{Status: metav1.ConditionTrue}
		_, reach := health.Reach(ready, name, ref, autoscale.ConstraintsOutOfReach(spec.Constraints, ofType[*v1.Node](c.objs), c.derived.Templates), detail)
		_, unserved := health.Unserved(ready, name, ref, spec.Constraints, c.derived.Unserved(), detail)
		for _, r := range append(reach, unserved...) {
			add(pathReportMessage, r.Message)
			for _, p := range r.Properties {
				add(pathReportProperty, p)
			}
		}
	}
	for _, p := range c.policies {
		judged(p.Namespace+"/"+p.Name, v1.ObjectReference{Kind: v1alpha1.KindSpreadPolicy, Namespace: p.Namespace, Name: p.Name}, &p.Spec)
	}
	for _, p := range c.cluster {
		judged(p.Name, v1.ObjectReference{Kind: v1alpha1.KindClusterSpreadPolicy, Name: p.Name}, &p.Spec.PolicySpec)
	}
	tally := health.Tally(results)
	for _, p := range c.policies {
		ready := health.Ready(&p.Spec, policy.ValidateSpreadPolicy(p), []string{p.Namespace},
			tally[health.PolicyKey{Kind: v1alpha1.KindSpreadPolicy, Name: p.Namespace + "/" + p.Name}], c.index)
		add(pathReady, ready.Reason+": "+ready.Message)
	}
	for _, p := range c.cluster {
		ready := health.Ready(&p.Spec.PolicySpec, policy.ValidateClusterSpreadPolicy(p), []string{tenantNamespace, otherNamespace},
			tally[health.PolicyKey{Kind: v1alpha1.KindClusterSpreadPolicy, Name: p.Name}], c.index)
		add(pathReady, ready.Reason+": "+ready.Message)
	}

	// kubectl-spread: check, plan and status.
	rev, err := review(c.pod, c.store, cfg, c.templates, io.Discard)
	if err != nil {
		t.Fatalf("reviewing: %v", err)
	}
	var b bytes.Buffer
	if err := writeReview(&b, "", rev, detail); err != nil {
		t.Fatal(err)
	}
	add(pathCheck, b.String())
	for _, format := range []string{"json", "yaml"} {
		b.Reset()
		if err := writeReview(&b, format, rev, detail); err != nil {
			t.Fatal(err)
		}
		add(pathCheckDoc, document(t, b.Bytes(), format))
	}
	w, err := forecast.Of(c.deployment, 0)
	if err != nil {
		t.Fatal(err)
	}
	f, err := forecast.Run(w, src, c.index, cfg)
	if err != nil {
		t.Fatalf("forecasting: %v", err)
	}
	b.Reset()
	if err := writePlan(&b, f); err != nil {
		t.Fatal(err)
	}
	add(pathPlan, b.String())

	// The ReplicaSet's scale-downs to each size below its pods, as plan
	// forecasts them: the warning the forecast words, and plan's report.
	sw, err := existingWorkload(t.Context(), c.store, "replicaset/"+metav1.GetControllerOf(c.pod).Name, tenantNamespace)
	if err != nil {
		t.Fatal(err)
	}
	for replicas := range sw.Existing {
		sw.Replicas = replicas
		if f, err = forecast.Run(sw, src, c.index, cfg); err != nil {
			t.Fatalf("forecasting the scale-down to %d: %v", replicas, err)
		}
		add(pathScaleDown, f.Warning())
		b.Reset()
		if err := writePlan(&b, f); err != nil {
			t.Fatal(err)
		}
		if len(f.Departures) > 0 {
			add(pathPlanScaleDown, b.String())
		}
	}
	b.Reset()
	if err := writeStatus(&b, st, detail); err != nil {
		t.Fatal(err)
	}
	add(pathStatus, b.String())

	// explain, status and plan as a user runs them on the live cluster, in
	// every output format.
	live := make([]runtime.Object, len(c.objs))
	for i, o := range c.objs {
		live[i] = o.DeepCopyObject()
	}
	connect := fakeCluster(t, live...)
	cli := func(args ...string) result {
		var stdout, stderr bytes.Buffer
		args = append(args, "--message-detail", string(detail), "--node-group-label", nodeGroupKey)
		code := runWith(args, &stdout, &stderr, connect)
		return result{code: code, stdout: stdout.String(), stderr: stderr.String()}
	}
	for _, format := range []string{"", "json", "yaml"} {
		ex := cli("explain", "deployment/web", "-n", tenantNamespace, "-o", format)
		sts := cli("status", "-n", tenantNamespace, "-o", format)
		for _, r := range []result{ex, sts} {
			if r.code == exitBadInput {
				t.Fatalf("-o %q: exit %d: %s", format, r.code, r.stderr)
			}
		}
		if format == "" {
			add(pathExplain, ex.stdout)
			add(pathStatusLive, sts.stdout)
			continue
		}
		add(pathExplainDoc, document(t, []byte(ex.stdout), format))
		add(pathStatusDoc, document(t, []byte(sts.stdout), format))
		pl := cli("plan", "deployment/web", "-n", tenantNamespace, "-o", format)
		switch {
		case detail.NamesNodes() && pl.code == exitBadInput:
			t.Fatalf("plan -o %s under nodes: %s", format, pl.stderr)
		case detail.NamesNodes():
			add(pathPlanDoc, document(t, []byte(pl.stdout), format))
		case pl.code != exitBadInput || pl.stdout != "" || !strings.Contains(pl.stderr, "--message-detail nodes"):
			t.Fatalf("plan -o %s under domains = exit %d, stdout %q, stderr %q; want exit 2 and an error naming --message-detail nodes",
				format, pl.code, pl.stdout, pl.stderr)
		default:
			add(pathPlanRefusal, pl.stderr)
		}
	}

	// The workload webhook's other forecasts: a StatefulSet's CREATE, a
	// scale of the Deployment, and an UPDATE that rolls it out and scales
	// it up.
	sts := &appsv1.StatefulSet{TypeMeta: metav1.TypeMeta{APIVersion: "apps/v1", Kind: "StatefulSet"},
		ObjectMeta: metav1.ObjectMeta{Namespace: tenantNamespace, Name: "cache"},
		Spec: appsv1.StatefulSetSpec{Replicas: c.deployment.Spec.Replicas, Selector: c.deployment.Spec.Selector,
			Template: *c.deployment.Spec.Template.DeepCopy(), ServiceName: "db"}}
	resp = forecaster.Handle(ctx, workloadReq(t, admissionv1.Create, "StatefulSet", "statefulsets", "", sts.Name, sts, nil))
	add(pathStatefulSetForecast, resp.Warnings...)
	replicas := *c.deployment.Spec.Replicas
	scale := func(name string, n int32) *autoscalingv1.Scale {
		return &autoscalingv1.Scale{TypeMeta: metav1.TypeMeta{APIVersion: "autoscaling/v1", Kind: "Scale"},
			ObjectMeta: metav1.ObjectMeta{Namespace: tenantNamespace, Name: name}, Spec: autoscalingv1.ScaleSpec{Replicas: n}}
	}
	resp = forecaster.Handle(ctx, workloadReq(t, admissionv1.Update, "Scale", "deployments", "scale", c.deployment.Name,
		scale(c.deployment.Name, replicas+5), scale(c.deployment.Name, replicas)))
	add(pathScaleForecast, resp.Warnings...)
	// kubectl scale sts db to each size below its pods.
	dbReplicas := *c.statefulSet.Spec.Replicas
	for n := range dbReplicas {
		resp = forecaster.Handle(ctx, workloadReq(t, admissionv1.Update, "Scale", "statefulsets", "scale", c.statefulSet.Name,
			scale(c.statefulSet.Name, n), scale(c.statefulSet.Name, dbReplicas)))
		add(pathStatefulSetScaleDown, resp.Warnings...)
	}
	updated := c.deployment.DeepCopy()
	updated.Spec.Replicas = new(replicas + 4)
	updated.Spec.Template.Annotations = map[string]string{"example.com/restarted-at": "2026-11-28T14:00:00Z"}
	resp = forecaster.Handle(ctx, workloadReq(t, admissionv1.Update, "Deployment", "deployments", "", updated.Name, updated, c.deployment))
	add(pathUpdateForecast, resp.Warnings...)

	// The InvalidPolicy events on policies stored past the webhook.
	recorded := &recordedEvents{}
	judge, err := policies.New(state.NewCluster(spread.NewIndex(), nil), logr.Discard(), recorded, prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range c.invalid {
		judge.Observe(p)
	}
	add(pathInvalidPolicy, recorded.notes...)
	return out
}

// document is a JSON or YAML document as the tenant reads it, less what
// the tenant wrote itself into the pod (its nodeSelector, affinity and
// tolerations may name node labels and taints: they are its own words),
// in the same format.
func document(t *testing.T, data []byte, format string) string {
	t.Helper()
	var doc any
	if err := yaml.Unmarshal(data, &doc); err != nil {
		t.Fatalf("-o %s is not one document: %v\n%s", format, err, data)
	}
	if m, ok := doc.(map[string]any); ok {
		if pod, ok := m["pod"].(map[string]any); ok {
			if spec, ok := pod["spec"].(map[string]any); ok {
				delete(spec, "nodeSelector")
				delete(spec, "affinity")
				delete(spec, "tolerations")
			}
		}
	}
	var out []byte
	var err error
	if format == "yaml" {
		out, err = yaml.Marshal(doc)
	} else {
		out, err = json.MarshalIndent(doc, "", "  ")
	}
	if err != nil {
		t.Fatal(err)
	}
	return string(out)
}

// workloadReq is the workload webhook's request for obj (and old, for an
// UPDATE), of kind on resource (and subresource) of apps/v1.
func workloadReq(t *testing.T, op admissionv1.Operation, kind, resource, subresource, name string, obj, old runtime.Object) admission.Request {
	t.Helper()
	k := metav1.GroupVersionKind{Group: "apps", Version: "v1", Kind: kind}
	if kind == "Scale" {
		k = metav1.GroupVersionKind{Group: "autoscaling", Version: "v1", Kind: kind}
	}
	r := metav1.GroupVersionResource{Group: "apps", Version: "v1", Resource: resource}
	req := admissionv1.AdmissionRequest{UID: "uid-3", Operation: op, Kind: k, Resource: r, SubResource: subresource, RequestKind: &k,
		RequestResource: &r, RequestSubResource: subresource, Namespace: tenantNamespace, Name: name,
		Object: runtime.RawExtension{Raw: mustJSON(t, obj)}}
	if old != nil {
		req.OldObject = runtime.RawExtension{Raw: mustJSON(t, old)}
	}
	return admission.Request{AdmissionRequest: req}
}

func podRequest(t *testing.T, op admissionv1.Operation, pod, old *v1.Pod) admission.Request {
	t.Helper()
	kind := metav1.GroupVersionKind{Version: "v1", Kind: "Pod"}
	resource := metav1.GroupVersionResource{Version: "v1", Resource: "pods"}
	req := admissionv1.AdmissionRequest{UID: "uid-1", Operation: op, Kind: kind, Resource: resource, RequestKind: &kind,
		RequestResource: &resource, Namespace: pod.Namespace, Name: pod.Name, Object: runtime.RawExtension{Raw: mustJSON(t, pod)}}
	if old != nil {
		req.OldObject = runtime.RawExtension{Raw: mustJSON(t, old)}
	}
	return admission.Request{AdmissionRequest: req}
}

func workloadRequest(t *testing.T, d *appsv1.Deployment) admission.Request {
	t.Helper()
	kind := metav1.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"}
	resource := metav1.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}
	return admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{UID: "uid-2", Operation: admissionv1.Create, Kind: kind,
		Resource: resource, RequestKind: &kind, RequestResource: &resource, Namespace: d.Namespace, Name: d.Name,
		Object: runtime.RawExtension{Raw: mustJSON(t, d)}}}
}

func mustJSON(t *testing.T, obj any) []byte {
	t.Helper()
	b, err := json.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// recordedEvents keeps the notes of the events recorded.
type recordedEvents struct{ notes []string }

func (r *recordedEvents) Eventf(_, _ runtime.Object, _, _, _, note string, args ...any) {
	r.notes = append(r.notes, fmt.Sprintf(note, args...))
}

// names are strings a text must not hold as a name of its own.
type names []string

// in returns the names that text holds as a whole name: not inside a longer
// one ("tenant-b" is not in "tenant-b-batch" nor in "example.com/tenant-b"),
// but before a sentence's full stop, a comma, an '=' or a ':', and not cut
// short by a truncation.
func (ns names) in(text string) []string {
	var out []string
	for _, n := range ns {
		for i := 0; ; {
			j := strings.Index(text[i:], n)
			if j < 0 {
				break
			}
			start, end := i+j, i+j+len(n)
			// An event's note is cut at the API's limit with "...": a name
			// cut there ("us-east-1" of "us-east-1d") is no name of its own.
			cut := end == len(text)-len("...") && strings.HasSuffix(text, "...")
			if nameStarts(text, start) && nameEnds(text, end) && !cut {
				out = append(out, n)
				break
			}
			i = start + 1
		}
	}
	return out
}

func alnum(b byte) bool {
	return b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z' || b >= '0' && b <= '9'
}

// nameStarts reports whether a name can start at text[i]: a name goes on
// across '-' and '_', and across '.' and '/' between alphanumerics.
func nameStarts(text string, i int) bool {
	if i == 0 {
		return true
	}
	switch p := text[i-1]; {
	case alnum(p) || p == '-' || p == '_':
		return false
	case p == '.' || p == '/':
		return i < 2 || !alnum(text[i-2])
	}
	return true
}

func nameEnds(text string, i int) bool {
	if i == len(text) {
		return true
	}
	switch n := text[i]; {
	case alnum(n):
		return false
	case n == '-' || n == '_' || n == '.' || n == '/':
		return i+1 == len(text) || !alnum(text[i+1])
	}
	return true
}
