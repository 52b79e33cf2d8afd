package parity

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/apis/config"
	"k8s.io/kubernetes/pkg/scheduler/apis/config/latest"
	"k8s.io/kubernetes/pkg/scheduler/backend/cache"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/defaultbinder"
	plfeature "k8s.io/kubernetes/pkg/scheduler/framework/plugins/feature"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/names"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/nodeaffinity"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/nodeunschedulable"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/podtopologyspread"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/queuesort"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/tainttoleration"
	frameworkruntime "k8s.io/kubernetes/pkg/scheduler/framework/runtime"
	"k8s.io/kubernetes/pkg/scheduler/metrics"

	"github.com/spreadguard/spreadguard/pkg/spread"
)

// The framework records per-plugin metrics and needs them registered, as
// kube-scheduler does at start-up.
func init() { metrics.Register() }

// filterPlugins are the four filters whose verdicts spreadguard reproduces,
// in the order of the default profile
// (https://github.com/kubernetes/kubernetes/blob/v1.37.1/pkg/scheduler/apis/config/v1/default_plugins.go).
var filterPlugins = []string{
	names.NodeUnschedulable,
	names.TaintToleration,
	names.NodeAffinity,
	names.PodTopologySpread,
}

// swapLister is the framework's snapshot lister. The plugins keep the lister
// they were built with, so each case swaps the snapshot behind it instead of
// building a new framework.
type swapLister struct {
	fwk.SharedLister
}

// scheduler is the real kube-scheduler v1.37.1 filtering pipeline, reduced
// to the plugins spreadguard mirrors: full runs all four filters, candidates
// all but PodTopologySpread (what "passes affinity and taints alone" means).
type scheduler struct {
	lister     *swapLister
	full       framework.Framework
	candidates framework.Framework
	// single runs one filter plugin alone (with its PreFilter), to tell
	// every reason a node is rejected for, not only the first.
	single map[string]framework.Framework
	// informers back the listers helper.DefaultSelector reads. They are
	// never started: tests fill their indexers directly.
	informers informers.SharedInformerFactory
}

// newScheduler builds the frameworks the way kube-scheduler does: the in-tree
// factories with the feature gates' defaults
// (https://github.com/kubernetes/kubernetes/blob/v1.37.1/pkg/scheduler/framework/plugins/registry.go)
// and the plugin arguments of the default configuration. defaults, when not
// nil, replaces PodTopologySpread's system defaulting with List defaulting
// of those constraints, as a cluster operator can configure it.
func newScheduler(tb testing.TB, defaults []v1.TopologySpreadConstraint) *scheduler {
	tb.Helper()
	ctx := tb.Context()
	fts := plfeature.NewSchedulerFeaturesFromGates(utilfeature.DefaultFeatureGate)
	registry := frameworkruntime.Registry{
		names.PrioritySort:      queuesort.New,
		names.DefaultBinder:     defaultbinder.New,
		names.NodeUnschedulable: frameworkruntime.FactoryAdapter(fts, nodeunschedulable.New),
		names.TaintToleration:   frameworkruntime.FactoryAdapter(fts, tainttoleration.New),
		names.NodeAffinity:      frameworkruntime.FactoryAdapter(fts, nodeaffinity.New),
		names.PodTopologySpread: frameworkruntime.FactoryAdapter(fts, podtopologyspread.New),
	}
	args := defaultPluginArgs(tb)
	if defaults != nil {
		args[names.PodTopologySpread] = &config.PodTopologySpreadArgs{
			DefaultingType:     config.ListDefaulting,
			DefaultConstraints: defaults,
		}
	}

	lister := &swapLister{SharedLister: cache.NewEmptySnapshot()}
	informerFactory := informers.NewSharedInformerFactory(fake.NewClientset(), 0)
	build := func(filters []string) framework.Framework {
		tb.Helper()
		profile := &config.KubeSchedulerProfile{
			SchedulerName: v1.DefaultSchedulerName,
			Plugins: &config.Plugins{
				QueueSort: config.PluginSet{Enabled: []config.Plugin{{Name: names.PrioritySort}}},
				Bind:      config.PluginSet{Enabled: []config.Plugin{{Name: names.DefaultBinder}}},
			},
		}
		for _, name := range filters {
			profile.Plugins.PreFilter.Enabled = append(profile.Plugins.PreFilter.Enabled, config.Plugin{Name: name})
			profile.Plugins.Filter.Enabled = append(profile.Plugins.Filter.Enabled, config.Plugin{Name: name})
			if a, ok := args[name]; ok {
				profile.PluginConfig = append(profile.PluginConfig, config.PluginConfig{Name: name, Args: a})
			}
		}
		f, err := frameworkruntime.NewFramework(ctx, registry, profile,
			frameworkruntime.WithSnapshotSharedLister(lister),
			frameworkruntime.WithInformerFactory(informerFactory),
			frameworkruntime.WithClientSet(fake.NewClientset()))
		if err != nil {
			tb.Fatalf("building the scheduler framework: %v", err)
		}
		return f
	}
	s := &scheduler{
		lister:     lister,
		full:       build(filterPlugins),
		candidates: build(filterPlugins[:3]),
		single:     map[string]framework.Framework{},
		informers:  informerFactory,
	}
	for _, name := range filterPlugins {
		s.single[name] = build([]string{name})
	}
	return s
}

// defaultPluginArgs returns the arguments kube-scheduler's default
// configuration gives the plugins, keyed by plugin name.
func defaultPluginArgs(tb testing.TB) map[string]runtime.Object {
	tb.Helper()
	cfg, err := latest.Default()
	if err != nil {
		tb.Fatalf("building the default scheduler configuration: %v", err)
	}
	args := map[string]runtime.Object{}
	for _, pc := range cfg.Profiles[0].PluginConfig {
		args[pc.Name] = pc.Args
	}
	if _, ok := args[names.PodTopologySpread].(*config.PodTopologySpreadArgs); !ok {
		tb.Fatalf("default configuration has no PodTopologySpreadArgs, got %T", args[names.PodTopologySpread])
	}
	return args
}

// schedulerOutcome is what the real scheduler decided for one pod.
type schedulerOutcome struct {
	// Feasible is the sorted set of nodes that pass all four filters.
	Feasible []string
	// Candidates is the sorted set of nodes that pass the filters other
	// than PodTopologySpread.
	Candidates []string
	// Spread is PodTopologySpread's PreFilter state, nil when the plugin
	// skipped the pod or the cycle stopped before it ran.
	Spread *spreadState
	// Rejections maps each node to the plugins that reject it on their
	// own, with their reason. A node every plugin accepts is absent.
	Rejections map[string]map[string]string
	// Labels are the labels of each node, to check explanations against.
	Labels map[string]map[string]string
	// Templates are the outcomes on the fresh node of each template that
	// counts (the last of each name), sorted by name.
	Templates []templateOutcome
}

// templateOutcome is what the real scheduler decided for the fresh node of
// one template, added alone to the cluster.
type templateOutcome struct {
	Name string
	// Source is the template's, which a message may name it by.
	Source string
	// Feasible: the fresh node passes all four filters.
	Feasible bool
	// Candidate: it passes the filters other than PodTopologySpread.
	Candidate bool
	// Rejections maps each plugin that rejects the fresh node on its own to
	// its reason.
	Rejections map[string]string
	// Labels are the fresh node's labels.
	Labels map[string]string
}

// spreadState is the part of PodTopologySpread's preFilterState that
// spreadguard's ConstraintResult mirrors, one entry per hard constraint.
type spreadState struct {
	Domains   []map[string]int
	GlobalMin []int
	// SelfMatch is 1 when the constraint's selector, as the plugin built it
	// (matchLabelKeys merged), matches the incoming pod.
	SelfMatch []int
}

// clusterView is what the scheduler's cache holds for a cluster: the
// scheduler's pod informer leaves Succeeded and Failed pods out
// (https://github.com/kubernetes/kubernetes/blob/v1.37.1/pkg/scheduler/scheduler.go,
// newPodInformer), the cache only keeps assigned pods, and a pod on a node the
// cache does not know sits in a NodeInfo without a node, which snapshots do
// not list.
func clusterView(nodes []*v1.Node, pods []*v1.Pod) []*v1.Pod {
	known := map[string]bool{}
	for _, n := range nodes {
		known[n.Name] = true
	}
	var kept []*v1.Pod
	for _, p := range pods {
		if p.Status.Phase == v1.PodSucceeded || p.Status.Phase == v1.PodFailed || !known[p.Spec.NodeName] {
			continue
		}
		kept = append(kept, p)
	}
	return kept
}

// run runs PreFilter then Filter on every node, as findNodesThatFitPod does
// (https://github.com/kubernetes/kubernetes/blob/v1.37.1/pkg/scheduler/schedule_one.go),
// once with all four plugins and once without PodTopologySpread.
func (s *scheduler) run(ctx context.Context, nodes []*v1.Node, pods []*v1.Pod, pod *v1.Pod) (*schedulerOutcome, error) {
	s.lister.SharedLister = cache.NewSnapshot(clusterView(nodes, pods), nodes)
	feasible, state, err := s.feasible(ctx, s.full, pod)
	if err != nil {
		return nil, err
	}
	candidates, _, err := s.feasible(ctx, s.candidates, pod)
	if err != nil {
		return nil, err
	}
	out := &schedulerOutcome{Feasible: feasible, Candidates: candidates, Labels: map[string]map[string]string{}}
	for _, n := range nodes {
		out.Labels[n.Name] = n.Labels
	}
	out.Spread, err = readSpreadState(state, pod)
	if err != nil {
		return nil, err
	}
	if out.Rejections, err = s.rejections(ctx, pod); err != nil {
		return nil, err
	}
	return out, nil
}

// decide is run on the case's nodes and pods, and then on the fresh node of
// each of its templates.
func (s *scheduler) decide(ctx context.Context, c *clusterCase, pod *v1.Pod) (*schedulerOutcome, error) {
	out, err := s.run(ctx, c.Nodes, c.Pods, pod)
	if err != nil {
		return nil, err
	}
	if out.Templates, err = s.runTemplates(ctx, c.Nodes, c.Pods, c.Templates, pod); err != nil {
		return nil, err
	}
	return out, nil
}

// runTemplates adds the fresh node of each template that counts, alone, to
// nodes and runs the filters as run does: PreFilter counts again with the
// fresh node among the nodes, which is the question cluster-autoscaler's
// scale-up simulation asks of a node group.
func (s *scheduler) runTemplates(ctx context.Context, nodes []*v1.Node, pods []*v1.Pod, templates []spread.Template, pod *v1.Pod) ([]templateOutcome, error) {
	var out []templateOutcome
	for _, t := range lastByName(templates) {
		fresh := freshNode(t)
		all := append(slices.Clip(nodes), fresh)
		s.lister.SharedLister = cache.NewSnapshot(clusterView(all, pods), all)
		feasible, _, err := s.feasible(ctx, s.full, pod)
		if err != nil {
			return nil, fmt.Errorf("template %s: %w", t.Name, err)
		}
		candidates, _, err := s.feasible(ctx, s.candidates, pod)
		if err != nil {
			return nil, fmt.Errorf("template %s: %w", t.Name, err)
		}
		rejections, err := s.rejections(ctx, pod)
		if err != nil {
			return nil, fmt.Errorf("template %s: %w", t.Name, err)
		}
		out = append(out, templateOutcome{
			Name:       t.Name,
			Source:     t.Source,
			Feasible:   slices.Contains(feasible, fresh.Name),
			Candidate:  slices.Contains(candidates, fresh.Name),
			Rejections: rejections[fresh.Name],
			Labels:     fresh.Labels,
		})
	}
	return out, nil
}

// rejections runs each filter plugin alone on every node.
func (s *scheduler) rejections(ctx context.Context, pod *v1.Pod) (map[string]map[string]string, error) {
	all, err := s.lister.NodeInfos().List()
	if err != nil {
		return nil, fmt.Errorf("listing nodes: %w", err)
	}
	out := map[string]map[string]string{}
	reject := func(node, plugin, reason string) {
		if out[node] == nil {
			out[node] = map[string]string{}
		}
		out[node][plugin] = reason
	}
	for name, f := range s.single {
		state := framework.NewCycleState()
		result, status, _ := f.RunPreFilterPlugins(ctx, state, pod)
		if !status.IsSuccess() && !status.IsRejected() {
			return nil, fmt.Errorf("prefilter of %s: %w", name, status.AsError())
		}
		for _, ni := range all {
			node := ni.Node().Name
			switch {
			case !status.IsSuccess():
				reject(node, name, status.Message())
			case !result.AllNodes() && !result.NodeNames.Has(node):
				reject(node, name, "left out by PreFilter")
			default:
				if st := f.RunFilterPlugins(ctx, state, pod, ni); !st.IsSuccess() {
					if !st.IsRejected() {
						return nil, fmt.Errorf("filter %s on node %s: %w", name, node, st.AsError())
					}
					reject(node, name, st.Message())
				}
			}
		}
	}
	return out, nil
}

func (s *scheduler) feasible(ctx context.Context, f framework.Framework, pod *v1.Pod) ([]string, fwk.CycleState, error) {
	state := framework.NewCycleState()
	all, err := s.lister.NodeInfos().List()
	if err != nil {
		return nil, nil, fmt.Errorf("listing nodes: %w", err)
	}
	result, status, _ := f.RunPreFilterPlugins(ctx, state, pod)
	if !status.IsSuccess() {
		if !status.IsRejected() {
			return nil, nil, fmt.Errorf("prefilter: %w", status.AsError())
		}
		return []string{}, state, nil
	}
	feasible := []string{}
	for _, ni := range all {
		name := ni.Node().Name
		if !result.AllNodes() && !result.NodeNames.Has(name) {
			continue
		}
		st := f.RunFilterPlugins(ctx, state, pod, ni)
		if st.IsSuccess() {
			feasible = append(feasible, name)
			continue
		}
		if !st.IsRejected() {
			return nil, nil, fmt.Errorf("filter on node %s: %w", name, st.AsError())
		}
	}
	slices.Sort(feasible)
	return feasible, state, nil
}

// readSpreadState reads PodTopologySpread's preFilterState. Its type is
// unexported but its fields are exported "for comparison during testing",
// so reflection reads them without copying the plugin's logic; only the
// global minimum rule (preFilterState.minMatchNum) is restated here.
func readSpreadState(state fwk.CycleState, pod *v1.Pod) (*spreadState, error) {
	if state == nil {
		return nil, nil
	}
	data, err := state.Read("PreFilter" + names.PodTopologySpread)
	if err != nil {
		return nil, nil // skipped, or the cycle stopped before the plugin ran
	}
	v := reflect.ValueOf(data)
	if v.Kind() != reflect.Pointer || v.IsNil() {
		return nil, fmt.Errorf("unexpected PodTopologySpread state %T", data)
	}
	v = v.Elem()
	constraints, paths, counts := v.FieldByName("Constraints"), v.FieldByName("CriticalPaths"), v.FieldByName("TpValueToMatchNum")
	if !constraints.IsValid() || !paths.IsValid() || !counts.IsValid() {
		return nil, fmt.Errorf("PodTopologySpread state %T lacks the fields this test reads", data)
	}
	out := &spreadState{}
	for i := range constraints.Len() {
		domains := counts.Index(i).Interface().(map[string]int)
		minMatch := int(paths.Index(i).Elem().Index(0).FieldByName("MatchNum").Int())
		// A domain count below minDomains makes the global minimum 0.
		if len(domains) < int(constraints.Index(i).FieldByName("MinDomains").Int()) {
			minMatch = 0
		}
		selector, ok := constraints.Index(i).FieldByName("Selector").Interface().(labels.Selector)
		if !ok {
			return nil, fmt.Errorf("PodTopologySpread constraint %d has no labels.Selector", i)
		}
		self := 0
		if selector.Matches(labels.Set(pod.Labels)) {
			self = 1
		}
		out.Domains = append(out.Domains, domains)
		out.GlobalMin = append(out.GlobalMin, minMatch)
		out.SelfMatch = append(out.SelfMatch, self)
	}
	return out, nil
}
