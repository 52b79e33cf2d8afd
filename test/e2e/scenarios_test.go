//go:build e2e

package e2e

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/spreadguard/spreadguard/pkg/apis/spreadguard/v1alpha1"
	"github.com/spreadguard/spreadguard/pkg/policy/policytest"
	"github.com/spreadguard/spreadguard/pkg/spread/spreadtest"
)

// TestE2E runs the scenarios one after the other: some cordon nodes or stop
// the webhook, which would disturb any test running beside them.
func TestE2E(t *testing.T) {
	scenarios := []struct {
		name string
		run  func(t *testing.T)
	}{
		{"a Deployment of 9 replicas in 3 zones gets the namespace's constraints and the scheduler places 3/3/3", deploymentIsSpread},
		{"a StatefulSet of 9 replicas gets the namespace's constraints and the scheduler places 3/3/3", statefulSetIsSpread},
		{"a rolling update keeps each revision spread across the zones", rollingUpdateKeepsRevisionsSpread},
		{"with one zone cordoned, a pod whose hard zone constraint ignores taints is denied naming the zone, while injected constraints (Honor) still schedule", cordonedZone},
		{"with the Warn action, an unsatisfiable pod is stored, the client sees the warning and the scheduler leaves it Pending", warnAction},
		{"with the webhook stopped, pods are still created (failurePolicy Ignore), and kube-system is never sent to it", webhookOutage},
		{"a SpreadPolicy created, changed and deleted takes effect for the next pod within seconds", policyLifecycle},
		{"the chart's ClusterSpreadPolicy applies to a namespace without a policy of its own", clusterDefaultPolicy},
		{"kubectl-spread explain of a Deployment placed 3/3/3 counts that placement and agrees with the webhook on the next pod", explainAgrees},
		{"the serving certificate renewed on disk under 20 creates/s: none fails or misses the webhook, and the new certificate is served without a restart", certificateRenewedUnderLoad},
		{"one of two webhook replicas killed, then one stopped, under 20 creates/s: none fails, none misses the webhook beyond the creates in flight at the kill, none at the stop", replicaStoppedMidBurst},
		{"with cert-manager, the serving Certificate becomes Ready, cainjector fills both webhook configurations' caBundle with its CA, and the first pod goes through that chain", certManagerChain},
		{"cert-manager renews the serving certificate under 20 creates/s with failurePolicy Fail: no create fails, and every replica presents the new serial without a restart", servingRenewedByCertManager},
		{"cert-manager renews the CA with a new key, then the serving certificate, under 20 creates/s with failurePolicy Fail: no create fails", caRenewedByCertManager},
		{"kube-apiserver restarted under the webhook: its informers resync, and the verdict on pods created afterwards matches kubectl-spread check on a dump", apiServerRestarted},
	}
	for _, s := range scenarios {
		t.Run(s.name, s.run)
	}
}

const (
	// policyChangeTimeout bounds how long a policy change may take to reach
	// the webhook's cache.
	policyChangeTimeout = 10 * time.Second
	// placeTimeout bounds the controller, the scheduler and the nodes.
	placeTimeout = 2 * time.Minute
)

// zonePolicy is the namespace policy most scenarios use: a hard zone spread
// and a soft node spread.
func zonePolicy(name string) *policytest.SpreadPolicyWrapper {
	return policytest.MakeSpreadPolicy().Name(name).Constraint(hardZone(), softHost(2))
}

// waitPolicyServed waits until the webhook serves the namespace's policy
// name: a probe pod, selected by a Service of its own, gets name in its
// policy annotation on a dry run, so the pods created next get its
// constraints rather than the cluster's default. A denial of a pod no node
// can take would not tell the two apart, as the chart's cluster default
// denies too.
func (f *framework) waitPolicyServed(name string) {
	f.t.Helper()
	svc := service(spreadtest.MakeService().Name("policy-probe").Selector("e2e-probe", "true"))
	svc.Namespace = f.ns
	if err := k8s.Create(f.t.Context(), svc); err != nil && !apierrors.IsAlreadyExists(err) {
		f.t.Fatalf("create Service %s: %v", svc.Name, err)
	}
	probe := pod(spreadtest.MakePod().Name("policy-probe").Label("e2e-probe", "true"))
	want := f.ns + "/" + name
	f.eventually(policyChangeTimeout, fmt.Sprintf("a pod of the namespace gets policy %s (dry run)", want), func(ctx context.Context) error {
		p, err := f.dryRunCreate(ctx, k8s, probe)
		if err != nil {
			return err
		}
		if got := p.Annotations[policyAnnotation]; got != want {
			return fmt.Errorf("policy annotation %q, want %q", got, want)
		}
		return nil
	})
}

// hardZonePolicy is the policy "zones" with the one constraint hardZone,
// whose verdicts are action.
func hardZonePolicy(action v1alpha1.ValidationAction) *v1alpha1.SpreadPolicy {
	return policytest.MakeSpreadPolicy().Name("zones").Constraint(hardZone()).Action(action).Obj()
}

// hardZone is a DoNotSchedule zone constraint of maxSkew 1.
func hardZone() v1alpha1.Constraint {
	return policytest.MakeConstraint().MaxSkew(1).TopologyKey(zoneKey).DoNotSchedule().Obj()
}

// softHost is a ScheduleAnyway node constraint of maxSkew skew.
func softHost(skew int32) v1alpha1.Constraint {
	return policytest.MakeConstraint().MaxSkew(skew).TopologyKey(hostKey).ScheduleAnyway().Obj()
}

// evenly is 9 pods over the cluster's three zones.
func evenly(perZone int) map[string]int {
	want := map[string]int{}
	for _, z := range cluster.zones {
		want[z] = perZone
	}
	return want
}

func deploymentIsSpread(t *testing.T) {
	f := newFramework(t)
	policy := zonePolicy("zones").Obj()
	f.create(policy)
	f.waitPolicyServed(policy.Name)
	f.create(makeDeployment("web").Replicas(9).Obj())

	pods := f.waitRunning(labels.SelectorFromSet(labels.Set{"app": "web"}), 9, placeTimeout)
	for _, p := range pods {
		rs := controllerOf(t, &p, "ReplicaSet", &appsv1.ReplicaSet{}).(*appsv1.ReplicaSet)
		f.expectInjected(&p, f.ns+"/"+policy.Name, injected(policy.Spec.Constraints, rs.Spec.Selector))
	}
	f.expectZones(pods, evenly(3))
}

func statefulSetIsSpread(t *testing.T) {
	f := newFramework(t)
	policy := zonePolicy("zones").Obj()
	f.create(policy)
	f.waitPolicyServed(policy.Name)
	// The governing Service selects the same pods, so the derived selector
	// is the union of two equal selectors: app=db once.
	f.create(service(spreadtest.MakeService().Name("db").Selector("app", "db")))
	sts := makeStatefulSet("db").Replicas(9).Obj()
	f.create(sts)

	pods := f.waitRunning(labels.SelectorFromSet(labels.Set{"app": "db"}), 9, placeTimeout)
	want := injected(policy.Spec.Constraints, &metav1.LabelSelector{MatchLabels: map[string]string{"app": "db"}})
	for _, p := range pods {
		f.expectInjected(&p, f.ns+"/"+policy.Name, want)
	}
	f.expectZones(pods, evenly(3))
}

func rollingUpdateKeepsRevisionsSpread(t *testing.T) {
	f := newFramework(t)
	policy := zonePolicy("zones").Obj()
	f.create(policy)
	f.waitPolicyServed(policy.Name)
	deploy := makeDeployment("web").Replicas(9).RollingUpdate(3, 0).Obj()
	f.create(deploy)
	app := labels.SelectorFromSet(labels.Set{"app": "web"})
	first := f.waitRunning(app, 9, placeTimeout)
	f.expectZones(first, evenly(3))
	oldHash := first[0].Labels[appsv1.DefaultDeploymentUniqueLabelKey]

	patch := `{"spec":{"template":{"metadata":{"annotations":{"e2e.spreadguard.io/revision":"2"}}}}}`
	if err := k8s.Patch(t.Context(), deploy, client.RawPatch(types.StrategicMergePatchType, []byte(patch))); err != nil {
		t.Fatalf("update the Deployment's template: %v", err)
	}

	// While the rollout runs, the new revision's bound pods never differ by
	// more than maxSkew between zones: each was placed under a constraint
	// that counts only its own revision (the selector carries the
	// pod-template-hash) and none of them is removed during a rollout.
	var newHash string
	samples := 0
	f.eventually(placeTimeout, "the rollout completes with the new revision spread", func(ctx context.Context) error {
		bound, err := f.boundPods(ctx, app)
		if err != nil {
			return err
		}
		byHash := map[string][]v1.Pod{}
		for _, p := range bound {
			h := p.Labels[appsv1.DefaultDeploymentUniqueLabelKey]
			byHash[h] = append(byHash[h], p)
		}
		for h, pods := range byHash {
			if h == oldHash {
				continue
			}
			newHash = h
			counts, err := zoneCounts(ctx, pods)
			if err != nil {
				return err
			}
			samples++
			if skew(counts) > 1 {
				t.Errorf("during the rollout, revision %s was placed %v: skew %d > maxSkew 1", h, counts, skew(counts))
			}
		}
		if len(byHash[oldHash]) > 0 || newHash == "" || len(byHash[newHash]) != 9 {
			return fmt.Errorf("old revision %s has %d pods, new revision %q has %d", oldHash, len(byHash[oldHash]), newHash, len(byHash[newHash]))
		}
		return nil
	})
	t.Logf("checked the new revision's spread in %d samples during the rollout", samples)

	latest := f.waitRunning(labels.SelectorFromSet(labels.Set{"app": "web", appsv1.DefaultDeploymentUniqueLabelKey: newHash}), 9, placeTimeout)
	for _, p := range latest {
		rs := controllerOf(t, &p, "ReplicaSet", &appsv1.ReplicaSet{}).(*appsv1.ReplicaSet)
		if got := rs.Spec.Selector.MatchLabels[appsv1.DefaultDeploymentUniqueLabelKey]; got != newHash {
			t.Fatalf("pod %s: its ReplicaSet selects %s=%q, want the new revision %q", p.Name, appsv1.DefaultDeploymentUniqueLabelKey, got, newHash)
		}
		f.expectInjected(&p, f.ns+"/"+policy.Name, injected(policy.Spec.Constraints, rs.Spec.Selector))
	}
	f.expectZones(latest, evenly(3))
}

func cordonedZone(t *testing.T) {
	f := newFramework(t)
	zone := cordonZone(t)

	policy := hardZonePolicy(v1alpha1.ActionDeny)
	f.create(policy)
	f.waitPolicyServed(policy.Name)
	f.create(makeDeployment("web").Replicas(4).Obj())

	// Injected constraints honour taints: the cordoned zone is no domain,
	// so 4 pods go 2/2 to the others.
	pods := f.waitRunning(labels.SelectorFromSet(labels.Set{"app": "web"}), 4, placeTimeout)
	want := evenly(2)
	want[zone] = 0
	f.expectZones(pods, want)
	for _, p := range pods {
		if c := constraintFor(&p, zoneKey); c == nil || c.NodeTaintsPolicy == nil || *c.NodeTaintsPolicy != v1.NodeInclusionPolicyHonor {
			t.Fatalf("pod %s: want an injected %s constraint with nodeTaintsPolicy Honor, got %+v", p.Name, zoneKey, p.Spec.TopologySpreadConstraints)
		}
	}

	// The same spread, counted with nodeTaintsPolicy Ignore, keeps the
	// cordoned zone as a domain with 0 pods: the global minimum is 0 and
	// every schedulable zone already has 2 > maxSkew 1.
	lone := pod(spreadtest.MakePod().Name("lone").Label("app", "web").
		SpreadConstraint(spreadtest.Constraint(1, zoneKey).DoNotSchedule().MatchLabel("app", "web").
			NodeTaintsPolicy(v1.NodeInclusionPolicyIgnore).Obj()))
	f.eventually(policyChangeTimeout, "the webhook counts the 4 pods and denies the pod (dry run)", func(ctx context.Context) error {
		_, err := f.dryRunCreate(ctx, k8s, lone)
		if !deniedByWebhook(err) {
			return fmt.Errorf("want a denial, got %v", err)
		}
		return nil
	})
	lone.Namespace = f.ns
	err := k8s.Create(t.Context(), lone)
	if !deniedByWebhook(err) {
		t.Fatalf("create pod %s: want it denied (403), got %v", lone.Name, err)
	}
	for _, s := range []string{zone, zoneKey} {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("the denial does not name %q:\n%v", s, err)
		}
	}
	t.Logf("denied: %v", err)
	if err := k8s.Get(t.Context(), client.ObjectKeyFromObject(lone), &v1.Pod{}); !apierrors.IsNotFound(err) {
		t.Errorf("the denied pod was stored anyway (get: %v)", err)
	}
}

func warnAction(t *testing.T) {
	f := newFramework(t)
	zone := cluster.zones[0]
	policy := hardZonePolicy(v1alpha1.ActionWarn)
	f.create(policy)
	// Two pods in the first zone; bare pods get no constraints, as nothing
	// selects them.
	for _, name := range []string{"anchor-1", "anchor-2"} {
		f.create(pod(spreadtest.MakePod().Name(name).Label("app", "w").NodeSelector(zoneKey, zone)))
	}
	f.waitRunning(labels.SelectorFromSet(labels.Set{"app": "w"}), 2, placeTimeout)

	// Pinned to the first zone but counting all three (nodeAffinityPolicy
	// Ignore): 2 + 1 - 0 > maxSkew 1 on every node it may use.
	skewed := pod(spreadtest.MakePod().Name("skewed").Label("app", "w").NodeSelector(zoneKey, zone).
		SpreadConstraint(spreadtest.Constraint(1, zoneKey).DoNotSchedule().MatchLabel("app", "w").
			NodeAffinityPolicy(v1.NodeInclusionPolicyIgnore).Obj()))
	c, warnings := warningClient(t)
	f.eventually(policyChangeTimeout, "the webhook counts the 2 pods and warns (dry run)", func(ctx context.Context) error {
		warnings.take()
		if _, err := f.dryRunCreate(ctx, c, skewed); err != nil {
			return err
		}
		if w := spreadWarnings(warnings.take()); len(w) == 0 {
			return errors.New("no warning about the spread")
		}
		return nil
	})
	skewed.Namespace = f.ns
	if err := c.Create(t.Context(), skewed); err != nil {
		t.Fatalf("create pod %s: want it admitted with a warning, got %v", skewed.Name, err)
	}
	got := spreadWarnings(warnings.take())
	if len(got) == 0 {
		t.Fatalf("create pod %s: the client saw no warning naming %s", skewed.Name, zoneKey)
	}
	t.Logf("warned: %q", got)
	if err := k8s.Get(t.Context(), client.ObjectKeyFromObject(skewed), &v1.Pod{}); err != nil {
		t.Fatalf("the warned pod was not stored: %v", err)
	}
	f.eventually(placeTimeout, "the scheduler reports the pod Unschedulable", func(ctx context.Context) error {
		var p v1.Pod
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(skewed), &p); err != nil {
			return err
		}
		if p.Spec.NodeName != "" {
			t.Fatalf("the scheduler placed pod %s on %s, which the webhook said was impossible", p.Name, p.Spec.NodeName)
		}
		for _, cond := range p.Status.Conditions {
			if cond.Type == v1.PodScheduled && cond.Status == v1.ConditionFalse && cond.Reason == v1.PodReasonUnschedulable {
				return nil
			}
		}
		return fmt.Errorf("conditions %+v", p.Status.Conditions)
	})
}

func spreadWarnings(all []string) []string {
	var out []string
	for _, w := range all {
		if strings.Contains(w, zoneKey) {
			out = append(out, w)
		}
	}
	return out
}

func webhookOutage(t *testing.T) {
	f := newFramework(t)
	for _, w := range append(cluster.mutating, cluster.validating...) {
		if w.failurePolicy != admissionregistrationv1.Ignore {
			t.Errorf("webhook %s in %s: failurePolicy %q, want Ignore", w.name, w.configuration, w.failurePolicy)
		}
	}

	// kube-system: no webhook's namespaceSelector selects it, so the API
	// server never calls spreadguard for its pods, up or down.
	var kubeSystem v1.Namespace
	if err := k8s.Get(t.Context(), client.ObjectKey{Name: metav1.NamespaceSystem}, &kubeSystem); err != nil {
		t.Fatal(err)
	}
	for _, w := range append(cluster.mutating, cluster.validating...) {
		sel, err := metav1.LabelSelectorAsSelector(w.namespaceSelector)
		if err != nil {
			t.Fatalf("webhook %s: namespaceSelector: %v", w.name, err)
		}
		if w.namespaceSelector == nil || sel.Matches(labels.Set(kubeSystem.Labels)) {
			t.Errorf("webhook %s in %s: namespaceSelector %v selects kube-system (labels %v)", w.name, w.configuration, w.namespaceSelector, kubeSystem.Labels)
		}
	}
	f.create(hardZonePolicy(v1alpha1.ActionDeny))
	f.create(service(spreadtest.MakeService().Name("probe").Selector("e2e-probe", "true")))
	f.eventually(policyChangeTimeout, "the webhook is serving", f.serving)
	// A pod no node can take (no node has the topology key) is denied here
	// and admitted untouched in kube-system.
	impossible := impossiblePod(f.ns)
	if _, err := f.dryRunCreate(t.Context(), k8s, impossible); !deniedByWebhook(err) {
		t.Errorf("pod %s in %s: want it denied, got %v", impossible.Name, f.ns, err)
	}
	inSystem := impossible.DeepCopy()
	inSystem.Namespace = metav1.NamespaceSystem
	if err := k8s.Create(t.Context(), inSystem, client.DryRunAll); err != nil {
		t.Errorf("pod %s in kube-system: want it admitted, got %v", inSystem.Name, err)
	} else if _, ok := inSystem.Annotations[policyAnnotation]; ok {
		t.Errorf("pod %s in kube-system was mutated: %v", inSystem.Name, inSystem.Annotations)
	}

	if os.Getenv(envStopCmd) == "" || os.Getenv(envStartCmd) == "" {
		t.Logf("%s/%s unset: pointing a copy of spreadguard's webhook configurations at an unreachable address", envStopCmd, envStartCmd)
		f.unreachableCopies()
	} else {
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			if err := runHook(ctx, t, envStartCmd); err != nil {
				t.Error(err)
				return
			}
			if err := poll(ctx, time.Minute, f.serving); err != nil {
				t.Errorf("the webhook did not serve again within a minute of %s: %v", envStartCmd, err)
			}
		})
		if err := runHook(t.Context(), t, envStopCmd); err != nil {
			t.Fatal(err)
		}
		f.eventually(30*time.Second, "the webhook is down (a dry-run pod is admitted unmutated)", func(ctx context.Context) error {
			if f.serving(ctx) == nil {
				return errors.New("the webhook still mutates pods")
			}
			return nil
		})
	}

	start := time.Now()
	f.create(makeDeployment("web").Replicas(3).Obj())
	pods := f.waitRunning(labels.SelectorFromSet(labels.Set{"app": "web"}), 3, placeTimeout)
	t.Logf("3 pods created and running %v after the Deployment, with the webhook unreachable", time.Since(start).Round(time.Millisecond))
	if os.Getenv(envStopCmd) != "" {
		for _, p := range pods {
			if len(p.Spec.TopologySpreadConstraints) != 0 || p.Annotations[policyAnnotation] != "" {
				t.Errorf("pod %s was mutated while the webhook was stopped: %v %v", p.Name, p.Annotations, p.Spec.TopologySpreadConstraints)
			}
		}
	}
}

// serving succeeds when the mutating webhook answers: a dry-run pod
// selected by the namespace's "probe" Service gets the namespace's policy.
func (f *framework) serving(ctx context.Context) error {
	p, err := f.dryRunCreate(ctx, k8s, pod(spreadtest.MakePod().Name("probe").Label("e2e-probe", "true")))
	if err != nil {
		return err
	}
	if p.Annotations[policyAnnotation] == "" {
		return errors.New("the probe pod was not mutated")
	}
	return nil
}

// unreachableCopies creates copies of spreadguard's pod webhooks that call
// an address where nothing listens and that only see the test's namespace;
// with failurePolicy Ignore the API server must admit the pods anyway.
func (f *framework) unreachableCopies() {
	f.t.Helper()
	f.copiesAt("unreachable", "https://127.0.0.1:1")
}

// hideFromOwnWebhooks keeps spreadguard's own pod webhooks from calling for
// the test's namespace until the test ends: their namespaceSelector gains
// kubernetes.io/metadata.name NotIn (namespace). The namespace stays one the
// server serves (labelling it spreadguard.io/ignore=true would also make
// every server skip its pods, policy.Scope), so that copies of the webhooks
// (copiesAt) are its only path to a server.
func (f *framework) hideFromOwnWebhooks() {
	t := f.t
	t.Helper()
	hide := metav1.LabelSelectorRequirement{Key: "kubernetes.io/metadata.name", Operator: metav1.LabelSelectorOpNotIn, Values: []string{f.ns}}
	// edit applies change to the namespaceSelector of each of
	// spreadguard's pod webhooks, again on a conflict.
	edit := func(ctx context.Context, change func(*metav1.LabelSelector) *metav1.LabelSelector) error {
		for i, nw := range append(slices.Clone(cluster.mutating), cluster.validating...) {
			err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
				var obj client.Object
				var selectors []**metav1.LabelSelector
				if i < len(cluster.mutating) {
					c := &admissionregistrationv1.MutatingWebhookConfiguration{}
					if err := k8s.Get(ctx, client.ObjectKey{Name: nw.configuration}, c); err != nil {
						return err
					}
					for j := range c.Webhooks {
						if c.Webhooks[j].Name == nw.name {
							selectors = append(selectors, &c.Webhooks[j].NamespaceSelector)
						}
					}
					obj = c
				} else {
					c := &admissionregistrationv1.ValidatingWebhookConfiguration{}
					if err := k8s.Get(ctx, client.ObjectKey{Name: nw.configuration}, c); err != nil {
						return err
					}
					for j := range c.Webhooks {
						if c.Webhooks[j].Name == nw.name {
							selectors = append(selectors, &c.Webhooks[j].NamespaceSelector)
						}
					}
					obj = c
				}
				for _, s := range selectors {
					*s = change(*s)
				}
				return k8s.Update(ctx, obj)
			})
			if err != nil {
				return fmt.Errorf("namespaceSelector of webhook %s in %s: %w", nw.name, nw.configuration, err)
			}
		}
		return nil
	}
	without := func(s *metav1.LabelSelector) *metav1.LabelSelector {
		if s == nil {
			return nil
		}
		s.MatchExpressions = slices.DeleteFunc(s.MatchExpressions, func(r metav1.LabelSelectorRequirement) bool {
			return r.Key == hide.Key && r.Operator == hide.Operator && slices.Equal(r.Values, hide.Values)
		})
		return s
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := edit(ctx, without); err != nil {
			t.Errorf("show namespace %s to spreadguard's webhooks again: %v", f.ns, err)
		}
	})
	if err := edit(t.Context(), func(s *metav1.LabelSelector) *metav1.LabelSelector {
		if s == nil {
			s = &metav1.LabelSelector{}
		}
		s = without(s)
		s.MatchExpressions = append(s.MatchExpressions, hide)
		return s
	}); err != nil {
		t.Fatalf("hide namespace %s from spreadguard's webhooks: %v", f.ns, err)
	}
}

// copiesAt creates copies of spreadguard's pod webhooks, named with prefix,
// that call base (with the same paths and CA bundle) and only see the test's
// namespace.
func (f *framework) copiesAt(prefix, base string) {
	t := f.t
	t.Helper()
	only := &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": f.ns}}
	name := "spreadguard-e2e-" + prefix + "-" + f.ns
	ctx := t.Context()

	var mutating admissionregistrationv1.MutatingWebhookConfiguration
	var validating admissionregistrationv1.ValidatingWebhookConfiguration
	for _, nw := range cluster.mutating {
		var src admissionregistrationv1.MutatingWebhookConfiguration
		if err := k8s.Get(ctx, client.ObjectKey{Name: nw.configuration}, &src); err != nil {
			t.Fatal(err)
		}
		for _, w := range src.Webhooks {
			if w.Name == nw.name {
				w.Name = prefix + "-" + w.Name
				w.ClientConfig = admissionregistrationv1.WebhookClientConfig{URL: new(base + mutatePodPath), CABundle: w.ClientConfig.CABundle}
				w.NamespaceSelector, w.ObjectSelector = only, nil
				mutating.Webhooks = append(mutating.Webhooks, w)
			}
		}
	}
	for _, nw := range cluster.validating {
		var src admissionregistrationv1.ValidatingWebhookConfiguration
		if err := k8s.Get(ctx, client.ObjectKey{Name: nw.configuration}, &src); err != nil {
			t.Fatal(err)
		}
		for _, w := range src.Webhooks {
			if w.Name == nw.name {
				w.Name = prefix + "-" + w.Name
				w.ClientConfig = admissionregistrationv1.WebhookClientConfig{URL: new(base + validatePodPath), CABundle: w.ClientConfig.CABundle}
				w.NamespaceSelector, w.ObjectSelector = only, nil
				validating.Webhooks = append(validating.Webhooks, w)
			}
		}
	}
	mutating.Name, validating.Name = name, name
	for _, obj := range []client.Object{&mutating, &validating} {
		if err := k8s.Create(ctx, obj); err != nil {
			t.Fatalf("create %T %s: %v", obj, name, err)
		}
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			if err := k8s.Delete(ctx, obj); err != nil && !apierrors.IsNotFound(err) {
				t.Errorf("delete %T %s: %v", obj, name, err)
			}
		})
	}
}

func policyLifecycle(t *testing.T) {
	f := newFramework(t)
	f.create(service(spreadtest.MakeService().Name("probe").Selector("e2e-probe", "true")))
	probe := pod(spreadtest.MakePod().Name("probe").Label("e2e-probe", "true"))
	selector := &metav1.LabelSelector{MatchLabels: map[string]string{"e2e-probe": "true"}}
	name := f.ns + "/live"

	// nextPod waits until a new pod gets want, and says how long it took.
	nextPod := func(what string, wantPolicy func(string) error, want []v1.TopologySpreadConstraint) {
		t.Helper()
		start := time.Now()
		var last *v1.Pod
		f.eventually(policyChangeTimeout, what, func(ctx context.Context) error {
			p, err := f.dryRunCreate(ctx, k8s, probe)
			if err != nil {
				return err
			}
			last = p
			if err := wantPolicy(p.Annotations[policyAnnotation]); err != nil {
				return err
			}
			if want != nil {
				if diff := cmp.Diff(sortedConstraints(want), sortedConstraints(p.Spec.TopologySpreadConstraints)); diff != "" {
					return fmt.Errorf("constraints (-want +got):\n%s", diff)
				}
			}
			return nil
		})
		t.Logf("%s: %v (policy %q)", what, time.Since(start).Round(time.Millisecond), last.Annotations[policyAnnotation])
	}
	is := func(want string) func(string) error {
		return func(got string) error {
			if got != want {
				return fmt.Errorf("policy annotation %q, want %q", got, want)
			}
			return nil
		}
	}

	policy := policytest.MakeSpreadPolicy().Name("live").Constraint(softHost(1)).Obj()
	f.create(policy)
	nextPod("created: the next pod gets the policy", is(name), injected(policy.Spec.Constraints, selector))

	policy.Spec.Constraints[0].MaxSkew = 4
	policy.Spec.Constraints = append(policy.Spec.Constraints, v1alpha1.Constraint{MaxSkew: 2, TopologyKey: zoneKey, WhenUnsatisfiable: v1.ScheduleAnyway})
	if err := k8s.Update(t.Context(), policy); err != nil {
		t.Fatalf("update the policy: %v", err)
	}
	nextPod("changed: the next pod gets the new constraints", is(name), injected(policy.Spec.Constraints, selector))

	if err := k8s.Delete(t.Context(), policy); err != nil {
		t.Fatalf("delete the policy: %v", err)
	}
	fallback := chartClusterPolicyName(t)
	nextPod(fmt.Sprintf("deleted: the next pod falls back to %q", fallback), func(got string) error {
		if got == name {
			return fmt.Errorf("policy annotation still %q", got)
		}
		if fallback != "" && got != fallback {
			return fmt.Errorf("policy annotation %q, want the cluster default %q", got, fallback)
		}
		return nil
	}, nil)
}

func clusterDefaultPolicy(t *testing.T) {
	f := newFramework(t)
	name := chartClusterPolicyName(t)
	if name == "" {
		t.Fatal("no ClusterSpreadPolicy labelled app.kubernetes.io/managed-by=Helm: install the chart with policy.clusterDefault.enabled=true")
	}
	var policy v1alpha1.ClusterSpreadPolicy
	if err := k8s.Get(t.Context(), client.ObjectKey{Name: name}, &policy); err != nil {
		t.Fatal(err)
	}
	deploy := makeDeployment("web").Replicas(9)
	if sel := policy.Spec.PodSelector; sel != nil {
		for k, v := range sel.MatchLabels {
			deploy.PodLabel(k, v)
		}
	}
	if sel := policy.Spec.NamespaceSelector; sel != nil && len(sel.MatchLabels) > 0 {
		var ns v1.Namespace
		if err := k8s.Get(t.Context(), client.ObjectKey{Name: f.ns}, &ns); err != nil {
			t.Fatal(err)
		}
		for k, v := range sel.MatchLabels {
			ns.Labels[k] = v
		}
		if err := k8s.Update(t.Context(), &ns); err != nil {
			t.Fatal(err)
		}
	}
	f.create(deploy.Obj())

	pods := f.waitRunning(labels.SelectorFromSet(labels.Set{"app": "web"}), 9, placeTimeout)
	for _, p := range pods {
		rs := controllerOf(t, &p, "ReplicaSet", &appsv1.ReplicaSet{}).(*appsv1.ReplicaSet)
		f.expectInjected(&p, name, injected(policy.Spec.Constraints, rs.Spec.Selector))
	}
	counts, err := zoneCounts(t.Context(), pods)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("placed per zone: %v", counts)
	for _, c := range policy.Spec.Constraints {
		if c.WhenUnsatisfiable == v1.DoNotSchedule && c.TopologyKey == zoneKey && skew(counts) > int(c.MaxSkew) {
			t.Errorf("placed %v: skew %d > maxSkew %d", counts, skew(counts), c.MaxSkew)
		}
	}
}

// chartClusterPolicyName is the ClusterSpreadPolicy the chart rendered,
// or "" when there is none.
func chartClusterPolicyName(t *testing.T) string {
	t.Helper()
	var list v1alpha1.ClusterSpreadPolicyList
	if err := k8s.List(t.Context(), &list, client.MatchingLabels{"app.kubernetes.io/managed-by": "Helm"}); err != nil {
		t.Fatalf("list ClusterSpreadPolicies: %v", err)
	}
	switch len(list.Items) {
	case 0:
		return ""
	case 1:
		return list.Items[0].Name
	}
	var names []string
	for _, p := range list.Items {
		names = append(names, p.Name)
	}
	t.Fatalf("several ClusterSpreadPolicies come from Helm (%v); the suite expects one chart installation", names)
	return ""
}

// ---------------------------------------------------------------- assertions

// expectInjected fails the test unless p carries exactly want (in any
// order) and names policy in its annotation.
func (f *framework) expectInjected(p *v1.Pod, policy string, want []v1.TopologySpreadConstraint) {
	f.t.Helper()
	if got := p.Annotations[policyAnnotation]; got != policy {
		f.t.Fatalf("pod %s: annotation %s=%q, want %q", p.Name, policyAnnotation, got, policy)
	}
	if diff := cmp.Diff(sortedConstraints(want), sortedConstraints(p.Spec.TopologySpreadConstraints)); diff != "" {
		f.t.Fatalf("pod %s: constraints (-want +got):\n%s", p.Name, diff)
	}
}

// expectZones fails the test unless pods are bound per zone as want says.
func (f *framework) expectZones(pods []v1.Pod, want map[string]int) {
	f.t.Helper()
	got, err := zoneCounts(f.t.Context(), pods)
	if err != nil {
		f.t.Fatal(err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		f.t.Fatalf("pods per zone (-want +got):\n%s", diff)
	}
	f.t.Logf("placed per zone: %v", got)
}

func skew(counts map[string]int) int {
	lo, hi := -1, 0
	for _, n := range counts {
		if lo < 0 || n < lo {
			lo = n
		}
		hi = max(hi, n)
	}
	return hi - max(lo, 0)
}

func sortedConstraints(cs []v1.TopologySpreadConstraint) []v1.TopologySpreadConstraint {
	out := slices.Clone(cs)
	sort.Slice(out, func(i, j int) bool {
		if out[i].TopologyKey != out[j].TopologyKey {
			return out[i].TopologyKey < out[j].TopologyKey
		}
		return out[i].WhenUnsatisfiable < out[j].WhenUnsatisfiable
	})
	return out
}

func constraintFor(p *v1.Pod, key string) *v1.TopologySpreadConstraint {
	for i, c := range p.Spec.TopologySpreadConstraints {
		if c.TopologyKey == key {
			return &p.Spec.TopologySpreadConstraints[i]
		}
	}
	return nil
}

// controllerOf reads the object of kind that controls p into obj.
func controllerOf(t *testing.T, p *v1.Pod, kind string, obj client.Object) client.Object {
	t.Helper()
	ref := metav1.GetControllerOf(p)
	if ref == nil || ref.Kind != kind {
		t.Fatalf("pod %s: controller %+v, want a %s", p.Name, ref, kind)
	}
	if err := k8s.Get(t.Context(), client.ObjectKey{Namespace: p.Namespace, Name: ref.Name}, obj); err != nil {
		t.Fatalf("pod %s: get its %s %s: %v", p.Name, kind, ref.Name, err)
	}
	return obj
}
