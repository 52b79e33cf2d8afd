package forecast

import (
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/spreadguard/spreadguard/pkg/apis/spreadguard/v1alpha1"
	"github.com/spreadguard/spreadguard/pkg/engine"
	"github.com/spreadguard/spreadguard/pkg/forecast/forecasttest"
	"github.com/spreadguard/spreadguard/pkg/policy"
	"github.com/spreadguard/spreadguard/pkg/policy/policytest"
	"github.com/spreadguard/spreadguard/pkg/spread"
	"github.com/spreadguard/spreadguard/pkg/spread/spreadtest"
)

const shop = "shop"

// sources joins the selector lookups of spreadtest and the policy lookups
// of pkg/policy.
type sources struct {
	*spreadtest.FakeSelectorSources
	policy.SliceLister
}

// world is a cluster for a forecast, built with option methods.
type world struct {
	snap     spread.Snapshot
	policies []*v1alpha1.SpreadPolicy
}

func makeWorld() *world { return &world{} }

// zones adds, per zone, nodes <zone>-1 .. <zone>-perZone.
func (w *world) zones(perZone int, zones ...string) *world {
	for _, z := range zones {
		for i := 1; i <= perZone; i++ {
			w.snap.Nodes = append(w.snap.Nodes, spreadtest.MakeNode().Name(fmt.Sprintf("%s-%d", z, i)).Zone(z).Obj())
		}
	}
	return w
}

func (w *world) node(n *v1.Node) *world { w.snap.Nodes = append(w.snap.Nodes, n); return w }

func (w *world) pod(p *v1.Pod) *world { w.snap.Pods = append(w.snap.Pods, p); return w }

func (w *world) template(t spread.Template) *world {
	w.snap.Templates = append(w.snap.Templates, t)
	return w
}

func (w *world) policy(p *v1alpha1.SpreadPolicy) *world { w.policies = append(w.policies, p); return w }

func (w *world) sources() *sources {
	return &sources{
		FakeSelectorSources: spreadtest.SelectorSources(),
		SliceLister: policy.SliceLister{
			Namespaces: []*v1.Namespace{{ObjectMeta: metav1.ObjectMeta{Name: shop}}},
			Policies:   w.policies,
		},
	}
}

// zonesPolicy spreads over zones, maxSkew 1, counting cordoned and tainted
// nodes (nodeTaintsPolicy Ignore) so that they can pin the global minimum.
func zonesPolicy() *policytest.SpreadPolicyWrapper {
	return policytest.MakeSpreadPolicy().Namespace(shop).Name("zones").Constraint(
		policytest.MakeConstraint().Zone().MaxSkew(1).DoNotSchedule().NodeTaintsPolicy(v1.NodeInclusionPolicyIgnore).Obj())
}

// hostsPolicy is zonesPolicy over hostnames.
func hostsPolicy() *policytest.SpreadPolicyWrapper {
	return policytest.MakeSpreadPolicy().Namespace(shop).Name("hosts").Constraint(
		policytest.MakeConstraint().Hostname().MaxSkew(1).DoNotSchedule().NodeTaintsPolicy(v1.NodeInclusionPolicyIgnore).Obj())
}

// deployment is shop/web, app=web, with n replicas.
func deployment(n int32) *appsv1.Deployment {
	return forecasttest.MakeDeployment(shop, "web").Replicas(n).Obj()
}

// outcome is what a forecast scenario compares: the warning, where each
// replica went, and why nothing was forecast.
type outcome struct {
	Warning string
	Nodes   []string
	Skipped string
}

func outcomeOf(f *Forecast) outcome {
	o := outcome{Warning: f.Warning(), Skipped: f.Skipped}
	for _, p := range f.Placements {
		o.Nodes = append(o.Nodes, p.Node)
	}
	return o
}

func TestForecast(t *testing.T) {
	hash := PodTemplateHash(&deployment(1).Spec.Template, nil)
	webPod := func(node string, i int) *v1.Pod {
		return spreadtest.MakePod().Namespace(shop).Name(fmt.Sprintf("web-%s-%d", node, i)).Label("app", "web").
			Label(appsv1.DefaultDeploymentUniqueLabelKey, hash).Node(node).Obj()
	}
	withAnnotation := deployment(3)
	withAnnotation.Spec.Template.Annotations = map[string]string{v1alpha1.AnnotationSkip: "true"}
	ownHostname := deployment(4)
	ownHostname.Spec.Template.Spec.TopologySpreadConstraints = []v1.TopologySpreadConstraint{
		spreadtest.Constraint(1, v1.LabelHostname).DoNotSchedule().MatchLabel("app", "web").Obj(),
	}
	tests := []struct {
		name     string
		world    *world
		workload any
		existing int32
		cfg      engine.Config
		want     outcome
	}{
		{
			name:     "9 replicas over 3 zones of 2 nodes, maxSkew 1 -> 3 per zone, least-loaded zone first, no warning",
			world:    makeWorld().zones(2, "zone-a", "zone-b", "zone-c").policy(zonesPolicy().Obj()),
			workload: deployment(9),
			want: outcome{Nodes: []string{"zone-a-1", "zone-b-1", "zone-c-1", "zone-a-1", "zone-b-1", "zone-c-1",
				"zone-a-1", "zone-b-1", "zone-c-1"}},
		},
		{
			name: "zone-c only cordoned, counted under nodeTaintsPolicy Ignore -> replica 3 of 9 refused, zone-c named, a=1 b=1 c=0",
			world: makeWorld().zones(1, "zone-a", "zone-b").policy(zonesPolicy().Obj()).
				node(spreadtest.MakeNode().Name("zone-c-1").Zone("zone-c").Cordoned().Obj()),
			workload: deployment(9),
			want: outcome{
				Warning: "spreadguard: replica 3 of 9 would be refused: zone-c has no schedulable node; " +
					"zone: zone-a=1 zone-b=1 zone-c=0, maxSkew 1 (policy shop/zones)",
				Nodes: []string{"zone-a-1", "zone-b-1"},
			},
		},
		{
			name: "the same under messageDetail domains -> zone-c is still named: the constraint counts by zones",
			world: makeWorld().zones(1, "zone-a", "zone-b").policy(zonesPolicy().Obj()).
				node(spreadtest.MakeNode().Name("zone-c-1").Zone("zone-c").Cordoned().Obj()),
			workload: deployment(9),
			cfg:      engine.Config{MessageDetail: spread.DetailDomains},
			want: outcome{
				Warning: "spreadguard: replica 3 of 9 would be refused: zone-c has no schedulable node; " +
					"zone: zone-a=1 zone-b=1 zone-c=0, maxSkew 1 (policy shop/zones)",
				Nodes: []string{"zone-a-1", "zone-b-1"},
			},
		},
		{
			name: "per-host spread, tenant-b-node cordoned and counted, messageDetail nodes -> replica 3 of 9 refused, the nodes named",
			world: makeWorld().zones(1, "zone-a", "zone-b").policy(hostsPolicy().Obj()).
				node(spreadtest.MakeNode().Name("tenant-b-node").Zone("zone-c").Cordoned().Obj()),
			workload: deployment(9),
			cfg:      engine.Config{MessageDetail: spread.DetailNodes},
			want: outcome{
				Warning: "spreadguard: replica 3 of 9 would be refused: tenant-b-node has no schedulable node; " +
					"hostname: tenant-b-node=0 zone-a-1=1 zone-b-1=1, maxSkew 1 (policy shop/hosts)",
				Nodes: []string{"zone-a-1", "zone-b-1"},
			},
		},
		{
			name: "the same under messageDetail domains -> the nodes counted by what they hold, none named",
			world: makeWorld().zones(1, "zone-a", "zone-b").policy(hostsPolicy().Obj()).
				node(spreadtest.MakeNode().Name("tenant-b-node").Zone("zone-c").Cordoned().Obj()),
			workload: deployment(9),
			cfg:      engine.Config{MessageDetail: spread.DetailDomains},
			want: outcome{
				Warning: "spreadguard: replica 3 of 9 would be refused: 1 node at the global minimum cannot take the pod; " +
					"hostname: 2 nodes with 1, 1 node with 0, maxSkew 1 (policy shop/hosts)",
				Nodes: []string{"zone-a-1", "zone-b-1"},
			},
		},
		{
			name: "a scale from 6 to 9 with 3 pods in each of zones a and b and zone-c cordoned since -> replica 7 of 9 refused",
			world: makeWorld().zones(1, "zone-a", "zone-b").policy(zonesPolicy().Obj()).
				node(spreadtest.MakeNode().Name("zone-c-1").Zone("zone-c").Cordoned().Obj()).
				pod(webPod("zone-a-1", 1)).pod(webPod("zone-a-1", 2)).pod(webPod("zone-a-1", 3)).
				pod(webPod("zone-b-1", 1)).pod(webPod("zone-b-1", 2)).pod(webPod("zone-b-1", 3)),
			workload: deployment(9),
			existing: 6,
			want: outcome{
				Warning: "spreadguard: replica 7 of 9 would be refused: zone-c has no schedulable node; " +
					"zone: zone-a=3 zone-b=3 zone-c=0, maxSkew 1 (policy shop/zones)",
			},
		},
		{
			name: "a cordoned zone-c with a node template for zone-c -> every replica placed, new nodes from the template",
			world: makeWorld().zones(1, "zone-a", "zone-b").policy(zonesPolicy().Obj()).
				node(spreadtest.MakeNode().Name("zone-c-1").Zone("zone-c").Cordoned().Obj()).
				template(spread.Template{Name: "c-pool", Labels: map[string]string{v1.LabelTopologyZone: "zone-c"}}),
			workload: deployment(4),
			want:     outcome{Nodes: []string{"zone-a-1", "zone-b-1", "new-c-pool-1", "zone-a-1"}},
		},
		{
			name: "the same under a Warn policy -> the replica would be admitted but stay Pending",
			world: makeWorld().zones(1, "zone-a", "zone-b").policy(zonesPolicy().Action(v1alpha1.ActionWarn).Obj()).
				node(spreadtest.MakeNode().Name("zone-c-1").Zone("zone-c").Cordoned().Obj()),
			workload: deployment(3),
			want: outcome{
				Warning: "spreadguard: replica 3 of 3 would be admitted but stay Pending: zone-c has no schedulable node; " +
					"zone: zone-a=1 zone-b=1 zone-c=0, maxSkew 1 (policy shop/zones)",
				Nodes: []string{"zone-a-1", "zone-b-1"},
			},
		},
		{
			name: "pods of an older revision in zone-a do not count: the new ReplicaSet's selector holds its pod-template-hash",
			world: makeWorld().zones(1, "zone-a", "zone-b", "zone-c").policy(zonesPolicy().Obj()).
				pod(spreadtest.MakePod().Namespace(shop).Name("old-1").Label("app", "web").
					Label(appsv1.DefaultDeploymentUniqueLabelKey, "old").Node("zone-a-1").Obj()),
			workload: deployment(3),
			want:     outcome{Nodes: []string{"zone-a-1", "zone-b-1", "zone-c-1"}},
		},
		{
			name:     "a template annotated spreadguard.io/skip -> nothing forecast, as the pod path skips it",
			world:    makeWorld().zones(1, "zone-a").policy(zonesPolicy().Obj()),
			workload: withAnnotation,
			want:     outcome{Skipped: engine.SkipAnnotation.String()},
		},
		{
			name:     "a workload in an excluded namespace -> nothing forecast",
			world:    makeWorld().zones(1, "zone-a").policy(zonesPolicy().Obj()),
			workload: deployment(3),
			cfg:      engine.Config{ExcludedNamespaces: []string{shop}},
			want:     outcome{Skipped: engine.SkipExcludedNamespace.String()},
		},
		{
			name:     "a template with its own hostname constraint and no policy -> checked as declared: 4 replicas on 3 nodes",
			world:    makeWorld().zones(1, "zone-a", "zone-b", "zone-c"),
			workload: ownHostname,
			want:     outcome{Nodes: []string{"zone-a-1", "zone-b-1", "zone-c-1", "zone-a-1"}},
		},
		{
			name:     "a pod no policy and no constraint applies to -> nothing forecast",
			world:    makeWorld().zones(1, "zone-a"),
			workload: deployment(3),
			want:     outcome{Skipped: engine.SkipNoPolicy.String()},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w, err := Of(tt.workload, tt.existing)
			if err != nil {
				t.Fatal(err)
			}
			ix := spread.IndexFromSnapshot(tt.world.snap)
			f, err := Run(w, tt.world.sources(), ix, tt.cfg)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, outcomeOf(f)); diff != "" {
				t.Errorf("forecast (-want +got):\n%s", diff)
			}
			checkWarningOnly(t, f, w, tt.world.sources(), ix, tt.cfg)
		})
	}
}

// checkWarningOnly fails unless Run with WarningOnly words full's warning
// and keeps none of what only a report reads.
func checkWarningOnly(t *testing.T, full *Forecast, w *Workload, src engine.Sources, c Cluster, cfg engine.Config) {
	t.Helper()
	brief, err := Run(w, src, c, cfg, WarningOnly())
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(full.Warning(), brief.Warning()); diff != "" {
		t.Errorf("the warning with WarningOnly (-full +WarningOnly):\n%s", diff)
	}
	if len(brief.Placements) > 0 {
		t.Errorf("WarningOnly kept %d placements, want none", len(brief.Placements))
	}
	for _, c := range brief.Constraints {
		if c.Domains != nil {
			t.Errorf("WarningOnly kept the %s counts by domain: %v", c.TopologyKey, c.Domains)
		}
	}
	if (brief.Skewed == nil) != (len(brief.Departures) == 0) {
		t.Errorf("WarningOnly kept %d departures with skewed %+v: want them only with a warning", len(brief.Departures), brief.Skewed)
	}
}

func TestWarningFitsIn250BytesWithThousandsOfDomains(t *testing.T) {
	domains := map[string]int{}
	for i := range 3000 {
		domains[fmt.Sprintf("node-%04d", i)] = 2
	}
	domains["node-0042"] = 0
	f := &Forecast{To: 3001, Policy: shop + "/hosts", Action: v1alpha1.ActionDeny,
		Constraints: []Counts{{TopologyKey: v1.LabelHostname, MaxSkew: 1}},
		Refused:     &Refusal{Replica: 2999, Reason: "node-0042 has no schedulable node", Domains: domains}}
	got := f.Warning()
	if len(got) > MaxWarning {
		t.Errorf("warning is %d bytes, want at most %d: %s", len(got), MaxWarning, got)
	}
	for _, want := range []string{"replica 2999 of 3001", "hostname: node-0042=0 ", "more, maxSkew 1 (policy shop/hosts)"} {
		if !strings.Contains(got, want) {
			t.Errorf("warning %q lacks %q", got, want)
		}
	}
}

func TestAForecastOfAMillionReplicasPlacesMaxPlacementsAndSaysSo(t *testing.T) {
	w, err := Of(deployment(1_000_000), 0)
	if err != nil {
		t.Fatal(err)
	}
	world := makeWorld().zones(1, "zone-a", "zone-b", "zone-c").policy(zonesPolicy().Obj())
	f, err := Run(w, world.sources(), spread.IndexFromSnapshot(world.snap), engine.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if len(f.Placements) != MaxPlacements || !f.Truncated || f.Refused != nil || f.Warning() != "" {
		t.Errorf("placed %d, truncated %v, refused %+v, warning %q; want %d placed, truncated, no refusal and no warning",
			len(f.Placements), f.Truncated, f.Refused, f.Warning(), MaxPlacements)
	}
}
