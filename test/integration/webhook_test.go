//go:build integration

package integration

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	admissionv1 "k8s.io/api/admission/v1"
	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/spreadguard/spreadguard/pkg/apis/spreadguard/v1alpha1"
	"github.com/spreadguard/spreadguard/pkg/policy/policytest"
	"github.com/spreadguard/spreadguard/pkg/server"
	"github.com/spreadguard/spreadguard/pkg/spread/spreadtest"
)

// injected is the constraint zonePolicy writes into a pod whose derived
// selector is matchLabels.
func injected(matchLabels map[string]string, taints v1.NodeInclusionPolicy) []v1.TopologySpreadConstraint {
	return []v1.TopologySpreadConstraint{
		spreadtest.Constraint(1, v1.LabelTopologyZone).DoNotSchedule().
			Selector(&metav1.LabelSelector{MatchLabels: matchLabels}).NodeTaintsPolicy(taints).Obj(),
	}
}

// wantStored compares what the apiserver stored for a pod with the
// constraints and policy annotation expected.
func wantStored(t *testing.T, ns, name string, constraints []v1.TopologySpreadConstraint, policy string) {
	t.Helper()
	pod := storedPod(t, ns, name)
	if diff := cmp.Diff(constraints, pod.Spec.TopologySpreadConstraints); diff != "" {
		t.Errorf("stored topologySpreadConstraints of %s/%s (-want +got):\n%s", ns, name, diff)
	}
	if got := pod.Annotations[v1alpha1.AnnotationPolicy]; got != policy {
		t.Errorf("stored %s annotation of %s/%s = %q, want %q", v1alpha1.AnnotationPolicy, ns, name, got, policy)
	}
}

func TestPodsAtCreation(t *testing.T) {
	t.Run("a Deployment's ReplicaSet pods get the namespace's constraints with the ReplicaSet's selector", func(t *testing.T) {
		ns := newNamespace(t, "deployment")
		create(t, zonePolicy(ns).Obj())
		waitForPolicy(t, ns)

		labels := map[string]string{"app": "web", "pod-template-hash": "5d8f6b"}
		deploy := &appsv1.Deployment{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"},
			Spec: appsv1.DeploymentSpec{
				Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
				Template: podTemplate(map[string]string{"app": "web"}),
			},
		}
		create(t, deploy)
		// No controller-manager runs: the ReplicaSet and its pods are
		// created here, as the deployment and replicaset controllers would.
		rs := replicaSet(ns, "web-5d8f6b", labels)
		rs.OwnerReferences = []metav1.OwnerReference{*metav1.NewControllerRef(deploy, appsv1.SchemeGroupVersion.WithKind("Deployment"))}
		create(t, rs)
		for _, name := range []string{"web-5d8f6b-x7k2p", "web-5d8f6b-q9m4z"} {
			create(t, controlledBy(podObj(spreadtest.MakePod().Namespace(ns).Name(name).Labels(labels)), rs, "ReplicaSet"))
			wantStored(t, ns, name, injected(labels, v1.NodeInclusionPolicyHonor), ns+"/zones")
		}
	})

	t.Run("a StatefulSet's pods get the namespace's constraints with the StatefulSet's selector", func(t *testing.T) {
		ns := newNamespace(t, "statefulset")
		create(t, zonePolicy(ns).Obj())
		waitForPolicy(t, ns)

		ss := &appsv1.StatefulSet{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "db"},
			Spec: appsv1.StatefulSetSpec{
				ServiceName: "db",
				Selector:    &metav1.LabelSelector{MatchLabels: map[string]string{"app": "db"}},
				Template:    podTemplate(map[string]string{"app": "db"}),
			},
		}
		create(t, ss)
		for _, name := range []string{"db-0", "db-1"} {
			pod := spreadtest.MakePod().Namespace(ns).Name(name).Label("app", "db").
				Label("apps.kubernetes.io/pod-index", name[len(name)-1:])
			create(t, controlledBy(podObj(pod), ss, "StatefulSet"))
			wantStored(t, ns, name, injected(map[string]string{"app": "db"}, v1.NodeInclusionPolicyHonor), ns+"/zones")
		}
	})

	t.Run("a pod selected only by a Service gets the constraints with the Service's selector", func(t *testing.T) {
		ns := newNamespace(t, "service")
		create(t, zonePolicy(ns).Obj())
		create(t, &v1.Service{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "front"},
			Spec: v1.ServiceSpec{
				Selector: map[string]string{"app": "front"},
				Ports:    []v1.ServicePort{{Port: 80}},
			},
		})
		pod := podObj(spreadtest.MakePod().Namespace(ns).Name("front-1").Label("app", "front").Label("tier", "web"))
		// Services are listed from the cache, which may lag the create.
		eventually(t, "a dry-run pod of the Service is mutated", func(ctx context.Context) (bool, error) {
			p := pod.DeepCopy()
			err := suite.client.Create(ctx, p, client.DryRunAll)
			return err == nil && len(p.Spec.TopologySpreadConstraints) > 0, err
		})
		create(t, pod)
		wantStored(t, ns, "front-1", injected(map[string]string{"app": "front"}, v1.NodeInclusionPolicyHonor), ns+"/zones")
	})

	t.Run("a pod that declares its own constraints is untouched", func(t *testing.T) {
		ns := newNamespace(t, "own")
		create(t, zonePolicy(ns).Obj())
		waitForPolicy(t, ns)
		rs := replicaSet(ns, "own-1", map[string]string{"app": "own"})
		create(t, rs)
		own := []v1.TopologySpreadConstraint{
			spreadtest.Constraint(2, v1.LabelHostname).ScheduleAnyway().MatchLabel("app", "own").Obj(),
		}
		pod := podObj(spreadtest.MakePod().Namespace(ns).Name("own-1-a").Label("app", "own").SpreadConstraint(own[0]))
		create(t, controlledBy(pod, rs, "ReplicaSet"))
		wantStored(t, ns, "own-1-a", own, "")
	})

	t.Run("a pod with no owner is untouched", func(t *testing.T) {
		ns := newNamespace(t, "no-owner")
		create(t, zonePolicy(ns).Obj())
		waitForPolicy(t, ns)
		create(t, podObj(spreadtest.MakePod().Namespace(ns).Name("lonely").Label("app", "web")))
		wantStored(t, ns, "lonely", nil, "")
	})

	t.Run("a ReplicaSet whose pods arrive before the cache has seen it still gets the right selector", func(t *testing.T) {
		ns := newNamespace(t, "fresh-owner")
		create(t, zonePolicy(ns).Obj())
		waitForPolicy(t, ns)

		// This ReplicaSet is invisible to the webhook's informer, so only
		// the live read can find it.
		hidden := replicaSet(ns, "hidden", map[string]string{"app": "hidden"})
		hidden.Labels = map[string]string{labelHiddenFromCache: "true"}
		create(t, hidden)
		create(t, controlledBy(podObj(spreadtest.MakePod().Namespace(ns).Name("hidden-a").Label("app", "hidden")), hidden, "ReplicaSet"))
		wantStored(t, ns, "hidden-a", injected(map[string]string{"app": "hidden"}, v1.NodeInclusionPolicyHonor), ns+"/zones")

		// And the race as it happens: the ReplicaSet and its pod back to back.
		racing := replicaSet(ns, "racing", map[string]string{"app": "racing"})
		create(t, racing)
		create(t, controlledBy(podObj(spreadtest.MakePod().Namespace(ns).Name("racing-a").Label("app", "racing")), racing, "ReplicaSet"))
		wantStored(t, ns, "racing-a", injected(map[string]string{"app": "racing"}, v1.NodeInclusionPolicyHonor), ns+"/zones")
	})

	t.Run("a kube-system pod is never touched, even under a policy of its own", func(t *testing.T) {
		create(t, zonePolicy("kube-system").Obj())
		// The policy informer delivers events in order: once a policy
		// created later is in the cache, the kube-system one is too.
		later := newNamespace(t, "after-kube-system")
		create(t, zonePolicy(later).Obj())
		waitForPolicy(t, later)

		rs := replicaSet("kube-system", "coredns-6f7b", map[string]string{"k8s-app": "kube-dns"})
		create(t, rs)
		create(t, controlledBy(podObj(spreadtest.MakePod().Namespace("kube-system").Name("coredns-6f7b-a").Label("k8s-app", "kube-dns")), rs, "ReplicaSet"))
		wantStored(t, "kube-system", "coredns-6f7b-a", nil, "")
	})
}

// unsatisfiableSetup makes a namespace whose api pods cannot be placed:
// zones a and b hold one api pod each, zone c's only node is cordoned and
// tainted, and the policy's constraint ignores taints, so zone c counts 0,
// pins the global minimum at 0, and every usable node would reach skew 2.
// It returns the namespace and the ReplicaSet a new api pod belongs to.
func unsatisfiableSetup(t *testing.T, prefix string, action v1alpha1.ValidationAction) (string, *appsv1.ReplicaSet) {
	t.Helper()
	ensureZoneNodes(t)
	ns := newNamespace(t, prefix)
	policy := policytest.MakeSpreadPolicy().Namespace(ns).Name("zones").Constraint(
		policytest.MakeConstraint().Zone().MaxSkew(1).DoNotSchedule().NodeTaintsPolicy(v1.NodeInclusionPolicyIgnore).Obj())
	if action != "" {
		policy.Action(action)
	}
	create(t, policy.Obj())
	waitForPolicy(t, ns)
	for name, node := range map[string]string{"api-on-a1": "a1", "api-on-b1": "b1"} {
		create(t, podObj(spreadtest.MakePod().Namespace(ns).Name(name).Label("app", "api").Node(node)))
	}
	rs := replicaSet(ns, "api-7c9d", map[string]string{"app": "api"})
	create(t, rs)
	return ns, rs
}

func TestUnsatisfiablePods(t *testing.T) {
	t.Run("a pod whose hard constraint cannot be met is denied, and the error names the zone, the counts and the remedy", func(t *testing.T) {
		ns, rs := unsatisfiableSetup(t, "deny", "")
		pod := controlledBy(podObj(spreadtest.MakePod().Namespace(ns).Name("api-7c9d-new").Label("app", "api")), rs, "ReplicaSet")
		// The index must have counted the two bound pods first.
		eventually(t, "a dry run of the pod is denied", func(ctx context.Context) (bool, error) {
			err := suite.client.Create(ctx, pod.DeepCopy(), client.DryRunAll)
			return apierrors.IsForbidden(err), err
		})

		err := suite.client.Create(t.Context(), pod.DeepCopy())
		if !apierrors.IsForbidden(err) {
			t.Fatalf("create = %v, want a denial (403)", err)
		}
		msg := err.Error()
		t.Logf("the client sees: %s", msg)
		for _, want := range []string{
			`admission webhook "pods.validate.spreadguard.io" denied the request: `,
			"spec.topologySpreadConstraints[0]",
			"zone-a=1, zone-b=1, zone-c=0",
			"global minimum of spec.topologySpreadConstraints[0] is 0",
			// messageDetail domains, the default: the node is counted, not named.
			"1 node in zone zone-c is excluded: cordoned",
			"Remedy:",
		} {
			if !strings.Contains(msg, want) {
				t.Errorf("the denial does not mention %q:\n%s", want, msg)
			}
		}
		if strings.Contains(msg, "c1") {
			t.Errorf("the denial names node c1 under messageDetail domains:\n%s", msg)
		}
		if err := suite.client.Get(t.Context(), client.ObjectKeyFromObject(pod), &v1.Pod{}); !apierrors.IsNotFound(err) {
			t.Errorf("the denied pod was stored (get: %v)", err)
		}
	})

	t.Run("Warn mode returns the warning to the client and stores the pod", func(t *testing.T) {
		ns, rs := unsatisfiableSetup(t, "warn", v1alpha1.ActionWarn)
		pod := controlledBy(podObj(spreadtest.MakePod().Namespace(ns).Name("api-7c9d-new").Label("app", "api")), rs, "ReplicaSet")
		eventually(t, "a dry run of the pod is warned about", func(ctx context.Context) (bool, error) {
			c, rec := clientWithWarnings(t)
			err := c.Create(ctx, pod.DeepCopy(), client.DryRunAll)
			return err == nil && rec.contains("zone-c"), err
		})

		c, rec := clientWithWarnings(t)
		if err := c.Create(t.Context(), pod.DeepCopy()); err != nil {
			t.Fatalf("create under Warn = %v, want the pod stored", err)
		}
		if !rec.contains("spec.topologySpreadConstraints[0]") || !rec.contains("Remedy:") {
			t.Errorf("warnings %q do not explain the constraint and the remedy", rec.warnings)
		}
		wantStored(t, ns, "api-7c9d-new", injected(map[string]string{"app": "api"}, v1.NodeInclusionPolicyIgnore), ns+"/zones")
	})
}

func TestPolicies(t *testing.T) {
	zone := policytest.MakeConstraint().Zone().MaxSkew(1).DoNotSchedule()
	tests := []struct {
		name   string
		policy client.Object
		// want are the parts of the error the client must see.
		want []string
	}{
		{
			name: "a SpreadPolicy whose topologyKey is not a label name is refused by the schema naming the field",
			policy: policytest.MakeSpreadPolicy().Namespace("default").Name("bad-key").
				Constraint(policytest.MakeConstraint().TopologyKey("zone with spaces").MaxSkew(1).DoNotSchedule().Obj()).Obj(),
			want: []string{"spec.constraints[0].topologyKey", "topologyKey must be a node label key"},
		},
		{
			name: "a SpreadPolicy whose podSelector has an In requirement without values is refused by the schema naming the field",
			policy: policytest.MakeSpreadPolicy().Namespace("default").Name("bad-selector").
				PodExpression("app", metav1.LabelSelectorOpIn).Constraint(zone.Obj()).Obj(),
			want: []string{"spec.podSelector", "In and NotIn need at least one value"},
		},
		{
			name: "a SpreadPolicy whose podSelector key has a space, which the schema cannot check, is refused by the webhook",
			policy: policytest.MakeSpreadPolicy().Namespace("default").Name("bad-label-key").
				PodLabel("bad key", "web").Constraint(zone.Obj()).Obj(),
			want: []string{`admission webhook "spreadpolicies.validate.spreadguard.io" denied the request`,
				"SpreadPolicy default/bad-label-key is invalid", "spec.podSelector.matchLabels"},
		},
		{
			name: "a ClusterSpreadPolicy whose namespaceSelector has Exists with values is refused naming the field",
			policy: policytest.MakeClusterSpreadPolicy().Name("bad-namespaces").Constraint(zone.Obj()).
				NamespaceExpression("team", metav1.LabelSelectorOpExists, "payments").Obj(),
			want: []string{"spec.namespaceSelector", "Exists and DoesNotExist take none"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := suite.client.Create(t.Context(), tt.policy)
			if err == nil {
				t.Fatal("the invalid policy was stored")
			}
			for _, want := range tt.want {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("the error does not mention %q:\n%v", want, err)
				}
			}
		})
	}
}

// webhookClient trusts the test CA and speaks HTTP/1.1 or HTTP/2.
func webhookClient(t *testing.T) *http.Client {
	t.Helper()
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(suite.caPEM) {
		t.Fatal("the test CA does not parse")
	}
	return &http.Client{Transport: &http.Transport{
		TLSClientConfig:   &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12},
		ForceAttemptHTTP2: true,
	}}
}

func TestServer(t *testing.T) {
	t.Run("a malformed AdmissionReview POSTed straight to the server gets a 400 and the server keeps serving", func(t *testing.T) {
		c := webhookClient(t)
		for _, path := range []string{server.PathValidatePod, server.PathMutatePod, server.PathValidateSpreadPolicy} {
			for _, body := range []string{`{"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionRe`, `{"kind":"AdmissionReview","apiVersion":"admission.k8s.io/v1"}`} {
				resp, err := c.Post(suite.webhookURL+path, "application/json", strings.NewReader(body))
				if err != nil {
					t.Fatalf("POST %s: %v", path, err)
				}
				reason, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusBadRequest {
					t.Errorf("POST %s %q: status %d, want 400", path, body, resp.StatusCode)
				}
				if strings.Count(string(reason), "\n") != 1 {
					t.Errorf("POST %s: the reason is not one line: %q", path, reason)
				}
			}
		}

		podKind := metav1.GroupVersionKind{Version: "v1", Kind: "Pod"}
		pods := metav1.GroupVersionResource{Version: "v1", Resource: "pods"}
		review := admissionv1.AdmissionReview{
			TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
			Request: &admissionv1.AdmissionRequest{UID: "after-garbage", Operation: admissionv1.Delete,
				Kind: podKind, Resource: pods, RequestKind: &podKind, RequestResource: &pods, Namespace: "default"},
		}
		body, _ := json.Marshal(review)
		resp, err := c.Post(suite.webhookURL+server.PathValidatePod, "application/json", bytes.NewReader(body))
		if err != nil {
			t.Fatalf("POST a valid review after malformed ones: %v", err)
		}
		defer resp.Body.Close()
		var got admissionv1.AdmissionReview
		if err := json.NewDecoder(resp.Body).Decode(&got); err != nil || got.Response == nil {
			t.Fatalf("the answer to a valid review is not an AdmissionReview: %v", err)
		}
		if !got.Response.Allowed || got.Response.UID != "after-garbage" {
			t.Errorf("response = %+v, want allowed for uid after-garbage", got.Response)
		}

		ns := newNamespace(t, "after-garbage")
		create(t, podObj(spreadtest.MakePod().Namespace(ns).Name("still-served")))
	})

	t.Run("the webhook server speaks TLS 1.2 or newer over HTTP/1.1 only", func(t *testing.T) {
		pool := x509.NewCertPool()
		pool.AppendCertsFromPEM(suite.caPEM)
		host := strings.TrimPrefix(suite.webhookURL, "https://")
		conn, err := tls.Dial("tcp", host, &tls.Config{RootCAs: pool, NextProtos: []string{"h2", "http/1.1"}})
		if err != nil {
			t.Fatalf("TLS handshake: %v", err)
		}
		if p := conn.ConnectionState().NegotiatedProtocol; p == "h2" {
			t.Errorf("negotiated %q; HTTP/2 must be off", p)
		}
		conn.Close()
		if conn, err := tls.Dial("tcp", host, &tls.Config{RootCAs: pool, MaxVersion: tls.VersionTLS11}); err == nil {
			conn.Close()
			t.Error("a TLS 1.1 handshake succeeded")
		}
	})

	t.Run("readyz and healthz pass, and metrics count the decisions", func(t *testing.T) {
		for _, path := range []string{"/readyz", "/healthz"} {
			resp, err := http.Get(suite.probeURL + path)
			if err != nil {
				t.Fatalf("GET %s: %v", path, err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				t.Errorf("GET %s: %d", path, resp.StatusCode)
			}
		}
		// One decision of each kind this test can cause on its own: an
		// allowed pod and a refused policy.
		ns := newNamespace(t, "metrics")
		create(t, podObj(spreadtest.MakePod().Namespace(ns).Name("counted")))
		// The schema cannot check label keys, so the webhook refuses it.
		bad := policytest.MakeSpreadPolicy().Namespace(ns).Name("bad-label-key").PodLabel("bad key", "web").
			Constraint(policytest.MakeConstraint().Zone().MaxSkew(1).DoNotSchedule().Obj()).Obj()
		if err := suite.client.Create(t.Context(), bad); err == nil || !strings.Contains(err.Error(), "spreadpolicies.validate.spreadguard.io") {
			t.Fatalf("create of a policy with the label key %q = %v, want the webhook's refusal", "bad key", err)
		}

		resp, err := http.Get(suite.metricsURL)
		if err != nil {
			t.Fatalf("GET /metrics: %v", err)
		}
		defer resp.Body.Close()
		text, _ := io.ReadAll(resp.Body)
		for _, series := range []string{
			"spreadguard_cache_synced 1",
			`spreadguard_admission_requests_total{result="skipped",webhook="mutate-pod"}`,
			`spreadguard_admission_requests_total{result="denied",webhook="validate-spreadpolicy"}`,
			`spreadguard_denials_total{namespace="` + ns + `",reason="invalid_policy"}`,
			"spreadguard_injected_constraints_total",
			`spreadguard_admission_decision_duration_seconds_bucket{webhook="validate-pod",le="0.001"}`,
		} {
			if !bytes.Contains(text, []byte(series)) {
				t.Errorf("/metrics lacks %s", series)
			}
		}
	})
}

func TestGatedPods(t *testing.T) {
	t.Run("a gated pod no node can take is created with a warning, and removing its gate warns and records an event", func(t *testing.T) {
		ns, rs := unsatisfiableSetup(t, "gated", "")
		pod := controlledBy(podObj(spreadtest.MakePod().Namespace(ns).Name("api-7c9d-gated").Label("app", "api").
			SchedulingGate("example.com/quota")), rs, "ReplicaSet")
		// The index must have counted the two bound pods first.
		probe := controlledBy(podObj(spreadtest.MakePod().Namespace(ns).Name("api-7c9d-probe").Label("app", "api")), rs, "ReplicaSet")
		eventually(t, "a dry run of an ungated pod is denied", func(ctx context.Context) (bool, error) {
			err := suite.client.Create(ctx, probe, client.DryRunAll)
			return apierrors.IsForbidden(err), err
		})

		c, rec := clientWithWarnings(t)
		if err := c.Create(t.Context(), pod); err != nil {
			t.Fatalf("create of a gated pod = %v, want it stored: its check waits for its gates", err)
		}
		if !rec.contains("schedulingGates") || !rec.contains("checked when the last gate is removed") {
			t.Errorf("warnings %q do not say the check waits for the gates", rec.warnings)
		}

		c, rec = clientWithWarnings(t)
		stored := storedPod(t, ns, pod.Name)
		stored.Spec.SchedulingGates = nil
		if err := c.Update(t.Context(), stored); err != nil {
			t.Fatalf("removing the gate = %v, want it allowed: an update is never refused", err)
		}
		if !rec.contains("zone-c=0") || !rec.contains("Remedy:") {
			t.Errorf("warnings %q do not give the numbers and the remedy", rec.warnings)
		}
		eventually(t, "a SpreadUnsatisfiable event on the pod", func(ctx context.Context) (bool, error) {
			return warningEvent(ctx, ns, pod.Name, "SpreadUnsatisfiable", "zone-c=0")
		})
	})
}
