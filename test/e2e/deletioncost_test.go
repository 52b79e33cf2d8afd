//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"text/tabwriter"
	"time"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/spreadguard/spreadguard/pkg/apis/spreadguard/v1alpha1"
	"github.com/spreadguard/spreadguard/pkg/policy/policytest"
	"github.com/spreadguard/spreadguard/pkg/spread"
)

// The scale-down trials: how many of each kind, and how long each step may
// take with all of them running at once.
const (
	scaleDownTrials = 10
	// costTimeout bounds how long the keeper may take to give every running
	// pod of every trial a deletion cost.
	costTimeout = time.Minute
	// settleTimeout bounds a scale or a rollout with every trial running:
	// the controllers, the scheduler and kwok share two cores.
	settleTimeout = 3 * time.Minute
	// trialPoll paces the trials' checks: 31 namespaces polled every 250ms
	// would queue behind the suite client's rate limit.
	trialPoll = time.Second
)

// TestE2EDeletionCost runs its trials side by side, each in a namespace of
// its own; no other scenario runs meanwhile, as top-level tests run one
// after the other.
func TestE2EDeletionCost(t *testing.T) {
	t.Run("a Deployment of 12 even over 3 zones scaled to 6 then 3 stays even in every trial with the keeper and skews in some without it; "+
		"a rolling update of 9 stays even", scaleDownKeepsSpread)
}

// scaleMethod is one way to ask a Deployment for fewer replicas.
type scaleMethod struct {
	name  string
	scale func(t *testing.T, ns, deployment string, replicas int32)
}

var (
	// kubectlScale is a person's `kubectl scale`.
	kubectlScale = scaleMethod{"kubectl scale", func(t *testing.T, ns, deployment string, replicas int32) {
		t.Helper()
		_, stderr, err := kubectl(t.Context(), nil, "scale", "deployment", deployment, "-n", ns, "--replicas="+strconv.Itoa(int(replicas)))
		if err != nil {
			t.Fatalf("kubectl scale --replicas=%d: %v\n%s", replicas, err, stderr)
		}
	}}
	// hpaScale writes the /scale subresource as the
	// horizontal-pod-autoscaler's service account, as kube-controller-manager
	// does with --use-service-account-credentials (the local cluster runs no
	// HPA controller, and an HPA would not scale on demand).
	hpaScale = scaleMethod{"scale subresource as the HPA", func(t *testing.T, ns, deployment string, replicas int32) {
		t.Helper()
		hpa := impersonating(t, "system:serviceaccount:kube-system:horizontal-pod-autoscaler")
		scale, err := hpa.AppsV1().Deployments(ns).GetScale(t.Context(), deployment, metav1.GetOptions{})
		if err != nil {
			t.Fatalf("get the scale as the horizontal-pod-autoscaler: %v", err)
		}
		scale.Spec.Replicas = replicas
		if _, err := hpa.AppsV1().Deployments(ns).UpdateScale(t.Context(), deployment, scale, metav1.UpdateOptions{}); err != nil {
			t.Fatalf("update the scale to %d as the horizontal-pod-autoscaler: %v", replicas, err)
		}
	}}
)

// trialResult is one trial's row in the table: the zone counts after each
// step, nil where the trial stopped before it.
type trialResult struct {
	name   string
	keeper bool
	method string
	placed map[string]int
	after6 map[string]int
	after3 map[string]int
	// costsAtRollout is how many of the 12 pods carried a cost when
	// `kubectl rollout status` returned.
	costsAtRollout int
}

// skewed says whether the trial ended a step with a zone skew above the
// policy's maxSkew 1.
func (r *trialResult) skewed() bool {
	return (r.after6 != nil && skew(r.after6) > 1) || (r.after3 != nil && skew(r.after3) > 1)
}

func scaleDownKeepsSpread(t *testing.T) {
	type trial struct {
		keeper bool
		method scaleMethod
		n      int
	}
	var trials []trial
	for _, m := range []scaleMethod{kubectlScale, hpaScale} {
		for i := range scaleDownTrials {
			trials = append(trials, trial{keeper: true, method: m, n: i + 1})
		}
	}
	// The control alternates the two methods: to the ReplicaSet
	// controller they are the same scale-down.
	for i := range scaleDownTrials {
		trials = append(trials, trial{keeper: false, method: []scaleMethod{kubectlScale, hpaScale}[i%2], n: i + 1})
	}

	results := make([]trialResult, len(trials))
	var rolling rolloutResult
	// t.Run from goroutines, not t.Parallel: the trials must all run at
	// once, whatever -parallel (GOMAXPROCS, 2 here) allows.
	var wg sync.WaitGroup
	for i, tr := range trials {
		res := &results[i]
		res.keeper, res.method = tr.keeper, tr.method.name
		res.name = fmt.Sprintf("%s, %s, trial %d", map[bool]string{true: "keeper on", false: "control (keeper off)"}[tr.keeper], tr.method.name, tr.n)
		wg.Go(func() {
			t.Run(res.name, func(t *testing.T) { scaleDownTrial(t, tr.keeper, tr.method, res) })
		})
	}
	wg.Go(func() {
		t.Run("keeper on, a rolling update of 9 replicas, maxSurge 3, maxUnavailable 0", func(t *testing.T) { rollingUpdateTrial(t, &rolling) })
	})
	wg.Wait()

	var b strings.Builder
	w := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintf(w, "TRIAL\tKEEPER\tMETHOD\tPLACED\tCOSTS AT ROLLOUT\tAFTER 6\tAFTER 3\tSKEWED\n")
	controls, skewedControls := 0, 0
	for _, r := range results {
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%d/12\t%s\t%s\t%v\n", r.name, map[bool]string{true: "on", false: "off"}[r.keeper], r.method,
			formatCounts(r.placed), r.costsAtRollout, formatCounts(r.after6), formatCounts(r.after3), r.skewed())
		if !r.keeper && r.after3 != nil {
			controls++
			if r.skewed() {
				skewedControls++
			}
		}
	}
	_ = w.Flush()
	t.Logf("pods per zone (%s):\n%s", strings.Join(cluster.zones, "/"), b.String())
	t.Logf("rolling update: placed %s; the old revision at its most skewed %s (%d samples); the new revision at the end %s",
		formatCounts(rolling.placed), formatCounts(rolling.oldWorst), rolling.samples, formatCounts(rolling.final))
	t.Logf("control: %d of %d trials ended skewed", skewedControls, controls)

	if controls == scaleDownTrials && skewedControls < scaleDownTrials/2 {
		t.Errorf("%d of the %d control trials ended skewed, fewer than half: the ReplicaSet controller's own ranking kept the spread "+
			"so often that the keeper's trials show little it does", skewedControls, controls)
	}
}

// scaleDownTrial places a Deployment of 12 replicas 4/4/4, scales it to 6
// and then to 3 with method, and records the zones after each step in res.
// It runs as a person does: the first scale once `kubectl rollout status`
// returns and, with the keeper, the pods carry their costs (the signal
// deletion-cost.md gives); the second once the first is done. With the keeper, every
// step must leave the zones even; the control, whose policy turns the
// keeper off, is judged over all its trials.
func scaleDownTrial(t *testing.T, keeper bool, method scaleMethod, res *trialResult) {
	f := newFramework(t)
	f.createScaleDownPolicy(keeper)
	f.create(makeDeployment("web").Replicas(12).Obj())
	res.placed = f.rolledOut("web")
	if diff := cmp.Diff(evenly(4), res.placed); diff != "" {
		t.Fatalf("the 12 replicas were placed %s, not 4/4/4, before any scale-down (-want +got):\n%s", formatCounts(res.placed), diff)
	}
	if keeper {
		// What a person reads right after the rollout, then the signal
		// deletion-cost.md tells them to wait on.
		res.costsAtRollout = len(f.deletionCosts("web", 12, false).set)
		f.waitForCosts("web")
	}
	from := int32(12)
	for _, step := range []struct {
		replicas int32
		got      *map[string]int
	}{{6, &res.after6}, {3, &res.after3}} {
		// Read, not waited for: what the ReplicaSet controller finds.
		costs := f.deletionCosts("web", from, false)
		if !keeper && len(costs.set) > 0 {
			t.Errorf("before the scale to %d: the control's policy has deletionCost Disabled, yet %d pods carry a deletion cost (%s)", step.replicas, len(costs.set), costs)
		}
		method.scale(t, f.ns, "web", step.replicas)
		// Counted once the pods the scale deletes are gone: `kubectl
		// rollout status` returns before the ReplicaSet controller has
		// deleted them.
		*step.got = f.settle("web", step.replicas)
		if keeper {
			if diff := cmp.Diff(evenly(int(step.replicas)/3), *step.got); diff != "" {
				t.Errorf("%s from %d to %d left %s (%s), not even; the costs at the scale: %s (-want +got):\n%s",
					method.name, from, step.replicas, formatCounts(*step.got), strings.Join(cluster.zones, "/"), costs, diff)
			}
		}
		from = step.replicas
	}
}

// waitForCosts waits, as deletion-cost.md tells a person to, until every
// pod of Deployment name carries a deletion cost: `kubectl wait` on the
// annotation.
func (f *framework) waitForCosts(name string) {
	f.t.Helper()
	ctx, cancel := context.WithTimeout(f.t.Context(), costTimeout)
	defer cancel()
	if _, stderr, err := kubectl(ctx, nil, "wait", "pods", "-l", "app="+name, "-n", f.ns,
		`--for=jsonpath={.metadata.annotations.controller\.kubernetes\.io/pod-deletion-cost}`, "--timeout="+costTimeout.String()); err != nil {
		f.t.Fatalf("kubectl wait for the pods' %s: %v\n%s", spread.DeletionCostAnnotation, err, stderr)
	}
}

// rolledOut runs `kubectl rollout status` on Deployment name, as a person
// waits before the next scale, and returns the zones of its pods that are
// bound and not terminating then.
func (f *framework) rolledOut(name string) map[string]int {
	f.t.Helper()
	ctx, cancel := context.WithTimeout(f.t.Context(), settleTimeout)
	defer cancel()
	if _, stderr, err := kubectl(ctx, nil, "rollout", "status", "deployment/"+name, "-n", f.ns, "--timeout="+settleTimeout.String()); err != nil {
		f.t.Fatalf("kubectl rollout status deployment/%s: %v\n%s", name, err, stderr)
	}
	pods, err := f.boundPods(f.t.Context(), labels.SelectorFromSet(labels.Set{"app": name}))
	if err != nil {
		f.t.Fatal(err)
	}
	counts, err := countByZone(zoneOfNode(), pods)
	if err != nil {
		f.t.Fatal(err)
	}
	return counts
}

// rolloutResult is the rolling update's line in the log.
type rolloutResult struct {
	placed   map[string]int
	oldWorst map[string]int
	samples  int
	final    map[string]int
}

// rollingUpdateTrial rolls a Deployment of 9 replicas placed 3/3/3 to a
// new template, 3 pods at a time. The new revision is placed by its own
// constraints (the derived selector carries its pod-template-hash); the
// old one loses 3 pods at each step, which the keeper's costs take one per
// zone: at every sample the old revision's zones differ by at most 1.
func rollingUpdateTrial(t *testing.T, res *rolloutResult) {
	f := newFramework(t)
	f.createScaleDownPolicy(true)
	deploy := makeDeployment("web").Replicas(9).RollingUpdate(3, 0).Obj()
	f.create(deploy)
	res.placed = f.rolledOut("web")
	if diff := cmp.Diff(evenly(3), res.placed); diff != "" {
		t.Fatalf("the 9 replicas were placed %s, not 3/3/3, before the rollout (-want +got):\n%s", formatCounts(res.placed), diff)
	}
	app := labels.SelectorFromSet(labels.Set{"app": "web"})
	before, err := f.boundPods(t.Context(), app)
	if err != nil || len(before) == 0 {
		t.Fatalf("list the first revision's pods: %v (%d pods)", err, len(before))
	}
	oldHash := before[0].Labels[appsv1.DefaultDeploymentUniqueLabelKey]
	f.waitForCosts("web")

	patch := `{"spec":{"template":{"metadata":{"annotations":{"e2e.spreadguard.io/revision":"2"}}}}}`
	if err := k8s.Patch(t.Context(), deploy, client.RawPatch(types.StrategicMergePatchType, []byte(patch))); err != nil {
		t.Fatalf("update the Deployment's template: %v", err)
	}
	err = pollEvery(t.Context(), trialPoll, settleTimeout, func(ctx context.Context) error {
		bound, err := f.boundPods(ctx, app)
		if err != nil {
			return err
		}
		var old []v1.Pod
		for _, p := range bound {
			if p.Labels[appsv1.DefaultDeploymentUniqueLabelKey] == oldHash {
				old = append(old, p)
			}
		}
		if len(old) > 0 {
			counts, err := countByZone(zoneOfNode(), old)
			if err != nil {
				return err
			}
			res.samples++
			if res.oldWorst == nil || skew(counts) > skew(res.oldWorst) {
				res.oldWorst = counts
			}
			return fmt.Errorf("%d pods of the old revision %s are left", len(old), oldHash)
		}
		return f.deploymentDone(ctx, "web", 9)
	})
	if err != nil {
		t.Fatalf("the rollout did not complete in %v: %v", settleTimeout, err)
	}
	if res.oldWorst != nil && skew(res.oldWorst) > 1 {
		t.Errorf("during the rollout the old revision was left %s (%s), skew %d > maxSkew 1: its ReplicaSet's scale-downs did not take the pods the costs put first",
			formatCounts(res.oldWorst), strings.Join(cluster.zones, "/"), skew(res.oldWorst))
	}
	res.final = f.settle("web", 9)
	if diff := cmp.Diff(evenly(3), res.final); diff != "" {
		t.Errorf("after the rollout the new revision is placed %s, not 3/3/3 (-want +got):\n%s", formatCounts(res.final), diff)
	}
}

// createScaleDownPolicy creates the trial's policy "zones", a zone spread of
// maxSkew 1 that DoNotSchedule with the Deny action, and waits until the
// webhook has it. Without the keeper it carries spec.deletionCost: Disabled,
// written as unstructured data so that a CRD without the field prunes it
// (with a warning) rather than the suite failing to build.
func (f *framework) createScaleDownPolicy(keeper bool) {
	f.t.Helper()
	p := policytest.MakeSpreadPolicy().Name("zones").Constraint(hardZone()).Action(v1alpha1.ActionDeny).Obj()
	if keeper {
		f.create(p)
	} else {
		obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(p)
		if err != nil {
			f.t.Fatal(err)
		}
		u := &unstructured.Unstructured{Object: obj}
		if err := unstructured.SetNestedField(u.Object, "Disabled", "spec", "deletionCost"); err != nil {
			f.t.Fatal(err)
		}
		f.create(u)
		if _, found, _ := unstructured.NestedString(u.Object, "spec", "deletionCost"); !found {
			f.t.Logf("the SpreadPolicy CRD pruned spec.deletionCost: this spreadguard has no keeper to turn off")
		}
	}
	f.waitPolicyServed("zones")
}

// settle waits until Deployment name has rolled out want replicas, all
// Ready and available, and none of its other pods is left, not even
// terminating; it returns the pods per zone.
func (f *framework) settle(name string, want int32) map[string]int {
	f.t.Helper()
	var counts map[string]int
	err := pollEvery(f.t.Context(), trialPoll, settleTimeout, func(ctx context.Context) error {
		if err := f.deploymentDone(ctx, name, want); err != nil {
			return err
		}
		var pods v1.PodList
		if err := k8s.List(ctx, &pods, client.InNamespace(f.ns), client.MatchingLabels{"app": name}); err != nil {
			return err
		}
		running := 0
		for _, p := range pods.Items {
			if p.DeletionTimestamp == nil && p.Spec.NodeName != "" && p.Status.Phase == v1.PodRunning {
				running++
			}
		}
		if len(pods.Items) != int(want) || running != int(want) {
			return fmt.Errorf("%d pods, %d of them bound, Running and not terminating; want %d and nothing else", len(pods.Items), running, want)
		}
		var err error
		counts, err = countByZone(zoneOfNode(), pods.Items)
		return err
	})
	if err != nil {
		f.t.Fatalf("Deployment %s at %d replicas: still not settled after %v: %v", name, want, settleTimeout, err)
	}
	return counts
}

// deploymentDone says whether the deployment controller has seen the
// latest spec and every one of its want replicas is updated and available.
func (f *framework) deploymentDone(ctx context.Context, name string, want int32) error {
	var d appsv1.Deployment
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: f.ns, Name: name}, &d); err != nil {
		return err
	}
	s := d.Status
	if s.ObservedGeneration < d.Generation || s.Replicas != want || s.UpdatedReplicas != want || s.ReadyReplicas != want || s.AvailableReplicas != want {
		return fmt.Errorf("deployment status: generation %d observed %d, replicas %d, updated %d, ready %d, available %d; want %d",
			d.Generation, s.ObservedGeneration, s.Replicas, s.UpdatedReplicas, s.ReadyReplicas, s.AvailableReplicas, want)
	}
	return nil
}

// costs are the deletion costs of a trial's running pods.
type costs struct {
	// set maps a pod to its cost; missing lists the pods without one.
	set     map[string]string
	missing []string
	// byZone lists the costs per zone, for the messages.
	byZone map[string][]string
}

func (c costs) String() string {
	if len(c.set) == 0 {
		return "no pod carries one"
	}
	var parts []string
	for _, z := range cluster.zones {
		parts = append(parts, fmt.Sprintf("%s %v", z, c.byZone[z]))
	}
	if len(c.missing) > 0 {
		parts = append(parts, fmt.Sprintf("none on %s", strings.Join(c.missing, ", ")))
	}
	return strings.Join(parts, "; ")
}

// deletionCosts reads the deletion costs of the want running pods of
// Deployment name; with wait, it waits up to costTimeout for every one of
// them to carry one, and returns what it saw last either way.
func (f *framework) deletionCosts(name string, want int32, wait bool) costs {
	f.t.Helper()
	var last costs
	read := func(ctx context.Context) error {
		pods, err := f.boundPods(ctx, labels.SelectorFromSet(labels.Set{"app": name}))
		if err != nil {
			return err
		}
		zoneOf := zoneOfNode()
		c := costs{set: map[string]string{}, byZone: map[string][]string{}}
		for _, p := range pods {
			v, ok := p.Annotations[spread.DeletionCostAnnotation]
			if !ok {
				c.missing = append(c.missing, p.Name)
				continue
			}
			c.set[p.Name] = v
			c.byZone[zoneOf[p.Spec.NodeName]] = append(c.byZone[zoneOf[p.Spec.NodeName]], v)
		}
		for _, vs := range c.byZone {
			slices.SortFunc(vs, func(a, b string) int { return atoi(a) - atoi(b) })
		}
		prev := last
		last = c
		if len(pods) != int(want) {
			return fmt.Errorf("%d running pods, want %d", len(pods), want)
		}
		if len(c.missing) > 0 {
			return fmt.Errorf("%d of %d pods without a cost", len(c.missing), want)
		}
		// Every pod carrying a cost is not enough: a pod's first cost
		// moves as its neighbours arrive, and the keeper's writes queue
		// behind its cluster-wide rate. The costs are taken as written
		// once two reads a poll apart agree.
		if !maps.Equal(prev.set, c.set) {
			return fmt.Errorf("the costs moved since the last read")
		}
		return nil
	}
	if !wait {
		if err := read(f.t.Context()); err != nil && last.set == nil {
			f.t.Fatalf("read the deletion costs: %v", err)
		}
		return last
	}
	if err := pollEvery(f.t.Context(), trialPoll, costTimeout, read); err != nil && last.set == nil {
		f.t.Fatalf("read the deletion costs: %v", err)
	}
	return last
}

// atoi orders costs that are not numbers first, as the ReplicaSet
// controller would not read them.
func atoi(s string) int {
	n, err := strconv.Atoi(s)
	if err != nil {
		return -1 << 31
	}
	return n
}

// zoneOfNode maps the suite's schedulable nodes to their zones, as found
// before the tests: the trials neither add nor cordon nodes.
func zoneOfNode() map[string]string {
	out := map[string]string{}
	for z, nodes := range cluster.nodesByZone {
		for _, n := range nodes {
			out[n] = z
		}
	}
	return out
}

// formatCounts writes zone counts in the order of cluster.zones, as
// "2/2/2"; "-" for a step the trial did not reach.
func formatCounts(counts map[string]int) string {
	if counts == nil {
		return "-"
	}
	parts := make([]string, 0, len(counts))
	for _, z := range cluster.zones {
		parts = append(parts, strconv.Itoa(counts[z]))
	}
	if extra := len(counts) - len(cluster.zones); extra > 0 {
		others := slices.Sorted(maps.Keys(counts))
		parts = append(parts, fmt.Sprintf("(+%d zones: %v)", extra, others))
	}
	return strings.Join(parts, "/")
}
