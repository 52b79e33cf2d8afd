package main

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/spreadguard/spreadguard/pkg/forecast"
)

// statefulSetCluster is 3 zones of one node each, namespace shop, whose
// policy spreads over key with maxSkew 1, and StatefulSet db of 6 pods, two
// per node: ordinals 4 and 5 on node-c.
func statefulSetCluster(key string) string {
	var b strings.Builder
	for _, z := range []string{"a", "b", "c"} {
		fmt.Fprintf(&b, "apiVersion: v1\nkind: Node\nmetadata:\n  name: node-%s\n  labels: {kubernetes.io/hostname: node-%s, topology.kubernetes.io/zone: zone-%s}\n---\n", z, z, z)
	}
	b.WriteString("apiVersion: v1\nkind: Namespace\nmetadata: {name: shop}\n---\n")
	fmt.Fprintf(&b, "apiVersion: spreadguard.io/v1alpha1\nkind: SpreadPolicy\nmetadata: {name: spread, namespace: shop}\n"+
		"spec:\n  constraints:\n  - {maxSkew: 1, topologyKey: %s, whenUnsatisfiable: DoNotSchedule}\n---\n", key)
	b.WriteString("apiVersion: apps/v1\nkind: StatefulSet\nmetadata: {name: db, namespace: shop, uid: uid-db}\n" +
		"spec:\n  replicas: 6\n  selector: {matchLabels: {app: db}}\n  template:\n    metadata: {labels: {app: db}}\n" +
		"    spec: {containers: [{name: db, image: db}]}\n")
	for i, node := range []string{"node-a", "node-a", "node-b", "node-b", "node-c", "node-c"} {
		fmt.Fprintf(&b, "---\napiVersion: v1\nkind: Pod\nmetadata:\n  name: db-%d\n  namespace: shop\n"+
			"  labels: {app: db, statefulset.kubernetes.io/pod-name: db-%d, apps.kubernetes.io/pod-index: \"%d\"}\n"+
			"  ownerReferences: [{apiVersion: apps/v1, kind: StatefulSet, name: db, uid: uid-db, controller: true}]\n"+
			"spec: {nodeName: %s, containers: [{name: db, image: db}]}\nstatus: {phase: Running}\n", i, i, i, node)
	}
	return b.String()
}

func TestPlanScaleDown(t *testing.T) {
	_, write := tempFiles(t)
	zones := write("zones.yaml", statefulSetCluster("topology.kubernetes.io/zone"))
	hosts := write("hosts.yaml", statefulSetCluster("kubernetes.io/hostname"))
	rsOrder := "Deleted in " + forecast.ControllerOrder + "; no pod carries a pod-deletion-cost:\n"
	stsOrder := "Deleted in " + forecast.OrdinalOrder + ":\n"

	tests := []struct {
		name string
		args []string
		want result
	}{
		{
			name: "ReplicaSet web-abc of 5, 3 in zone-a (2 on node-a1), 2 in zone-b, scaled to 2 -> node-a1's two then web-abc-3 go, zone-a emptied: warned, exit 1",
			args: []string{"plan", "replicaset/web-abc", "-n", "shop", "--replicas", "2", "--cluster", exampleCluster},
			want: result{code: exitDenied, stdout: "ReplicaSet shop/web-abc: scaled down from 5 to 2 replicas, policy shop/zone-spread (Deny)\n" +
				rsOrder + "  web-abc-1  zone zone-a\n  web-abc-2  zone zone-a\n  web-abc-3  zone zone-a\n" +
				"  after the scale-down  zone: zone-a=0 zone-b=2\n" +
				"spreadguard: scaling ReplicaSet shop/web-abc from 5 to 2 deletes web-abc-1 and 2 more, leaving zone zone-a with 0 matching pods " +
				"and zone zone-b with 2: skew 2 above maxSkew 1 (scale to 3 instead); zone: zone-a=0 zone-b=2 (policy shop/zone-spread)\n"},
		},
		{
			name: "the same ReplicaSet scaled to 3 -> node-a1's two go, a=1 b=2: exit 0",
			args: []string{"plan", "replicaset/web-abc", "-n", "shop", "--replicas", "3", "--cluster", exampleCluster},
			want: result{code: exitAllowed, stdout: "ReplicaSet shop/web-abc: scaled down from 5 to 3 replicas, policy shop/zone-spread (Deny)\n" +
				rsOrder + "  web-abc-1  zone zone-a\n  web-abc-2  zone zone-a\n" +
				"  after the scale-down  zone: zone-a=1 zone-b=2\nNo hard constraint is left skewed beyond its maxSkew.\n"},
		},
		{
			name: "StatefulSet db of 6, two per zone, scaled to 4 -> db-5 and db-4 go, zone-c emptied: warned, exit 1",
			args: []string{"plan", "statefulset/db", "-n", "shop", "--replicas", "4", "--cluster", zones},
			want: result{code: exitDenied, stdout: "StatefulSet shop/db: scaled down from 6 to 4 replicas, policy shop/spread (Deny)\n" +
				stsOrder + "  db-5  zone zone-c\n  db-4  zone zone-c\n" +
				"  after the scale-down  zone: zone-a=2 zone-b=2 zone-c=0\n" +
				"spreadguard: scaling StatefulSet shop/db from 6 to 4 deletes db-5 and db-4, leaving zone zone-c with 0 matching pods " +
				"and zone zone-a with 2: skew 2 above maxSkew 1 (scale to 5 instead); zone: zone-a=2 zone-b=2 zone-c=0 (policy shop/spread)\n"},
		},
		{
			name: "the same spread over hostnames under --message-detail domains -> no node named anywhere",
			args: []string{"plan", "sts/db", "-n", "shop", "--replicas", "4", "--cluster", hosts, "--message-detail", "domains"},
			want: result{code: exitDenied, stdout: "StatefulSet shop/db: scaled down from 6 to 4 replicas, policy shop/spread (Deny)\n" +
				stsOrder + "  db-5  counted on a node\n  db-4  counted on a node\n" +
				"  after the scale-down  hostname: 2 nodes with 2, 1 node with 0\n" +
				"spreadguard: scaling StatefulSet shop/db from 6 to 4 deletes db-5 and db-4, leaving a node with 0 matching pods " +
				"and a node with 2: skew 2 above maxSkew 1 (scale to 5 instead); hostname: 2 nodes with 2, 1 node with 0 (policy shop/spread)\n"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, runCommand(t, tt.args...), cmp.AllowUnexported(result{})); diff != "" {
				t.Errorf("run() (-want +got):\n%s", diff)
			}
		})
	}
}

func TestPlanScaleDownJSONCarriesTheOrderTheDeparturesAndTheSkew(t *testing.T) {
	r := runCommand(t, "plan", "replicaset/web-abc", "-n", "shop", "--replicas", "2", "--cluster", exampleCluster, "-o", "json")
	if r.code != exitDenied {
		t.Fatalf("exit %d (stderr %q), want %d", r.code, r.stderr, exitDenied)
	}
	var got struct {
		Order      string               `json:"order"`
		Departures []forecast.Departure `json:"departures"`
		Skewed     *forecast.Skew       `json:"skewed"`
		Warning    string               `json:"warning"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &got); err != nil {
		t.Fatalf("decoding %s: %v", r.stdout, err)
	}
	want := []forecast.Departure{
		{Pod: "web-abc-1", Node: "node-a1", Domains: []string{"zone-a"}},
		{Pod: "web-abc-2", Node: "node-a1", Domains: []string{"zone-a"}},
		{Pod: "web-abc-3", Node: "node-a2", Domains: []string{"zone-a"}},
	}
	if diff := cmp.Diff(want, got.Departures); diff != "" {
		t.Errorf("departures (-want +got):\n%s", diff)
	}
	wantSkew := &forecast.Skew{Before: 1, After: 2, Fullest: "zone-b", Emptiest: "zone-a", Domains: map[string]int{"zone-a": 0, "zone-b": 2}, Within: 3}
	if diff := cmp.Diff(wantSkew, got.Skewed); diff != "" {
		t.Errorf("skewed (-want +got):\n%s", diff)
	}
	if !strings.HasPrefix(got.Order, "the ReplicaSet controller's order") || !strings.HasPrefix(got.Warning, "spreadguard: scaling ReplicaSet shop/web-abc") {
		t.Errorf("order %q, warning %q: want the controller's order and the warning", got.Order, got.Warning)
	}
}

// keeperCluster is 3 zones, zone-c of two nodes, namespace shop, and
// ReplicaSet web of 7 pods that carry a zone constraint (maxSkew 1): three
// on node-a, two on node-b, one on each node of zone-c. The constraint is
// the template's own, so no policy applies.
func keeperCluster() string {
	var b strings.Builder
	for _, n := range [][2]string{{"node-a", "zone-a"}, {"node-b", "zone-b"}, {"node-c1", "zone-c"}, {"node-c2", "zone-c"}} {
		fmt.Fprintf(&b, "apiVersion: v1\nkind: Node\nmetadata:\n  name: %s\n  labels: {kubernetes.io/hostname: %s, topology.kubernetes.io/zone: %s}\n---\n", n[0], n[0], n[1])
	}
	b.WriteString("apiVersion: v1\nkind: Namespace\nmetadata: {name: shop}\n---\n")
	constraint := "[{maxSkew: 1, topologyKey: topology.kubernetes.io/zone, whenUnsatisfiable: DoNotSchedule, labelSelector: {matchLabels: {app: web}}}]"
	b.WriteString("apiVersion: apps/v1\nkind: ReplicaSet\nmetadata: {name: web, namespace: shop, uid: uid-web}\n" +
		"spec:\n  replicas: 7\n  selector: {matchLabels: {app: web}}\n  template:\n    metadata: {labels: {app: web}}\n" +
		"    spec: {containers: [{name: web, image: web}], topologySpreadConstraints: " + constraint + "}\n")
	for i, node := range []string{"node-c1", "node-c2", "node-b", "node-b", "node-a", "node-a", "node-a"} {
		fmt.Fprintf(&b, "---\napiVersion: v1\nkind: Pod\nmetadata:\n  name: web-%d\n  namespace: shop\n  uid: uid-web-%d\n"+
			"  labels: {app: web}\n"+
			"  ownerReferences: [{apiVersion: apps/v1, kind: ReplicaSet, name: web, uid: uid-web, controller: true}]\n"+
			"spec:\n  nodeName: %s\n  containers: [{name: web, image: web}]\n"+
			"  topologySpreadConstraints: %s\nstatus: {phase: Running}\n", i, i, node, constraint)
	}
	return b.String()
}

func TestPlanScaleDownInTheKeepersOrder(t *testing.T) {
	_, write := tempFiles(t)
	cluster := write("cluster.yaml", keeperCluster())
	scale := []string{"plan", "replicaset/web", "-n", "shop", "--replicas", "4", "--cluster", cluster}
	tests := []struct {
		name string
		args []string
		want result
	}{
		{
			name: "ReplicaSet web of 7, 3/2/2 with zone-a's three on one node, scaled to 4 without the keeper -> node-a's three go, zone-a emptied: warned, exit 1",
			args: scale,
			want: result{code: exitDenied, stdout: "ReplicaSet shop/web: scaled down from 7 to 4 replicas\n" +
				"Deleted in " + forecast.ControllerOrder + "; no pod carries a pod-deletion-cost:\n" +
				"  web-4  zone zone-a\n  web-5  zone zone-a\n  web-6  zone zone-a\n" +
				"  after the scale-down  zone: zone-a=0 zone-b=2 zone-c=2\n" +
				"spreadguard: scaling ReplicaSet shop/web from 7 to 4 deletes web-4, web-5 and web-6, leaving zone zone-a with 0 matching pods " +
				"and zone zone-b with 2: skew 2 above maxSkew 1 (scale to 5 instead); zone: zone-a=0 zone-b=2 zone-c=2\n"},
		},
		{
			name: "the same with --keeper -> from the fullest zone each time, two of zone-a then one of zone-b, 1/1/2: exit 0",
			args: append(slices.Clone(scale), "--keeper"),
			want: result{code: exitAllowed, stdout: "ReplicaSet shop/web: scaled down from 7 to 4 replicas\n" +
				"Deleted in " + forecast.KeeperOrder + ":\n" +
				"  web-6  zone zone-a\n  web-5  zone zone-a\n  web-3  zone zone-b\n" +
				"  after the scale-down  zone: zone-a=1 zone-b=1 zone-c=2\nNo hard constraint is left skewed beyond its maxSkew.\n"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, runCommand(t, tt.args...), cmp.AllowUnexported(result{})); diff != "" {
				t.Errorf("run() (-want +got):\n%s", diff)
			}
		})
	}
}
