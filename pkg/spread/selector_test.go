package spread_test

import (
	"errors"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/spreadguard/spreadguard/pkg/spread"
	st "github.com/spreadguard/spreadguard/pkg/spread/spreadtest"
)

// requirementStrings lists a selector's requirements in a stable order:
// labels.Selector.Add sorts by key with an unstable sort, so two
// requirements on one key can print in either order.
func requirementStrings(t *testing.T, sel labels.Selector) []string {
	t.Helper()
	reqs, ok := sel.Requirements()
	if !ok {
		return []string{"<nothing>"}
	}
	out := []string{}
	for _, r := range reqs {
		out = append(out, r.String())
	}
	slices.Sort(out)
	return out
}

func TestDefaultSelector(t *testing.T) {
	errLister := errors.New("cache unavailable")
	rsOwned := st.MakePod().Name("p").Label("app", "a").Label("tier", "web").ControlledBy("ReplicaSet", "apps/v1", "rs")
	tests := []struct {
		name    string
		pod     *v1.Pod
		src     *st.FakeSelectorSources
		want    []string
		wantErr error
	}{
		{
			name: "no service and no owner -> empty selector",
			pod:  st.MakePod().Name("p").Label("app", "a").Obj(),
			src:  st.SelectorSources(),
			want: []string{},
		},
		{
			name: "one matching service -> its selector",
			pod:  st.MakePod().Name("p").Label("app", "a").Label("tier", "web").Obj(),
			src:  st.SelectorSources(st.MakeService().Name("s").Selector("app", "a").Obj()),
			want: []string{"app=a"},
		},
		{
			name: "two matching services -> their selectors merged",
			pod:  st.MakePod().Name("p").Label("app", "a").Label("tier", "web").Obj(),
			src: st.SelectorSources(
				st.MakeService().Name("s1").Selector("app", "a").Obj(),
				st.MakeService().Name("s2").Selector("tier", "web").Obj(),
			),
			want: []string{"app=a", "tier=web"},
		},
		{
			name: "service that does not select the pod, nil-selector service and other namespace's service -> ignored",
			pod:  st.MakePod().Name("p").Label("app", "a").Obj(),
			src: st.SelectorSources(
				st.MakeService().Name("other-app").Selector("app", "b").Obj(),
				st.MakeService().Name("headless").Obj(),
				st.MakeService().Name("elsewhere").Namespace("other").Selector("app", "a").Obj(),
			),
			want: []string{},
		},
		{
			name: "service with an empty, non-nil selector selects the pod but adds nothing",
			pod:  st.MakePod().Name("p").Label("app", "a").Obj(),
			src: st.SelectorSources(func() *v1.Service {
				s := st.MakeService().Name("all").Obj()
				s.Spec.Selector = map[string]string{}
				return s
			}()),
			want: []string{},
		},
		{
			name: "controller ReplicaSet -> service selector plus the ReplicaSet's requirements",
			pod:  rsOwned.Obj(),
			src: st.SelectorSources(
				st.MakeService().Name("s").Selector("tier", "web").Obj(),
				st.MakeReplicaSet().Name("rs").MatchLabel("app", "a").MatchExpression("tier", metav1.LabelSelectorOpIn, "web", "api").Obj(),
			),
			want: []string{"app=a", "tier in (api,web)", "tier=web"},
		},
		{
			name: "controller StatefulSet -> its requirements",
			pod:  st.MakePod().Name("p").Label("app", "db").ControlledBy("StatefulSet", "apps/v1", "db").Obj(),
			src:  st.SelectorSources(st.MakeStatefulSet().Name("db").MatchLabel("app", "db").MatchExpression("canary", metav1.LabelSelectorOpDoesNotExist).Obj()),
			want: []string{"!canary", "app=db"},
		},
		{
			name: "controller ReplicationController -> merged into the service label set, its value wins",
			pod:  st.MakePod().Name("p").Label("app", "a").Label("tier", "web").ControlledBy("ReplicationController", "v1", "rc").Obj(),
			src: st.SelectorSources(
				st.MakeService().Name("s").Selector("app", "a").Obj(),
				st.MakeReplicationController().Name("rc").Selector("app", "a").Selector("tier", "web").Obj(),
			),
			want: []string{"app=a", "tier=web"},
		},
		{
			name: "ReplicaSet owner reference without controller: true -> not followed",
			pod:  st.MakePod().Name("p").Label("app", "a").OwnerRef("ReplicaSet", "apps/v1", "rs").Obj(),
			src:  st.SelectorSources(st.MakeReplicaSet().Name("rs").MatchLabel("app", "a").Obj()),
			want: []string{},
		},
		{
			name: "controller ReplicaSet of extensions/v1beta1 -> not followed, the GroupVersionKind must match exactly",
			pod:  st.MakePod().Name("p").Label("app", "a").ControlledBy("ReplicaSet", "extensions/v1beta1", "rs").Obj(),
			src:  st.SelectorSources(st.MakeReplicaSet().Name("rs").MatchLabel("app", "a").Obj()),
			want: []string{},
		},
		{
			name: "controller with an unparsable apiVersion -> services only",
			pod:  st.MakePod().Name("p").Label("app", "a").ControlledBy("ReplicaSet", "apps/v1/extra", "rs").Obj(),
			src:  st.SelectorSources(st.MakeService().Name("s").Selector("app", "a").Obj(), st.MakeReplicaSet().Name("rs").MatchLabel("tier", "x").Obj()),
			want: []string{"app=a"},
		},
		{
			name: "controller Deployment -> not a supported owner",
			pod:  st.MakePod().Name("p").Label("app", "a").ControlledBy("Deployment", "apps/v1", "d").Obj(),
			src:  st.SelectorSources(),
			want: []string{},
		},
		{
			name: "controller ReplicaSet missing from the sources -> skipped like a lister miss",
			pod:  rsOwned.Obj(),
			src:  st.SelectorSources(st.MakeService().Name("s").Selector("app", "a").Obj()),
			want: []string{"app=a"},
		},
		{
			name: "controller ReplicaSet with a nil selector -> adds nothing",
			pod:  rsOwned.Obj(),
			src:  st.SelectorSources(st.MakeReplicaSet().Name("rs").Obj()),
			want: []string{},
		},
		{
			name: "controller ReplicaSet with an unparsable selector -> skipped as upstream does",
			pod:  rsOwned.Obj(),
			src:  st.SelectorSources(st.MakeReplicaSet().Name("rs").MatchExpression("app", "Like", "a").Obj()),
			want: []string{},
		},
		{
			name:    "service lookup fails -> error",
			pod:     rsOwned.Obj(),
			src:     st.SelectorSources().Fail(st.LookupServices, errLister),
			wantErr: errLister,
		},
		{
			name:    "ReplicaSet lookup fails -> error, never a narrower selector",
			pod:     rsOwned.Obj(),
			src:     st.SelectorSources().Fail(st.LookupReplicaSet, errLister),
			wantErr: errLister,
		},
		{
			name:    "ReplicationController lookup fails -> error",
			pod:     st.MakePod().Name("p").ControlledBy("ReplicationController", "v1", "rc").Obj(),
			src:     st.SelectorSources().Fail(st.LookupReplicationController, errLister),
			wantErr: errLister,
		},
		{
			name:    "StatefulSet lookup fails -> error",
			pod:     st.MakePod().Name("p").ControlledBy("StatefulSet", "apps/v1", "ss").Obj(),
			src:     st.SelectorSources().Fail(st.LookupStatefulSet, errLister),
			wantErr: errLister,
		},
	}
	for _, tc := range tests {
		for _, viaCandidates := range []bool{false, true} {
			name := tc.name
			var src spread.SelectorSources = tc.src
			if viaCandidates {
				name += " (sources offering candidates)"
				src = &narrowed{FakeSelectorSources: tc.src}
			}
			t.Run(name, func(t *testing.T) {
				sel, err := spread.DefaultSelector(tc.pod, src)
				if tc.wantErr != nil {
					if !errors.Is(err, tc.wantErr) {
						t.Fatalf("DefaultSelector() error = %v, want %v", err, tc.wantErr)
					}
					return
				}
				if err != nil {
					t.Fatalf("DefaultSelector() error = %v", err)
				}
				if diff := cmp.Diff(tc.want, requirementStrings(t, sel)); diff != "" {
					t.Errorf("DefaultSelector() requirements (-want +got):\n%s", diff)
				}
			})
		}
	}
}

// narrowed offers spread.ServiceCandidates: every Service of the namespace,
// a superset as the interface allows, so DefaultSelector must still match
// each one. Its plain Services fails: a test through it shows that
// DefaultSelector takes the candidates when they are offered.
type narrowed struct{ *st.FakeSelectorSources }

var _ spread.ServiceCandidates = (*narrowed)(nil)

func (n *narrowed) Services(string) ([]*v1.Service, error) {
	return nil, errors.New("listed every Service although candidates were offered")
}

func (n *narrowed) ServicesSelecting(namespace string, _ map[string]string) ([]*v1.Service, error) {
	return n.FakeSelectorSources.Services(namespace)
}

func TestDefaultSelectorRejectsNilInput(t *testing.T) {
	if _, err := spread.DefaultSelector(nil, st.SelectorSources()); err == nil {
		t.Error("DefaultSelector(nil pod) returned no error")
	}
	if _, err := spread.DefaultSelector(st.MakePod().Obj(), nil); err == nil {
		t.Error("DefaultSelector(nil sources) returned no error")
	}
}

// The SelectorSpread examples of the seed documents: the selector built
// for the incoming pod, then the number of matching pods per node and per
// zone it yields.
func TestDefaultSelectorSelectorSpreadExamples(t *testing.T) {
	labels1 := map[string]string{"foo": "bar", "baz": "blah"}
	labels2 := map[string]string{"bar": "foo", "baz": "blah"}
	zoned := map[string]string{"n1": "z1", "n2": "z2", "n3": "z2", "n4": "z3", "n5": "z3", "n6": "z3"}
	pod := func(node string, l map[string]string) *v1.Pod {
		return st.MakePod().Name(node + "-" + labels.Set(l).String()).Labels(l).Node(node).Obj()
	}
	tests := []struct {
		name      string
		incoming  *v1.Pod
		src       *st.FakeSelectorSources
		pods      []*v1.Pod
		zones     map[string]string
		want      []string
		wantNodes map[string]int
		wantZones map[string]int
	}{
		{
			name:      "example 1: service selects labels1, n1 holds labels1 and labels2, n2 holds labels1 twice -> n1=1, n2=2",
			incoming:  st.MakePod().Name("in").Labels(labels1).Obj(),
			src:       st.SelectorSources(st.MakeService().Name("s").Selector("foo", "bar").Selector("baz", "blah").Obj()),
			pods:      []*v1.Pod{pod("n1", labels1), pod("n1", labels2), pod("n2", labels1), st.MakePod().Name("n2-second").Labels(labels1).Node("n2").Obj()},
			want:      []string{"baz=blah", "foo=bar"},
			wantNodes: map[string]int{"n1": 1, "n2": 2},
		},
		{
			name:     "example 2: service baz=blah and controller RC foo=bar -> the intersection, n1=1, n2=1",
			incoming: st.MakePod().Name("in").Labels(labels1).ControlledBy("ReplicationController", "v1", "rc").Obj(),
			src: st.SelectorSources(
				st.MakeService().Name("s").Selector("baz", "blah").Obj(),
				st.MakeReplicationController().Name("rc").Selector("foo", "bar").Obj(),
			),
			pods:      []*v1.Pod{pod("n1", labels1), pod("n1", labels2), pod("n2", labels1)},
			want:      []string{"baz=blah", "foo=bar"},
			wantNodes: map[string]int{"n1": 1, "n2": 1},
		},
		{
			name:     "example 2 in v1.37: the RC selects the pod but does not control it -> service only, n1=2, n2=1",
			incoming: st.MakePod().Name("in").Labels(labels1).Obj(),
			src: st.SelectorSources(
				st.MakeService().Name("s").Selector("baz", "blah").Obj(),
				st.MakeReplicationController().Name("rc").Selector("foo", "bar").Obj(),
			),
			pods:      []*v1.Pod{pod("n1", labels1), pod("n1", labels2), pod("n2", labels1)},
			want:      []string{"baz=blah"},
			wantNodes: map[string]int{"n1": 2, "n2": 1},
		},
		{
			name:      "example 3: labels2, labels1, labels1, labels2, labels1 on n1..n5 -> nodes [0,1,1,0,1,0], zones z1=0, z2=2, z3=1",
			incoming:  st.MakePod().Name("in").Labels(labels1).Obj(),
			src:       st.SelectorSources(st.MakeService().Name("s").Selector("foo", "bar").Selector("baz", "blah").Obj()),
			pods:      []*v1.Pod{pod("n1", labels2), pod("n2", labels1), pod("n3", labels1), pod("n4", labels2), pod("n5", labels1)},
			zones:     zoned,
			want:      []string{"baz=blah", "foo=bar"},
			wantNodes: map[string]int{"n1": 0, "n2": 1, "n3": 1, "n4": 0, "n5": 1, "n6": 0},
			wantZones: map[string]int{"z1": 0, "z2": 2, "z3": 1},
		},
		{
			name:      "example 4: labels1, labels1, labels2, labels1 on n1..n4 -> nodes [1,1,0,1,0,0], zones 1 each",
			incoming:  st.MakePod().Name("in").Labels(labels1).Obj(),
			src:       st.SelectorSources(st.MakeService().Name("s").Selector("foo", "bar").Selector("baz", "blah").Obj()),
			pods:      []*v1.Pod{pod("n1", labels1), pod("n2", labels1), pod("n3", labels2), pod("n4", labels1)},
			zones:     zoned,
			want:      []string{"baz=blah", "foo=bar"},
			wantNodes: map[string]int{"n1": 1, "n2": 1, "n3": 0, "n4": 1, "n5": 0, "n6": 0},
			wantZones: map[string]int{"z1": 1, "z2": 1, "z3": 1},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			sel, err := spread.DefaultSelector(tc.incoming, tc.src)
			if err != nil {
				t.Fatalf("DefaultSelector() error = %v", err)
			}
			if diff := cmp.Diff(tc.want, requirementStrings(t, sel)); diff != "" {
				t.Errorf("DefaultSelector() requirements (-want +got):\n%s", diff)
			}
			gotNodes := map[string]int{}
			for n := range tc.wantNodes {
				gotNodes[n] = 0
			}
			var gotZones map[string]int
			if tc.zones != nil {
				gotZones = map[string]int{}
				for _, z := range tc.zones {
					gotZones[z] += 0
				}
			}
			for _, p := range tc.pods {
				if p.Namespace == tc.incoming.Namespace && sel.Matches(labels.Set(p.Labels)) {
					gotNodes[p.Spec.NodeName]++
					if gotZones != nil {
						gotZones[tc.zones[p.Spec.NodeName]]++
					}
				}
			}
			if diff := cmp.Diff(tc.wantNodes, gotNodes); diff != "" {
				t.Errorf("matching pods per node (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantZones, gotZones); diff != "" {
				t.Errorf("matching pods per zone (-want +got):\n%s", diff)
			}
		})
	}
}
