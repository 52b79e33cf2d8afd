package templates

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"
	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/cache/informertest"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllertest"

	karpenterv1 "github.com/spreadguard/spreadguard/pkg/apis/karpenter/v1"
	nodeclassv1 "github.com/spreadguard/spreadguard/pkg/apis/nodeclass/v1"
	"github.com/spreadguard/spreadguard/pkg/apis/spreadguard/v1alpha1"
	"github.com/spreadguard/spreadguard/pkg/autoscale"
	"github.com/spreadguard/spreadguard/pkg/cache"
	"github.com/spreadguard/spreadguard/pkg/lookup"
	"github.com/spreadguard/spreadguard/pkg/spread"
	st "github.com/spreadguard/spreadguard/pkg/spread/spreadtest"
	"github.com/spreadguard/spreadguard/pkg/state"
)

// loads counts the derivations of a Watcher and hands out a template
// named after each.
type loads struct {
	mu  sync.Mutex
	n   int
	got chan []spread.Template
}

func (l *loads) load(context.Context) (lookup.Derived, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.n++
	return lookup.Derived{Derived: autoscale.Derived{Templates: []spread.Template{{Name: "load-" + string(rune('0'+l.n))}}}}, nil
}

func (l *loads) set(d autoscale.Derived) { l.got <- d.Templates }

// newWatcher returns a watcher subscribed to a cluster state of its own,
// fed by the test, whose derivations l counts, every millisecond at most.
func newWatcher(l *loads, onLoaded func()) (*Watcher, *state.Cluster) {
	c := state.NewCluster(spread.NewIndex(), nil)
	w := New(&informertest.FakeInformers{}, c, lookup.TemplateOptions{}, l.set, onLoaded)
	w.load, w.interval = l.load, time.Millisecond
	return w, c
}

func TestWatcherDerivesOnceSyncedThenOnChangesOnly(t *testing.T) {
	l := &loads{got: make(chan []spread.Template, 10)}
	loaded := make(chan struct{})
	w, h := newWatcher(l, func() { close(loaded) })
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	done := make(chan error)
	go func() { done <- w.Start(ctx) }()

	next := func(why string) []spread.Template {
		t.Helper()
		select {
		case ts := <-l.got:
			return ts
		case <-time.After(5 * time.Second):
			t.Fatalf("%s: no templates derived", why)
			return nil
		}
	}
	if diff := cmp.Diff([]spread.Template{{Name: "load-1"}}, next("at start")); diff != "" {
		t.Errorf("templates at start (-want +got):\n%s", diff)
	}
	if !w.Loaded() {
		t.Error("Loaded() = false after the first derivation")
	}
	select {
	case <-loaded:
	case <-time.After(5 * time.Second):
		t.Error("onLoaded did not run after the first derivation")
	}

	node := st.MakeNode().Name("a1").Zone("a").Obj()
	heartbeat := node.DeepCopy()
	heartbeat.Status.Conditions = []v1.NodeCondition{{Type: v1.NodeReady, Status: v1.ConditionTrue}}
	h.Update(node, heartbeat)
	select {
	case ts := <-l.got:
		t.Fatalf("a node status heartbeat derived the templates again: %v", ts)
	case <-time.After(50 * time.Millisecond):
	}

	relabelled := st.MakeNode().Name("a1").Zone("b").Obj()
	h.Update(node, relabelled)
	next("after a node moved zone")
	cordoned := relabelled.DeepCopy()
	cordoned.Spec.Unschedulable = true
	h.Update(relabelled, cordoned)
	next("after a node was cordoned")
	h.Add(&v1.Node{})
	next("after a node was added")

	class := &nodeclassv1.EC2NodeClass{Status: nodeclassv1.NodeClassStatus{Subnets: []nodeclassv1.Subnet{{Zone: "a"}}}}
	amiRolled := class.DeepCopy()
	amiRolled.ResourceVersion = "2"
	h.Update(class, amiRolled)
	select {
	case ts := <-l.got:
		t.Fatalf("an EC2NodeClass update that kept its zones derived the templates again: %v", ts)
	case <-time.After(50 * time.Millisecond):
	}
	subnetAdded := amiRolled.DeepCopy()
	subnetAdded.Status.Subnets = append(subnetAdded.Status.Subnets, nodeclassv1.Subnet{Zone: "c"})
	h.Update(amiRolled, subnetAdded)
	next("after an EC2NodeClass got a subnet in another zone")
	zoneIDSaid := subnetAdded.DeepCopy()
	zoneIDSaid.Status.Subnets[0].ZoneID = "usw2-az1"
	h.Update(subnetAdded, zoneIDSaid)
	next("after an EC2NodeClass's status said the zone ID of a subnet")

	status := caStatus("04:28:19", 3, 6)
	h.Update(status, caStatus("04:28:29", 3, 6))
	select {
	case ts := <-l.got:
		t.Fatalf("cluster-autoscaler's status rewritten with a new time only derived the templates again: %v", ts)
	case <-time.After(50 * time.Millisecond):
	}
	h.Update(status, caStatus("04:28:39", 6, 6))
	next("after cluster-autoscaler's status said a node group reached its maximum")

	cancel()
	if err := <-done; err != nil {
		t.Errorf("Start() = %v", err)
	}
}

func TestWatcherHearsOfTheKindsTheTemplatesAreDerivedFrom(t *testing.T) {
	scheme, err := cache.NewScheme()
	if err != nil {
		t.Fatal(err)
	}
	informers := &informertest.FakeInformers{Scheme: scheme}
	l := &loads{got: make(chan []spread.Template, 10)}
	w, c := newWatcher(l, nil)
	watched := append(cache.Watched(func(cache.InformedKind) bool { return true }), &v1.ConfigMap{})
	fake := map[string]*controllertest.FakeInformer{}
	for _, obj := range watched {
		inf, err := informers.FakeInformerFor(t.Context(), obj)
		if err != nil {
			t.Fatal(err)
		}
		fake[fmt.Sprintf("%T", obj)] = inf
	}
	if _, err := c.Inform(t.Context(), informers, watched, nil); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name      string
		add       func()
		wantStale bool
	}{
		{"a node added -> stale", func() { fake["*v1.Node"].Add(st.MakeNode().Name("a1").Zone("a").Obj()) }, true},
		{"a NodeTemplate added -> stale", func() { fake["*v1alpha1.NodeTemplate"].Add(&v1alpha1.NodeTemplate{}) }, true},
		{"a NodePool added -> stale", func() { fake["*v1.NodePool"].Add(&karpenterv1.NodePool{}) }, true},
		{"a ClusterSpreadPolicy added -> stale: its topology keys are the templates'", func() {
			fake["*v1alpha1.ClusterSpreadPolicy"].Add(&v1alpha1.ClusterSpreadPolicy{})
		}, true},
		{"cluster-autoscaler's status ConfigMap added -> stale", func() { fake["*v1.ConfigMap"].Add(caStatus("04:28:19", 3, 6)) }, true},
		{"a pod added -> not stale", func() { fake["*v1.Pod"].Add(st.MakePod().Name("p").Obj()) }, false},
		{"a Service added -> not stale", func() { fake["*v1.Service"].Add(&v1.Service{}) }, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.add()
			stale := false
			select {
			case <-w.stale:
				stale = true
			default:
			}
			if stale != tt.wantStale {
				t.Errorf("templates stale = %v, want %v", stale, tt.wantStale)
			}
		})
	}
}

// caStatus is cluster-autoscaler's status ConfigMap written at the time of
// day at, with node group web at target size of max.
func caStatus(at string, target, max int) *v1.ConfigMap {
	return &v1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "cluster-autoscaler-status"},
		Data: map[string]string{"status": fmt.Sprintf("time: \"2026-11-24 %s +0000 UTC\"\nautoscalerStatus: Running\nnodeGroups:\n"+
			"- name: web\n  health: {status: Healthy, cloudProviderTarget: %d, minSize: 1, maxSize: %d, lastProbeTime: \"2026-11-24T%sZ\"}\n",
			at, target, max, at)},
	}
}

func TestWatcherLogsAStatusItCannotReadOnce(t *testing.T) {
	var logged []string
	log := funcr.New(func(prefix, args string) { logged = append(logged, args) }, funcr.Options{})
	w := &Watcher{}
	legacy := fmt.Errorf("ConfigMap kube-system/cluster-autoscaler-status not read: %w", autoscale.ErrLegacyClusterAutoscalerStatus)
	broken := errors.New("ConfigMap kube-system/cluster-autoscaler-status not read: it has no key status")
	for _, err := range []error{nil, legacy, legacy, legacy, broken, broken, nil, nil} {
		w.logStatus(log, err)
	}
	want := []string{"plain-text format", "no key status", "read again"}
	if len(logged) != len(want) {
		t.Fatalf("logged %d lines, want %d (one per change): %q", len(logged), len(want), logged)
	}
	for i, line := range logged {
		if !strings.Contains(line, want[i]) {
			t.Errorf("log line %d = %q, want it to say %q", i, line, want[i])
		}
	}
}

func TestWatcherLogsTheFindingsWhenTheyChange(t *testing.T) {
	var logged []string
	log := funcr.New(func(prefix, args string) { logged = append(logged, args) }, funcr.Options{})
	w := &Watcher{}
	full := "cluster-autoscaler's node group web is at its maximum size (4 of max 4)"
	zero := "cluster-autoscaler's node group gpu is scaled to 0 (min 0, max 4)"
	for _, findings := range [][]string{nil, {full}, {full}, {full, zero}, {full, zero}, nil, {zero}} {
		w.logFindings(log, findings)
	}
	want := []string{full, full, zero, zero}
	if len(logged) != len(want) {
		t.Fatalf("logged %d lines, want %d (each finding once per change): %q", len(logged), len(want), logged)
	}
	for i, line := range logged {
		if !strings.Contains(line, want[i]) {
			t.Errorf("log line %d = %q, want it to say %q", i, line, want[i])
		}
	}
}
