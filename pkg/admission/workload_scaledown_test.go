package admission

import (
	"fmt"
	"net/http"
	"strconv"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus/testutil"
	admissionv1 "k8s.io/api/admission/v1"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/spreadguard/spreadguard/pkg/spread"
	"github.com/spreadguard/spreadguard/pkg/spread/spreadtest"
)

var (
	statefulsets = metav1.GroupVersionResource{Group: "apps", Version: "v1", Resource: "statefulsets"}
	replicasets  = metav1.GroupVersionResource{Group: "apps", Version: "v1", Resource: "replicasets"}
)

// dbStatefulSet is shop/db, app=db, with replicas.
func dbStatefulSet(replicas int32) *appsv1.StatefulSet {
	return &appsv1.StatefulSet{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "StatefulSet"},
		ObjectMeta: metav1.ObjectMeta{Namespace: shop, Name: "db", UID: "uid-db"},
		Spec: appsv1.StatefulSetSpec{
			Replicas: &replicas,
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "db"}},
			Template: v1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "db"}}},
		},
	}
}

// dbOn is db's pods, ordinal 0 upward, on the nodes given.
func dbOn(nodes ...string) []*v1.Pod {
	var pods []*v1.Pod
	for i, node := range nodes {
		name := fmt.Sprintf("db-%d", i)
		pods = append(pods, spreadtest.MakePod().Namespace(shop).Name(name).Label("app", "db").
			Label(appsv1.StatefulSetPodNameLabel, name).Label(appsv1.PodIndexLabel, strconv.Itoa(i)).
			ControlledBy("StatefulSet", "apps/v1", "db").Node(node).Phase(v1.PodRunning).Obj())
	}
	return pods
}

func TestWorkloadForecasterWarnsOfAStatefulSetsScaleDown(t *testing.T) {
	nodes := []*v1.Node{
		spreadtest.MakeNode().Name("a1").Zone("zone-a").Obj(),
		spreadtest.MakeNode().Name("b1").Zone("zone-b").Obj(),
		spreadtest.MakeNode().Name("c1").Zone("zone-c").Obj(),
	}
	// Ordinals 4 and 5 are zone-c's only pods.
	twoPerZone := spread.IndexFromSnapshot(spread.Snapshot{Nodes: nodes, Pods: dbOn("a1", "a1", "b1", "b1", "c1", "c1")})
	roundRobin := spread.IndexFromSnapshot(spread.Snapshot{Nodes: nodes, Pods: dbOn("a1", "b1", "c1", "a1", "b1", "c1")})
	// A ReplicaSet's six pods, zone-a's three the first its controller
	// would delete (the fullest node).
	var rsPods []*v1.Pod
	for i, node := range []string{"a1", "a1", "a1", "b1", "b1", "c1"} {
		rsPods = append(rsPods, spreadtest.MakePod().Namespace(shop).Name(fmt.Sprintf("web-7d-%d", i)).Label("app", "web").
			ControlledBy("ReplicaSet", "apps/v1", "web-7d").Node(node).Phase(v1.PodRunning).Obj())
	}
	crowded := spread.IndexFromSnapshot(spread.Snapshot{Nodes: nodes, Pods: rsPods})
	scale := func(name string, replicas int32) *autoscalingv1.Scale {
		return &autoscalingv1.Scale{ObjectMeta: metav1.ObjectMeta{Namespace: shop, Name: name}, Spec: autoscalingv1.ScaleSpec{Replicas: replicas}}
	}
	rs := spreadtest.MakeReplicaSet().Namespace(shop).Name("web-7d").MatchLabel("app", "web").Obj()
	rs.Spec.Replicas = new(int32(6))
	rs.Spec.Template.Labels = map[string]string{"app": "web"}
	reader := fake.NewClientBuilder().WithObjects(dbStatefulSet(6), rs).Build()
	warning := "spreadguard: scaling StatefulSet shop/db from 6 to 4 deletes db-5 and db-4, leaving zone zone-c with 0 matching pods " +
		"and zone zone-a with 2: skew 2 above maxSkew 1 (scale to 5 instead); zone: zone-a=2 zone-b=2 zone-c=0 (policy shop/zones)"

	tests := []struct {
		name         string
		cluster      *spread.Index
		req          admission.Request
		wantWarnings []string
		wantResult   string
	}{
		{
			name:    "kubectl scale sts db from 6 to 4, ordinals 4 and 5 zone-c's only pods -> allowed, warned naming zone-c and zone-a",
			cluster: twoPerZone,
			req: makeRequest().Operation(admissionv1.Update).Workload(statefulsets, "Scale", scale("db", 4)).
				Kind("autoscaling", "v1", "Scale").SubResource("scale").Name("db").OldObject(scale("db", 6)).Obj(),
			wantWarnings: []string{warning},
			wantResult:   ResultWarned,
		},
		{
			name:    "kubectl apply of db at 4 replicas, from 6, same template -> the same warning",
			cluster: twoPerZone,
			req: makeRequest().Operation(admissionv1.Update).Workload(statefulsets, "StatefulSet", dbStatefulSet(4)).
				Name("db").OldObject(dbStatefulSet(6)).Obj(),
			wantWarnings: []string{warning},
			wantResult:   ResultWarned,
		},
		{
			name:    "kubectl scale sts db from 6 to 3, its pods a,b,c,a,b,c -> one per zone left: allowed silently",
			cluster: roundRobin,
			req: makeRequest().Operation(admissionv1.Update).Workload(statefulsets, "Scale", scale("db", 3)).
				Kind("autoscaling", "v1", "Scale").SubResource("scale").Name("db").OldObject(scale("db", 6)).Obj(),
			wantResult: ResultAllowed,
		},
		{
			name:    "kubectl scale rs web-7d from 6 to 3, which the controller's ranking would skew -> allowed silently: the webhook reads no pod",
			cluster: crowded,
			req: makeRequest().Operation(admissionv1.Update).Workload(replicasets, "Scale", scale("web-7d", 3)).
				Kind("autoscaling", "v1", "Scale").SubResource("scale").Name("web-7d").OldObject(scale("web-7d", 6)).Obj(),
			wantResult: ResultAllowed,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := newTestMetrics(t)
			h := &WorkloadForecaster{Sources: staticSources(shopSources()), Config: testEngineConfig, Cluster: tt.cluster,
				Synced: func() bool { return true }, Workloads: reader, Metrics: m}
			resp := handle(t, h, tt.req, http.StatusOK)
			if len(resp.Patches) > 0 || resp.Patch != nil {
				t.Errorf("the workload was patched: %v", resp.Patches)
			}
			if diff := cmp.Diff(tt.wantWarnings, resp.Warnings); diff != "" {
				t.Errorf("warnings (-want +got):\n%s", diff)
			}
			if got := testutil.ToFloat64(m.Requests.WithLabelValues(WebhookForecastWorkload, tt.wantResult)); got != 1 {
				t.Errorf("requests{result=%q} = %v, want 1", tt.wantResult, got)
			}
		})
	}
}
