package forecast

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/spreadguard/spreadguard/pkg/engine"
	"github.com/spreadguard/spreadguard/pkg/spread"
	"github.com/spreadguard/spreadguard/pkg/spread/spreadtest"
)

// statefulSet is shop/db, app=db, scaled to replicas, its ordinals from
// start.
func statefulSet(replicas, start int32) *appsv1.StatefulSet {
	s := &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: shop, Name: "db", UID: "uid-db"},
		Spec: appsv1.StatefulSetSpec{
			Replicas: &replicas,
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "db"}},
			Template: v1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "db"}}},
		},
	}
	if start != 0 {
		s.Spec.Ordinals = &appsv1.StatefulSetOrdinals{Start: start}
	}
	return s
}

// dbPods are the StatefulSet's pods db-<start>, db-<start+1>, ... on the
// nodes given, in order, with the labels its controller gives them.
func dbPods(start int, nodes ...string) []*v1.Pod {
	var pods []*v1.Pod
	for i, node := range nodes {
		name := fmt.Sprintf("db-%d", start+i)
		pods = append(pods, spreadtest.MakePod().Namespace(shop).Name(name).Label("app", "db").
			Label(appsv1.StatefulSetPodNameLabel, name).Label(appsv1.PodIndexLabel, strconv.Itoa(start+i)).
			ControlledBy("StatefulSet", "apps/v1", "db").Node(node).Phase(v1.PodRunning).Obj())
	}
	return pods
}

// replicaSet is shop/web-abc, app=web, scaled to replicas.
func replicaSet(replicas int32) *appsv1.ReplicaSet {
	labels := map[string]string{"app": "web", appsv1.DefaultDeploymentUniqueLabelKey: "abc"}
	return &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: shop, Name: "web-abc", UID: "uid-web-abc"},
		Spec: appsv1.ReplicaSetSpec{
			Replicas: &replicas,
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: v1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}},
		},
	}
}

// webPod is a Ready pod of web-abc on node, its deletion cost cost unless
// empty.
func webPod(name, node, cost string) *v1.Pod {
	p := spreadtest.MakePod().Namespace(shop).Name(name).UID("uid-"+name).Label("app", "web").
		Label(appsv1.DefaultDeploymentUniqueLabelKey, "abc").ControlledBy("ReplicaSet", "apps/v1", "web-abc").
		Node(node).Ready(time.Date(2026, 11, 26, 11, 0, 0, 0, time.UTC))
	if cost != "" {
		p.Annotation(v1.PodDeletionCost, cost)
	}
	return p.Obj()
}

// scaledDown is what a scale-down scenario compares: the warning, the pods
// deleted with their first constraint's domain, and the order assumed.
type scaledDown struct {
	Warning  string
	Departed []string
	Order    string
}

func scaledDownOf(f *Forecast) scaledDown {
	o := scaledDown{Warning: f.Warning(), Order: f.Order}
	for _, d := range f.Departures {
		where := "not counted"
		if d.Node != "" {
			where = d.Domains[0]
		}
		o.Departed = append(o.Departed, d.Pod+" in "+where)
	}
	return o
}

func TestScaleDownForecast(t *testing.T) {
	zones := func() *world { return makeWorld().zones(1, "zone-a", "zone-b", "zone-c") }
	withPods := func(w *world, pods []*v1.Pod) *world {
		for _, p := range pods {
			w.pod(p)
		}
		return w
	}
	// Six pods, two in each zone: ordinals 0 and 1 in a, 2 and 3 in b, 4
	// and 5 in c.
	twoPerZone := dbPods(0, "zone-a-1", "zone-a-1", "zone-b-1", "zone-b-1", "zone-c-1", "zone-c-1")
	crowded := []*v1.Pod{
		webPod("web-1", "zone-a-1", ""), webPod("web-2", "zone-a-1", ""), webPod("web-3", "zone-a-1", ""),
		webPod("web-4", "zone-b-1", ""), webPod("web-5", "zone-b-1", ""), webPod("web-6", "zone-c-1", ""),
	}
	// The costs a keeper would write for the same pods: one pod of each
	// zone's fullest node at a time.
	costed := []*v1.Pod{
		webPod("web-1", "zone-a-1", "-3"), webPod("web-2", "zone-a-1", "-1"), webPod("web-3", "zone-a-1", "5"),
		webPod("web-4", "zone-b-1", "-2"), webPod("web-5", "zone-b-1", "4"), webPod("web-6", "zone-c-1", "6"),
	}
	tests := []struct {
		name     string
		world    *world
		workload any
		existing int32
		pods     []*v1.Pod
		cfg      engine.Config
		want     scaledDown
	}{
		{
			name:     "StatefulSet of 6 placed a,b,c,a,b,c scaled to 3 -> db-5, db-4, db-3 leave one per zone: 1/1/1, no warning",
			world:    withPods(zones(), dbPods(0, "zone-a-1", "zone-b-1", "zone-c-1", "zone-a-1", "zone-b-1", "zone-c-1")).policy(zonesPolicy().Obj()),
			workload: statefulSet(3, 0),
			existing: 6,
			want: scaledDown{Order: OrdinalOrder,
				Departed: []string{"db-5 in zone-c", "db-4 in zone-b", "db-3 in zone-a"}},
		},
		{
			name:     "StatefulSet of 6, 2 per zone with ordinals 4 and 5 in zone-c, scaled to 4 -> zone-c emptied, a=2 b=2 c=0, warned; 5 keeps it",
			world:    withPods(zones(), twoPerZone).policy(zonesPolicy().Obj()),
			workload: statefulSet(4, 0),
			existing: 6,
			want: scaledDown{Order: OrdinalOrder, Departed: []string{"db-5 in zone-c", "db-4 in zone-c"},
				Warning: "spreadguard: scaling StatefulSet shop/db from 6 to 4 deletes db-5 and db-4, leaving zone zone-c " +
					"with 0 matching pods and zone zone-a with 2: skew 2 above maxSkew 1 (scale to 5 instead); " +
					"zone: zone-a=2 zone-b=2 zone-c=0 (policy shop/zones)"},
		},
		{
			name:     "the same under messageDetail domains -> the zones still named: the constraint counts by zones",
			world:    withPods(zones(), twoPerZone).policy(zonesPolicy().Obj()),
			workload: statefulSet(4, 0),
			existing: 6,
			cfg:      engine.Config{MessageDetail: spread.DetailDomains},
			want: scaledDown{Order: OrdinalOrder, Departed: []string{"db-5 in zone-c", "db-4 in zone-c"},
				Warning: "spreadguard: scaling StatefulSet shop/db from 6 to 4 deletes db-5 and db-4, leaving zone zone-c " +
					"with 0 matching pods and zone zone-a with 2: skew 2 above maxSkew 1 (scale to 5 instead); " +
					"zone: zone-a=2 zone-b=2 zone-c=0 (policy shop/zones)"},
		},
		{
			name:     "per-host spread, 2 pods per node, both of zone-c-1 deleted, messageDetail nodes -> the nodes named, the emptiest listed first in 250 bytes",
			world:    withPods(zones(), twoPerZone).policy(hostsPolicy().Obj()),
			workload: statefulSet(4, 0),
			existing: 6,
			cfg:      engine.Config{MessageDetail: spread.DetailNodes},
			want: scaledDown{Order: OrdinalOrder, Departed: []string{"db-5 in zone-c-1", "db-4 in zone-c-1"},
				Warning: "spreadguard: scaling StatefulSet shop/db from 6 to 4 deletes db-5 and db-4, leaving node zone-c-1 " +
					"with 0 matching pods and node zone-a-1 with 2: skew 2 above maxSkew 1 (scale to 5 instead); " +
					"hostname: zone-c-1=0 +2 more (policy shop/hosts)"},
		},
		{
			name:     "the same under messageDetail domains -> no node named, the hostnames counted by what they hold",
			world:    withPods(zones(), twoPerZone).policy(hostsPolicy().Obj()),
			workload: statefulSet(4, 0),
			existing: 6,
			cfg:      engine.Config{MessageDetail: spread.DetailDomains},
			want: scaledDown{Order: OrdinalOrder, Departed: []string{"db-5 in zone-c-1", "db-4 in zone-c-1"},
				Warning: "spreadguard: scaling StatefulSet shop/db from 6 to 4 deletes db-5 and db-4, leaving a node " +
					"with 0 matching pods and a node with 2: skew 2 above maxSkew 1 (scale to 5 instead); " +
					"hostname: 2 nodes with 2, 1 node with 0 (policy shop/hosts)"},
		},
		{
			name:     "StatefulSet of 6, 2 per zone, scaled to 0 -> every pod goes, 0/0/0, no warning",
			world:    withPods(zones(), twoPerZone).policy(zonesPolicy().Obj()),
			workload: statefulSet(0, 0),
			existing: 6,
			want: scaledDown{Order: OrdinalOrder, Departed: []string{"db-5 in zone-c", "db-4 in zone-c", "db-3 in zone-b",
				"db-2 in zone-b", "db-1 in zone-a", "db-0 in zone-a"}},
		},
		{
			name:     "already a=3 b=1 c=1, skew 2, scaled from 5 to 4 deleting db-4 of zone-a -> skew 1: no warning",
			world:    withPods(zones(), dbPods(0, "zone-b-1", "zone-c-1", "zone-a-1", "zone-a-1", "zone-a-1")).policy(zonesPolicy().Obj()),
			workload: statefulSet(4, 0),
			existing: 5,
			want:     scaledDown{Order: OrdinalOrder, Departed: []string{"db-4 in zone-a"}},
		},
		{
			name:     "already a=3 b=1 c=1, skew 2, scaled from 5 to 4 deleting db-4 of zone-c -> skew 3, worse: warned, no smaller scale keeps it",
			world:    withPods(zones(), dbPods(0, "zone-a-1", "zone-a-1", "zone-a-1", "zone-b-1", "zone-c-1")).policy(zonesPolicy().Obj()),
			workload: statefulSet(4, 0),
			existing: 5,
			want: scaledDown{Order: OrdinalOrder, Departed: []string{"db-4 in zone-c"},
				Warning: "spreadguard: scaling StatefulSet shop/db from 5 to 4 deletes db-4, leaving zone zone-c " +
					"with 0 matching pods and zone zone-a with 3: skew 3 above maxSkew 1; zone: zone-a=3 zone-b=1 zone-c=0 (policy shop/zones)"},
		},
		{
			name:     "ordinals from 10, db-10 to db-15 two per zone, scaled to 4 -> db-15 and db-14 go, zone-c emptied",
			world:    withPods(zones(), dbPods(10, "zone-a-1", "zone-a-1", "zone-b-1", "zone-b-1", "zone-c-1", "zone-c-1")).policy(zonesPolicy().Obj()),
			workload: statefulSet(4, 10),
			existing: 6,
			want: scaledDown{Order: OrdinalOrder, Departed: []string{"db-15 in zone-c", "db-14 in zone-c"},
				Warning: "spreadguard: scaling StatefulSet shop/db from 6 to 4 deletes db-15 and db-14, leaving zone zone-c " +
					"with 0 matching pods and zone zone-a with 2: skew 2 above maxSkew 1 (scale to 5 instead); " +
					"zone: zone-a=2 zone-b=2 zone-c=0 (policy shop/zones)"},
		},
		{
			name:     "ordinals from 7, db-7 to db-12 two per zone, scaled to 2 -> db-12 to db-9 go across the tens, zones b and c emptied",
			world:    withPods(zones(), dbPods(7, "zone-a-1", "zone-a-1", "zone-b-1", "zone-b-1", "zone-c-1", "zone-c-1")).policy(zonesPolicy().Obj()),
			workload: statefulSet(2, 7),
			existing: 6,
			want: scaledDown{Order: OrdinalOrder, Departed: []string{"db-12 in zone-c", "db-11 in zone-c", "db-10 in zone-b", "db-9 in zone-b"},
				Warning: "spreadguard: scaling StatefulSet shop/db from 6 to 2 deletes db-12, db-11 and 2 more, leaving zone zone-b " +
					"with 0 matching pods and zone zone-a with 2: skew 2 above maxSkew 1 (scale to 5 instead); " +
					"zone: zone-a=2 zone-b=0 zone-c=0 (policy shop/zones)"},
		},
		{
			name:     "db-5 already gone, 5 pods a=2 b=2 c=1, scaled from 6 to 4 -> db-5 not counted, db-4 empties zone-c: warned",
			world:    withPods(zones(), twoPerZone[:5]).policy(zonesPolicy().Obj()),
			workload: statefulSet(4, 0),
			existing: 6,
			want: scaledDown{Order: OrdinalOrder, Departed: []string{"db-5 in not counted", "db-4 in zone-c"},
				Warning: "spreadguard: scaling StatefulSet shop/db from 6 to 4 deletes db-5 and db-4, leaving zone zone-c " +
					"with 0 matching pods and zone zone-a with 2: skew 2 above maxSkew 1 (scale to 5 instead); " +
					"zone: zone-a=2 zone-b=2 zone-c=0 (policy shop/zones)"},
		},
		{
			name:     "ReplicaSet of 6, a=3 b=2 c=1 on one node each, no deletion cost, scaled to 3 -> the controller takes zone-a's crowded node: 0/2/1, warned; 4 keeps it",
			world:    withPods(zones(), crowded).policy(zonesPolicy().Obj()),
			workload: replicaSet(3),
			existing: 6,
			pods:     crowded,
			want: scaledDown{Order: ControllerOrder + "; no pod carries a pod-deletion-cost",
				Departed: []string{"web-1 in zone-a", "web-2 in zone-a", "web-3 in zone-a"},
				Warning: "spreadguard: scaling ReplicaSet shop/web-abc from 6 to 3 deletes web-1 and 2 more, leaving zone zone-a " +
					"with 0 matching pods and zone zone-b with 2: skew 2 above maxSkew 1 (scale to 4 instead); " +
					"zone: zone-a=0 zone-b=2 zone-c=1 (policy shop/zones)"},
		},
		{
			name:     "the same pods with the costs a keeper writes -> the controller deletes by cost: web-1, web-4, web-2, 1/1/1, no warning",
			world:    withPods(zones(), costed).policy(zonesPolicy().Obj()),
			workload: replicaSet(3),
			existing: 6,
			pods:     costed,
			want: scaledDown{Order: ControllerOrder + "; 6 of 6 pods carry a pod-deletion-cost",
				Departed: []string{"web-1 in zone-a", "web-4 in zone-b", "web-2 in zone-a"}},
		},
		{
			name:     "the same ReplicaSet scaled down without its pods, as the webhook reads it -> nothing forecast",
			world:    withPods(zones(), crowded).policy(zonesPolicy().Obj()),
			workload: replicaSet(3),
			existing: 6,
			want:     scaledDown{},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w, err := Of(tt.workload, tt.existing)
			if err != nil {
				t.Fatal(err)
			}
			w.Pods = tt.pods
			src := tt.world.sources()
			if s, ok := tt.workload.(*appsv1.StatefulSet); ok {
				src.FakeSelectorSources = spreadtest.SelectorSources(s)
			}
			ix := spread.IndexFromSnapshot(tt.world.snap)
			f, err := Run(w, src, ix, tt.cfg)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, scaledDownOf(f)); diff != "" {
				t.Errorf("scale-down forecast (-want +got):\n%s", diff)
			}
			checkWarningOnly(t, f, w, src, ix, tt.cfg)
			if len(f.Placements) > 0 || f.Refused != nil {
				t.Errorf("a scale-down placed %d replicas and refused %+v, want none", len(f.Placements), f.Refused)
			}
		})
	}
}

func TestScaleDownWarningFitsIn250BytesWithThousandsOfPodsAndDomains(t *testing.T) {
	domains := map[string]int{}
	for i := range 3000 {
		domains[fmt.Sprintf("node-%04d", i)] = 2
	}
	domains["node-0042"] = 0
	f := &Forecast{Workload: "StatefulSet shop/a-statefulset-with-a-long-name", From: 6000, To: 3000, Policy: shop + "/hosts",
		Constraints: []Counts{{TopologyKey: v1.LabelHostname, MaxSkew: 1}},
		Skewed:      &Skew{After: 2, Fullest: "node-0000", Emptiest: "node-0042", Domains: domains, Within: 3001}}
	for i := range 3000 {
		f.Departures = append(f.Departures, Departure{Pod: fmt.Sprintf("a-statefulset-with-a-long-name-%d", 5999-i)})
	}
	got := f.Warning()
	if len(got) > MaxWarning {
		t.Errorf("warning is %d bytes, want at most %d: %s", len(got), MaxWarning, got)
	}
	for _, want := range []string{"from 6000 to 3000", "-5999 and 2999 more", "node node-0042 with 0"} {
		if !strings.Contains(got, want) {
			t.Errorf("warning %q lacks %q", got, want)
		}
	}
}
