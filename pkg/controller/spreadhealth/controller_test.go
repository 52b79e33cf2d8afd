package spreadhealth

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/spreadguard/spreadguard/pkg/apis/spreadguard/v1alpha1"
	"github.com/spreadguard/spreadguard/pkg/cache"
	"github.com/spreadguard/spreadguard/pkg/engine"
	"github.com/spreadguard/spreadguard/pkg/health"
	"github.com/spreadguard/spreadguard/pkg/lookup"
	pt "github.com/spreadguard/spreadguard/pkg/policy/policytest"
	"github.com/spreadguard/spreadguard/pkg/spread"
	st "github.com/spreadguard/spreadguard/pkg/spread/spreadtest"
	"github.com/spreadguard/spreadguard/pkg/state"
)

func TestMayChangeThePass(t *testing.T) {
	pod := st.MakePod().Namespace("shop").Name("web-1").Label("app", "web").Node("a1")
	running := pod.Obj()
	running.Status.Phase = v1.PodRunning
	ready := running.DeepCopy()
	ready.ResourceVersion = "2"
	ready.Status.Conditions = []v1.PodCondition{{Type: v1.PodReady, Status: v1.ConditionTrue}}
	moved := running.DeepCopy()
	moved.Spec.NodeName = "b1"

	node := st.MakeNode().Name("a1").Zone("zone-a").Obj()
	heartbeat := node.DeepCopy()
	heartbeat.ResourceVersion = "2"
	heartbeat.Status.Conditions = []v1.NodeCondition{{Type: v1.NodeReady, Status: v1.ConditionTrue}}
	cordoned := st.MakeNode().Name("a1").Zone("zone-a").Cordoned().Obj()

	policy := &v1alpha1.SpreadPolicy{ObjectMeta: metav1.ObjectMeta{Name: "zones", Generation: 1}}
	audited := policy.DeepCopy()
	audited.Status.Workloads = 3
	edited := policy.DeepCopy()
	edited.Generation = 2

	// ReplicaSets as the cache keeps them (cache.StripReplicaSet).
	strip := func(rs *appsv1.ReplicaSet) any {
		out, err := cache.StripReplicaSet(rs)
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	replicas := int32(3)
	rs := st.MakeReplicaSet().Namespace("shop").Name("web-h1").MatchLabel("app", "web").Obj()
	rs.Spec.Replicas = &replicas
	rs.Spec.Template.Labels = map[string]string{"app": "web"}
	rs.ResourceVersion = "1"
	readyPod := rs.DeepCopy()
	readyPod.ResourceVersion = "2"
	readyPod.Status.Replicas, readyPod.Status.ReadyReplicas = 3, 2
	retemplated := rs.DeepCopy()
	retemplated.ResourceVersion = "3"
	retemplated.Spec.Template.Spec.NodeSelector = map[string]string{"disk": "ssd"}

	svc := st.MakeService().Namespace("shop").Name("web").Selector("app", "web").Obj()
	reselected := st.MakeService().Namespace("shop").Name("web").Selector("app", "api").Obj()
	ns := pt.MakeNamespace("shop").Obj()
	relabelled := pt.MakeNamespace("shop").Label("team", "b").Obj()

	tests := []struct {
		name     string
		old, obj any
		want     bool
	}{
		{"a pod turning ready changes nothing counted", cache.CompactPod(running), cache.CompactPod(ready), false},
		{"a pod on another node may change the counts", cache.CompactPod(running), cache.CompactPod(moved), true},
		{"a node's heartbeat changes no domain", node, heartbeat, false},
		{"a cordoned node may leave the counting", node, cordoned, true},
		{"the controller's own status write changes no spec", policy, audited, false},
		{"an edited policy may change everything", policy, edited, true},
		{"a ReplicaSet's status update as a pod turns ready changes nothing read", strip(rs), strip(readyPod), false},
		{"a ReplicaSet's new template may change what its pods carry", strip(rs), strip(retemplated), true},
		{"a Service selecting other pods may change its workload", svc, reselected, true},
		{"a Service's update that keeps its selector changes nothing", svc, svc.DeepCopy(), false},
		{"a relabelled namespace may enter a ClusterSpreadPolicy's scope", ns, relabelled, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// The update as the cluster state tells it.
			c := state.NewCluster(spread.NewIndex(), cache.NewServiceIndex())
			var got []bool
			c.Subscribe(state.SubscriberFunc(func(ch state.Change) { got = append(got, mayChangeThePass(ch)) }))
			c.Update(tt.old, tt.obj)
			if diff := cmp.Diff([]bool{tt.want}, got); diff != "" {
				t.Errorf("mayChangeThePass() of the change told (-want +got):\n%s", diff)
			}
		})
	}
}

// testCluster is a cluster for a pass: three zones of one node each, a
// SpreadPolicy spreading over zones in each namespace, and one ReplicaSet
// per namespace, named web, whose template declares no constraint and
// whose pods carry the zone constraint the webhook injected.
type testCluster struct {
	objects []runtime.Object
	pods    []*v1.Pod
}

func newTestCluster(namespaces ...string) *testCluster {
	c := &testCluster{}
	for _, z := range []string{"a", "b", "c"} {
		c.objects = append(c.objects, st.MakeNode().Name(z+"1").Zone(z).Obj())
	}
	for _, ns := range namespaces {
		c.objects = append(c.objects,
			pt.MakeNamespace(ns).Obj(),
			pt.MakeSpreadPolicy().Namespace(ns).Name("zones").Constraint(pt.MakeConstraint().Zone().MaxSkew(1).DoNotSchedule().Obj()).Obj(),
			st.MakeReplicaSet().Namespace(ns).Name("web").MatchLabel("app", "web").Obj())
		for _, z := range []string{"a", "b", "c"} {
			c.pod(ns, "web-"+z, z+"1")
		}
	}
	return c
}

// pod adds a pod of ns's web, on node.
func (c *testCluster) pod(ns, name, node string) *testCluster {
	c.pods = append(c.pods, st.MakePod().Namespace(ns).Name(name).Label("app", "web").Node(node).
		SpreadConstraint(st.Constraint(1, v1.LabelTopologyZone).MatchLabel("app", "web").Obj()).Obj())
	return c
}

// terminating marks namespace ns as being deleted.
func (c *testCluster) terminating(ns string) *testCluster {
	for _, o := range c.objects {
		if n, ok := o.(*v1.Namespace); ok && n.Name == ns {
			n.DeletionTimestamp = &st.DeletionTime
		}
	}
	return c
}

// controller returns a controller over c, writing to a recorder, with or
// without the Report kind served.
func (c *testCluster) controller(t *testing.T, reports bool) (*Controller, *recorder, *spread.Index) {
	t.Helper()
	store, err := lookup.NewStore(append(c.objects, podObjects(c.pods)...)...)
	if err != nil {
		t.Fatal(err)
	}
	ix := spread.IndexFromSnapshot(store.Snapshot())
	rec := newRecorder(store)
	ctrl, err := newTestController(store, ix, rec, prometheus.NewRegistry(), reports)
	if err != nil {
		t.Fatal(err)
	}
	return ctrl, rec, ix
}

func podObjects(pods []*v1.Pod) []runtime.Object {
	out := make([]runtime.Object, len(pods))
	for i, p := range pods {
		out[i] = p
	}
	return out
}

// newTestController is a controller whose reads go to store and ix, and
// whose writes go to rec.
func newTestController(store *lookup.Store, ix *spread.Index, rec *recorder, reg prometheus.Registerer, reports bool) (*Controller, error) {
	mapper := meta.NewDefaultRESTMapper(nil)
	if reports {
		mapper.Add(reportGVK, meta.RESTScopeNamespace)
	}
	c, err := New(Config{Client: rec, Mapper: mapper, Index: ix, State: state.NewCluster(ix, nil), Sources: lookup.NewSources(store),
		Engine: engine.Config{MessageDetail: spread.DetailDomains}, Registry: reg, Log: logr.Discard()})
	if err != nil {
		return nil, err
	}
	c.reader = store
	return c, nil
}

func TestPassWritesOnlyWhatChanged(t *testing.T) {
	c, rec, ix := newTestCluster("shop", "bank").controller(t, true)
	steps := []struct {
		name   string
		change func()
		want   []string
	}{
		{
			name: "the first pass lists the Reports once, patches each policy's status and creates each namespace's Report",
			want: []string{"PATCH shop/zones", "PATCH bank/zones", "LIST reports", "CREATE bank/spreadguard", "CREATE shop/spreadguard"},
		},
		{
			name: "a pass that finds what the last one found sends nothing",
		},
		{
			name: "two more pods of shop's web in zone a skew it: one status patch and one Report replaced, no read",
			change: func() {
				for _, name := range []string{"web-a2", "web-a3"} {
					ix.AddPod(st.MakePod().Namespace("shop").Name(name).Label("app", "web").Node("a1").
						SpreadConstraint(st.Constraint(1, v1.LabelTopologyZone).MatchLabel("app", "web").Obj()).Obj())
				}
			},
			want: []string{"PATCH shop/zones", "UPDATE shop/spreadguard"},
		},
		{
			name: "and the pass after it sends nothing again",
		},
	}
	for _, step := range steps {
		t.Run(step.name, func(t *testing.T) {
			if step.change != nil {
				step.change()
			}
			if err := c.run(t.Context(), &Pass{}); err != nil {
				t.Fatalf("run() = %v", err)
			}
			if diff := cmp.Diff(step.want, rec.take()); diff != "" {
				t.Errorf("requests (-want +got):\n%s", diff)
			}
		})
	}
}

func TestOneNamespaceWhoseReportCannotBeWrittenStopsNoOther(t *testing.T) {
	quota := apierrors.NewForbidden(schema.GroupResource{Group: "openreports.io", Resource: "reports"}, "spreadguard",
		errors.New("exceeded quota: reports, requested: count/reports.openreports.io=1, used: 5, limited: 5"))
	terminating := apierrors.NewForbidden(schema.GroupResource{Group: "openreports.io", Resource: "reports"}, "spreadguard",
		errors.New("unable to create new content in namespace gone because it is being terminated"))
	terminating.ErrStatus.Details.Causes = []metav1.StatusCause{{Type: v1.NamespaceTerminatingCause, Field: "metadata.namespace"}}
	cluster := newTestCluster("a-full", "b-shop", "c-closing", "d-gone", "e-bank").terminating("c-closing")
	c, rec, _ := cluster.controller(t, true)
	rec.refuse = func(verb string, key client.ObjectKey) error {
		if verb == "PATCH" {
			return nil
		}
		switch key.Namespace {
		case "a-full":
			return quota
		case "d-gone":
			// Deleted after the cache last saw it.
			return terminating
		}
		return nil
	}
	err := c.run(t.Context(), &Pass{})
	if err == nil || !strings.Contains(err.Error(), "a-full/spreadguard") || !strings.Contains(err.Error(), "exceeded quota") {
		t.Errorf("run() = %v, want the refused Report of a-full named", err)
	}
	if strings.Contains(err.Error(), "d-gone") {
		t.Errorf("run() = %v, want the namespace being deleted passed over", err)
	}
	var reports []string
	for _, r := range rec.take() {
		if !strings.HasPrefix(r, "PATCH") {
			reports = append(reports, r)
		}
	}
	// c-closing is being deleted in the cache: nothing is sent for it.
	want := []string{"LIST reports", "CREATE a-full/spreadguard", "CREATE b-shop/spreadguard", "CREATE d-gone/spreadguard", "CREATE e-bank/spreadguard"}
	if diff := cmp.Diff(want, reports); diff != "" {
		t.Errorf("Report requests (-want +got):\n%s", diff)
	}
	if got := testutil.ToFloat64(c.metrics.errors.WithLabelValues(objectReport)); got != 1 {
		t.Errorf("spreadguard_health_errors_total{object=report} = %v, want 1", got)
	}
}

func TestAStatusPatchThatFailsStopsNoOther(t *testing.T) {
	tests := []struct {
		name      string
		refuse    error
		wantErr   string
		wantCount float64
	}{
		{
			name:   "the policy of bank was deleted since the cache listed it: passed over, not a failed pass",
			refuse: apierrors.NewNotFound(v1alpha1.GroupVersion.WithResource("spreadpolicies").GroupResource(), "zones"),
		},
		{
			name:      "bank's status is refused: shop's is written, and the error returned",
			refuse:    apierrors.NewForbidden(v1alpha1.GroupVersion.WithResource("spreadpolicies").GroupResource(), "zones", errors.New("denied by a ValidatingAdmissionPolicy")),
			wantErr:   "denied by a ValidatingAdmissionPolicy",
			wantCount: 1,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, rec, _ := newTestCluster("bank", "shop").controller(t, true)
			rec.refuse = func(verb string, key client.ObjectKey) error {
				if verb == "PATCH" && key.Namespace == "bank" {
					return tt.refuse
				}
				return nil
			}
			p := &Pass{}
			err := c.run(t.Context(), p)
			if (err == nil) != (tt.wantErr == "") || err != nil && !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("run() = %v, want an error containing %q", err, tt.wantErr)
			}
			if diff := cmp.Diff([]string{"shop/zones"}, p.Writes); diff != "" {
				t.Errorf("statuses written (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff([]string{"bank/spreadguard", "shop/spreadguard"}, p.Reports); diff != "" {
				t.Errorf("Reports written (-want +got):\n%s", diff)
			}
			if got := testutil.ToFloat64(c.metrics.errors.WithLabelValues(objectStatus)); got != tt.wantCount {
				t.Errorf("spreadguard_health_errors_total{object=status} = %v, want %v", got, tt.wantCount)
			}
		})
	}
}

func TestAWorkloadThatCannotBeCheckedIsCountedAndReported(t *testing.T) {
	cluster := newTestCluster("shop")
	old := st.MakeReplicaSet().Namespace("shop").Name("old").Obj()
	old.Spec.Selector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
		{Key: "app", Operator: metav1.LabelSelectorOpIn, Values: []string{"old", "front end"}}}}
	old.Spec.Template.Labels = map[string]string{"app": "old"}
	cluster.objects = append(cluster.objects, old)
	c, rec, _ := cluster.controller(t, true)
	for pass := 1; pass <= 2; pass++ {
		if err := c.run(t.Context(), &Pass{}); err != nil {
			t.Fatalf("pass %d: run() = %v", pass, err)
		}
	}
	rep, ok := rec.report(client.ObjectKey{Namespace: "shop", Name: health.ReportName})
	if !ok {
		t.Fatal("no Report in shop")
	}
	if diff := cmp.Diff(health.ReportSummary{Pass: 1, Error: 1}, rep.Summary); diff != "" {
		t.Errorf("Report summary (-want +got):\n%s", diff)
	}
	if msg := rep.Results[0].Message; rep.Results[0].Result != health.ResultError || !strings.Contains(msg, `Invalid value: "front end"`) {
		t.Errorf("first result %s: %q, want an error naming the value", rep.Results[0].Result, msg)
	}
	if got := testutil.ToFloat64(c.metrics.errors.WithLabelValues(objectWorkload)); got != 2 {
		t.Errorf("spreadguard_health_errors_total{object=workload} = %v after two passes, want 2", got)
	}
}

func TestAReportDeletedOrRewrittenBySomeoneElseIsWrittenAgainWithoutAList(t *testing.T) {
	c, rec, _ := newTestCluster("shop", "bank").controller(t, true)
	// The watch lives as long as the leadership: the test's, not a step's.
	ctx := t.Context()
	shop := client.ObjectKey{Namespace: "shop", Name: health.ReportName}
	bank := client.ObjectKey{Namespace: "bank", Name: health.ReportName}
	steps := []struct {
		name   string
		change func()
		// asked says whether the change must ask for a pass.
		asked bool
		want  []string
	}{
		{
			name: "the first pass lists the Reports once and creates each namespace's",
			want: []string{"PATCH shop/zones", "PATCH bank/zones", "LIST reports", "CREATE bank/spreadguard", "CREATE shop/spreadguard"},
		},
		{
			name: "a pass that finds what the last one found sends nothing",
		},
		{
			name:   "shop's Report deleted by someone else asks for a pass, which creates it again and lists nothing",
			change: func() { rec.deletedBySomeoneElse(shop) },
			asked:  true,
			want:   []string{"CREATE shop/spreadguard"},
		},
		{
			name:   "bank's Report emptied by another writer asks for a pass, which replaces it in one request",
			change: func() { rec.rewrittenBySomeoneElse(bank) },
			asked:  true,
			want:   []string{"UPDATE bank/spreadguard"},
		},
		{
			name: "and the passes after them send nothing: the steady state lists nothing",
		},
	}
	for _, step := range steps {
		t.Run(step.name, func(t *testing.T) {
			// Passes asked for by the controller's own writes are drained:
			// they change nothing.
			select {
			case <-c.trigger:
			default:
			}
			if step.change != nil {
				step.change()
			}
			if step.asked {
				select {
				case <-c.trigger:
				case <-time.After(10 * time.Second):
					t.Errorf("no pass was asked for within 10s")
				}
			}
			if err := c.run(ctx, &Pass{}); err != nil {
				t.Fatalf("run() = %v", err)
			}
			if diff := cmp.Diff(step.want, rec.take()); diff != "" {
				t.Errorf("requests (-want +got):\n%s", diff)
			}
			for _, key := range []client.ObjectKey{shop, bank} {
				rep, ok := rec.report(key)
				if !ok {
					t.Errorf("no Report %s on the server", key)
					continue
				}
				if diff := cmp.Diff(health.ReportSummary{Pass: 1}, rep.Summary); diff != "" || len(rep.Results) != 1 {
					t.Errorf("Report %s: %d results, summary (-want +got):\n%s", key, len(rep.Results), diff)
				}
			}
		})
	}
	if rec.watched != 1 {
		t.Errorf("%d watches opened, want 1", rec.watched)
	}
}
