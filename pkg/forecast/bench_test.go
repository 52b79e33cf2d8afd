package forecast

import (
	"fmt"
	"slices"
	"strconv"
	"syscall"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/spreadguard/spreadguard/pkg/apis/spreadguard/v1alpha1"
	"github.com/spreadguard/spreadguard/pkg/engine"
	"github.com/spreadguard/spreadguard/pkg/policy"
	"github.com/spreadguard/spreadguard/pkg/spread"
	"github.com/spreadguard/spreadguard/pkg/spread/spreadtest"
	"github.com/spreadguard/spreadguard/test/perf/fixture"
)

// benchSetup is the validation benchmarks' cluster (test/perf/fixture:
// 30 pods per node in 30-replica Deployments, 3 zones, the cluster policy
// spreading over zones and hostnames, maxSkew 1) and its workload 0, a
// ReplicaSet whose 30 pods exist, to be scaled by 1,000 replicas; and, for
// the scale-downs, in workload 0's namespace, a StatefulSet db and a
// ReplicaSet web-big of 1,030 pods each, spread over the nodes, to be
// scaled down to 30.
type benchSetup struct {
	ix  *spread.Index
	src engine.Sources
	rs  *appsv1.ReplicaSet
	// db and bigRS are the workloads scaled down; bigPods are web-big's
	// pods, which a scale-down of a ReplicaSet ranks.
	db      *appsv1.StatefulSet
	bigRS   *appsv1.ReplicaSet
	bigPods []*v1.Pod
}

// scaleDownFrom is how many pods the scale-down workloads run: 1,000 go.
const scaleDownFrom = 1030

func newBenchSetup(nodes int) benchSetup {
	c := fixture.New(nodes)
	ix := spread.NewIndex()
	for i := range c.Nodes {
		ix.AddNode(c.Node(i))
	}
	for w := range c.Workloads() {
		for r := range c.Replicas {
			ix.AddPod(c.Pod(w, r))
		}
	}
	rs := c.ReplicaSet(0)
	ns := c.Namespace(0)
	db := &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "db", UID: "uid-db"},
		Spec: appsv1.StatefulSetSpec{
			Replicas: ptr.To[int32](30),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "db"}},
			Template: v1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "db"}}},
		},
	}
	bigLabels := map[string]string{"app": "web-big", appsv1.DefaultDeploymentUniqueLabelKey: "big"}
	bigRS := &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web-big", UID: "uid-web-big"},
		Spec: appsv1.ReplicaSetSpec{
			Replicas: ptr.To[int32](30),
			Selector: &metav1.LabelSelector{MatchLabels: bigLabels},
			Template: v1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: bigLabels}},
		},
	}
	start := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	var bigPods []*v1.Pod
	for i := range scaleDownFrom {
		// Over the nodes, and so the zones, by a stride prime to them.
		node := c.NodeName(i * 13 % nodes)
		name := fmt.Sprintf("db-%d", i)
		ix.AddPod(spreadtest.MakePod().Namespace(ns).Name(name).Label("app", "db").
			Label(appsv1.StatefulSetPodNameLabel, name).Label(appsv1.PodIndexLabel, strconv.Itoa(i)).
			ControlledBy("StatefulSet", "apps/v1", "db").Node(node).Phase(v1.PodRunning).Obj())
		p := spreadtest.MakePod().Namespace(ns).Name(fmt.Sprintf("web-big-%05d", i)).UID(fmt.Sprintf("uid-web-big-%d", i)).
			Labels(bigLabels).ControlledBy("ReplicaSet", "apps/v1", "web-big").Node(c.NodeName((i*13 + 5) % nodes)).
			Created(start.Add(time.Duration(i) * time.Minute)).Ready(start.Add(time.Duration(i)*time.Minute + time.Minute)).Obj()
		ix.AddPod(p)
		bigPods = append(bigPods, p)
	}
	var namespaces []*v1.Namespace
	for i, name := range c.NamespaceNames() {
		namespaces = append(namespaces, fixture.NamespaceObject(name, i))
	}
	src := &sources{
		FakeSelectorSources: spreadtest.SelectorSources(c.Service(0), rs, db, bigRS),
		SliceLister:         policy.SliceLister{Namespaces: namespaces, ClusterPolicies: []*v1alpha1.ClusterSpreadPolicy{fixture.Policy()}},
	}
	return benchSetup{ix: ix, src: src, rs: rs, db: db, bigRS: bigRS, bigPods: bigPods}
}

// forecastCase is one forecast the benchmark times.
type forecastCase struct {
	name string
	w    *Workload
	opts []Option
	// check fails unless a forecast is the one the case means.
	check func(*Forecast) error
}

// BenchmarkForecast measures a forecast of 1,000 replicas at 5,000 nodes
// and 150,000 pods, reporting the p50 and p99 of the per-forecast times,
// elapsed and of CPU (see timeForecasts):
//
//   - scaling workload 0 up by 1,000 with the whole report, as
//     kubectl-spread plan makes it: the mutation and the layout of the
//     pod, then 1,000 placements (the case measured since the first
//     forecast, under the same name);
//   - the same as the webhook runs it (WarningOnly, report=warning);
//   - the webhook's scale-down of a StatefulSet from 1,030 to 30, its
//     highest 1,000 ordinals found in the index by name;
//   - plan's scale-down of a ReplicaSet from 1,030 to 30, its pods ranked
//     as the ReplicaSet controller ranks them.
//
// The baselines, in the same run, are one check of the same pod:
// unexplained, what the pod webhook spends per pod, and explained, what
// listing every node with its reason costs; and the layout alone.
func BenchmarkForecast(b *testing.B) {
	for _, nodes := range []int{5000} {
		s := newBenchSetup(nodes)
		size := fmt.Sprintf("nodes=%d,pods=%d,replicas=1000", nodes, nodes*30)
		scaled := s.rs.DeepCopy()
		scaled.Spec.Replicas = ptr.To(*s.rs.Spec.Replicas + 1000)
		up, err := Of(scaled, *s.rs.Spec.Replicas)
		if err != nil {
			b.Fatal(err)
		}
		placed := func(f *Forecast) error {
			if f.Refused != nil || f.Skipped != "" || f.Warning() != "" {
				return fmt.Errorf("refused %+v, skipped %q: want all 1000 replicas placed", f.Refused, f.Skipped)
			}
			return nil
		}
		db, err := Of(s.db, scaleDownFrom)
		if err != nil {
			b.Fatal(err)
		}
		big, err := Of(s.bigRS, scaleDownFrom)
		if err != nil {
			b.Fatal(err)
		}
		big.Pods = s.bigPods
		departed := func(f *Forecast) error {
			if f.Skipped != "" || f.Order == "" || len(f.Constraints) != 2 {
				return fmt.Errorf("skipped %q, order %q, %d constraints: want a scale-down under 2 constraints", f.Skipped, f.Order, len(f.Constraints))
			}
			return nil
		}
		cases := []forecastCase{
			{name: size, w: up, check: func(f *Forecast) error {
				if len(f.Placements) != 1000 {
					return fmt.Errorf("placed %d replicas, want 1000", len(f.Placements))
				}
				return placed(f)
			}},
			{name: "report=warning/" + size, w: up, opts: []Option{WarningOnly()}, check: placed},
			{name: "scale=down,kind=StatefulSet,report=warning/" + size, w: db, opts: []Option{WarningOnly()}, check: departed},
			{name: "scale=down,kind=ReplicaSet/" + size, w: big, check: func(f *Forecast) error {
				if len(f.Departures) != 1000 {
					return fmt.Errorf("%d departures, want 1000", len(f.Departures))
				}
				return departed(f)
			}},
		}
		for _, fc := range cases {
			b.Run(fc.name, func(b *testing.B) {
				f, err := Run(fc.w, s.src, s.ix, engine.Config{}, fc.opts...)
				if err == nil {
					err = fc.check(f)
				}
				if err != nil {
					b.Fatal(err)
				}
				timeForecasts(b, func() error {
					_, err := Run(fc.w, s.src, s.ix, engine.Config{}, fc.opts...)
					return err
				})
			})
		}
		m, err := engine.Mutate(up.Pod, withOwner(s.src, up.owner), engine.Config{})
		if err != nil || m.Pod == nil {
			b.Fatalf("mutating: %v (skipped: %v)", err, m)
		}
		for _, explain := range []bool{false, true} {
			b.Run(fmt.Sprintf("baseline=check,explain=%v/nodes=%d,pods=%d", explain, nodes, nodes*30), func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					if _, err := s.ix.Check(m.Pod, spread.Options{Explain: explain}); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
		b.Run(fmt.Sprintf("baseline=layout/nodes=%d,pods=%d", nodes, nodes*30), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := s.ix.Layout(m.Pod, spread.DetailNodes); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// cordonedSetup is the validation benchmarks' cluster with its node 0
// cordoned, and a ReplicaSet wide in workload 0's namespace with one pod on
// each of the 4,999 other nodes, under a cluster policy that spreads over
// zones (maxSkew 1) and hostnames (maxSkew 5), both counting tainted nodes
// (nodeTaintsPolicy Ignore). The cordoned node is a hostname domain with no
// pod that no replica can take: it pins the hostname constraint's global
// minimum at 0, below every node a replica can go to.
type cordonedSetup struct {
	ix   *spread.Index
	src  engine.Sources
	wide *appsv1.ReplicaSet
}

// wideReplicas is how many pods wide runs: one per node but the cordoned.
const wideReplicas = 4999

func newCordonedSetup(nodes int) cordonedSetup {
	c := fixture.New(nodes)
	ix := spread.NewIndex()
	for i := range c.Nodes {
		n := c.Node(i)
		if i == 0 {
			n.Spec.Unschedulable = true
			n.Spec.Taints = append(n.Spec.Taints, v1.Taint{Key: v1.TaintNodeUnschedulable, Effect: v1.TaintEffectNoSchedule})
		}
		ix.AddNode(n)
	}
	for w := range c.Workloads() {
		for r := range c.Replicas {
			ix.AddPod(c.Pod(w, r))
		}
	}
	ns := c.Namespace(0)
	labels := map[string]string{"app": "wide"}
	wide := &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "wide", UID: "uid-wide"},
		Spec: appsv1.ReplicaSetSpec{
			Replicas: ptr.To[int32](wideReplicas),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: v1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}},
		},
	}
	for i := range wideReplicas {
		ix.AddPod(spreadtest.MakePod().Namespace(ns).Name(fmt.Sprintf("wide-%05d", i)).Labels(labels).
			ControlledBy("ReplicaSet", "apps/v1", "wide").Node(c.NodeName(i + 1)).Phase(v1.PodRunning).Obj())
	}
	pol := fixture.Policy()
	ignore := v1.NodeInclusionPolicyIgnore
	for i := range pol.Spec.Constraints {
		pol.Spec.Constraints[i].NodeTaintsPolicy = &ignore
	}
	pol.Spec.Constraints[1].MaxSkew = 5
	var namespaces []*v1.Namespace
	for i, name := range c.NamespaceNames() {
		namespaces = append(namespaces, fixture.NamespaceObject(name, i))
	}
	src := &sources{
		FakeSelectorSources: spreadtest.SelectorSources(wide),
		SliceLister:         policy.SliceLister{Namespaces: namespaces, ClusterPolicies: []*v1alpha1.ClusterSpreadPolicy{pol}},
	}
	return cordonedSetup{ix: ix, src: src, wide: wide}
}

// timeForecasts runs forecast in b's loop and reports the p50 and p99 of
// its times, elapsed (p50-ns, p99-ns) and of the process's CPU
// (cpu-p50-ns, cpu-p99-ns).
func timeForecasts(b *testing.B, forecast func() error) {
	b.Helper()
	b.ReportAllocs()
	samples := make([]time.Duration, 0, b.N)
	cpu := make([]time.Duration, 0, b.N)
	for b.Loop() {
		start, startCPU := time.Now(), cpuTime(b)
		if err := forecast(); err != nil {
			b.Fatal(err)
		}
		samples = append(samples, time.Since(start))
		cpu = append(cpu, cpuTime(b)-startCPU)
	}
	spreadtest.ReportLatency(b, samples)
	slices.Sort(cpu)
	b.ReportMetric(float64(cpu[len(cpu)/2].Nanoseconds()), "cpu-p50-ns")
	b.ReportMetric(float64(cpu[len(cpu)*99/100].Nanoseconds()), "cpu-p99-ns")
}

// cpuTime is the CPU time the process has used: on a machine whose other
// work delays the benchmark, a forecast's own cost (and, with -cpu 1,
// nearly nothing else's).
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatalf("reading the CPU time: %v", err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkForecastCordoned measures the forecast of a scale-up by 1,000
// and by 10,000 replicas (MaxPlacements) at 5,000 nodes when a cordoned
// node counted under nodeTaintsPolicy Ignore holds the hostname
// constraint's global minimum, so that no node a replica can take is ever
// at it: the webhook's forecast (WarningOnly) and plan's whole report,
// each reporting the p50 and p99 of the per-forecast times, elapsed and of
// CPU (see timeForecasts). The baseline is the layout
// of the same pod, which every forecast starts from, with its CPU per
// layout.
func BenchmarkForecastCordoned(b *testing.B) {
	const nodes = 5000
	s := newCordonedSetup(nodes)
	var up *Workload
	for _, replicas := range []int32{1000, 10000} {
		scaled := s.wide.DeepCopy()
		scaled.Spec.Replicas = ptr.To(wideReplicas + replicas)
		w, err := Of(scaled, wideReplicas)
		if err != nil {
			b.Fatal(err)
		}
		up = w
		check := func(f *Forecast) error {
			switch {
			case f.Skipped != "" || f.Refused != nil || f.Truncated:
				return fmt.Errorf("skipped %q, refused %+v, truncated %v: want all %d replicas placed", f.Skipped, f.Refused, f.Truncated, replicas)
			case len(f.Constraints) != 2 || f.Constraints[1].TopologyKey != v1.LabelHostname || f.Constraints[1].Domains[fixture.New(nodes).NodeName(0)] != 0:
				return fmt.Errorf("constraints %d: want zone and hostname, the cordoned node counted at 0", len(f.Constraints))
			}
			return nil
		}
		for _, fc := range []forecastCase{
			{name: "report=warning", w: w, opts: []Option{WarningOnly()}, check: check},
			{name: "report=plan", w: w, check: func(f *Forecast) error {
				if len(f.Placements) != int(replicas) {
					return fmt.Errorf("placed %d replicas, want %d", len(f.Placements), replicas)
				}
				return check(f)
			}},
		} {
			b.Run(fmt.Sprintf("%s/nodes=%d,replicas=%d", fc.name, nodes, replicas), func(b *testing.B) {
				f, err := Run(fc.w, s.src, s.ix, engine.Config{}, fc.opts...)
				if err == nil {
					err = fc.check(f)
				}
				if err != nil {
					b.Fatal(err)
				}
				timeForecasts(b, func() error {
					_, err := Run(fc.w, s.src, s.ix, engine.Config{}, fc.opts...)
					return err
				})
			})
		}
	}
	m, err := engine.Mutate(up.Pod, withOwner(s.src, up.owner), engine.Config{})
	if err != nil || m.Pod == nil {
		b.Fatalf("mutating: %v (skipped: %v)", err, m)
	}
	b.Run(fmt.Sprintf("baseline=layout/nodes=%d", nodes), func(b *testing.B) {
		b.ReportAllocs()
		start := cpuTime(b)
		for b.Loop() {
			l, err := s.ix.Layout(m.Pod, spread.DetailNodes)
			if err != nil {
				b.Fatal(err)
			}
			l.Release()
		}
		b.ReportMetric(float64((cpuTime(b)-start).Nanoseconds())/float64(b.N), "cpu-ns/op")
	})
}
