package admission

import (
	"bytes"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/go-logr/logr"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/prometheus/client_golang/prometheus/testutil"
	admissionv1 "k8s.io/api/admission/v1"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/spreadguard/spreadguard/pkg/apis/spreadguard/v1alpha1"
	"github.com/spreadguard/spreadguard/pkg/cache"
	"github.com/spreadguard/spreadguard/pkg/forecast"
	"github.com/spreadguard/spreadguard/pkg/forecast/forecasttest"
	"github.com/spreadguard/spreadguard/pkg/policy/policytest"
	"github.com/spreadguard/spreadguard/pkg/spread"
	"github.com/spreadguard/spreadguard/pkg/spread/spreadtest"
	"github.com/spreadguard/spreadguard/pkg/workload"
)

// Workload sets the object, kind and resource of a workload request.
func (w *RequestWrapper) Workload(resource metav1.GroupVersionResource, kind string, obj runtime.Object) *RequestWrapper {
	w.r.Kind = metav1.GroupVersionKind{Group: resource.Group, Version: resource.Version, Kind: kind}
	w.r.Resource = resource
	w.r.RequestKind, w.r.RequestResource = &w.r.Kind, &w.r.Resource
	w.r.Namespace = shop
	return w.Raw(mustJSON(obj))
}

// OldObject sets the old object of an UPDATE.
func (w *RequestWrapper) OldObject(obj runtime.Object) *RequestWrapper {
	w.r.OldObject = runtime.RawExtension{Raw: mustJSON(obj)}
	return w
}

// Name sets the name of the object under review.
func (w *RequestWrapper) Name(name string) *RequestWrapper { w.r.Name = name; return w }

var deployments = metav1.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}

func webDeployment(replicas int32) *appsv1.Deployment {
	return forecasttest.MakeDeployment(shop, "web").Replicas(replicas).Obj()
}

func TestWorkloadForecaster(t *testing.T) {
	// Zones a and b have a node each; zone-c's only node is cordoned but
	// counted (nodeTaintsPolicy Ignore), so it pins the global minimum at 0.
	nodes := []*v1.Node{
		spreadtest.MakeNode().Name("a1").Zone("zone-a").Obj(),
		spreadtest.MakeNode().Name("b1").Zone("zone-b").Obj(),
		spreadtest.MakeNode().Name("c1").Zone("zone-c").Cordoned().Obj(),
	}
	empty := spread.IndexFromSnapshot(spread.Snapshot{Nodes: nodes})
	// withTwo also holds the Deployment's 2 pods, on a1 and b1.
	hash := forecast.PodTemplateHash(&webDeployment(2).Spec.Template, nil)
	withTwo := spread.IndexFromSnapshot(spread.Snapshot{Nodes: nodes, Pods: []*v1.Pod{
		spreadtest.MakePod().Namespace(shop).Name("web-1").Label("app", "web").Label(appsv1.DefaultDeploymentUniqueLabelKey, hash).Node("a1").Obj(),
		spreadtest.MakePod().Namespace(shop).Name("web-2").Label("app", "web").Label(appsv1.DefaultDeploymentUniqueLabelKey, hash).Node("b1").Obj(),
	}})
	// olderHash is what a kube-controller-manager older than this build
	// (whose PodSpec has fewer fields to print) hashed the same template
	// to: its ReplicaSet and pods carry it.
	const olderHash = "7d4b9c6f5"
	withTwoOlderHash := spread.IndexFromSnapshot(spread.Snapshot{Nodes: nodes, Pods: []*v1.Pod{
		spreadtest.MakePod().Namespace(shop).Name("web-1").Label("app", "web").Label(appsv1.DefaultDeploymentUniqueLabelKey, olderHash).Node("a1").Obj(),
		spreadtest.MakePod().Namespace(shop).Name("web-2").Label("app", "web").Label(appsv1.DefaultDeploymentUniqueLabelKey, olderHash).Node("b1").Obj(),
	}})
	src := shopSources()
	src.Policies[0] = policytest.MakeSpreadPolicy().Namespace(shop).Name("zones").Constraint(
		policytest.MakeConstraint().Zone().MaxSkew(1).DoNotSchedule().NodeTaintsPolicy(v1.NodeInclusionPolicyIgnore).Obj()).Obj()
	stored := webDeployment(2)
	reader := fake.NewClientBuilder().WithObjects(stored).Build()
	olderRS := &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: shop, Name: "web-" + olderHash, UID: "uid-web-" + olderHash,
			Annotations:     map[string]string{workload.RevisionAnnotation: "1"},
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(stored, appsv1.SchemeGroupVersion.WithKind("Deployment"))}},
		Spec: appsv1.ReplicaSetSpec{Replicas: new(int32(2)), Template: stored.Spec.Template,
			Selector: spreadtest.WithMatchLabel(stored.Spec.Selector.DeepCopy(), appsv1.DefaultDeploymentUniqueLabelKey, olderHash)},
	}
	olderReader := fake.NewClientBuilder().WithObjects(stored, olderRS).Build()
	warning := "spreadguard: replica 3 of 3 would be refused: zone-c has no schedulable node; " +
		"zone: zone-a=1 zone-b=1 zone-c=0, maxSkew 1 (policy shop/zones)"
	changed := webDeployment(3)
	changed.Spec.Template.Spec.Containers[0].Image = "nginx:2"
	scale := func(replicas int32) *autoscalingv1.Scale {
		return &autoscalingv1.Scale{ObjectMeta: metav1.ObjectMeta{Namespace: shop, Name: "web"}, Spec: autoscalingv1.ScaleSpec{Replicas: replicas}}
	}

	tests := []struct {
		name         string
		cluster      *spread.Index
		workloads    client.Reader // nil: reader
		req          admission.Request
		wantWarnings []string
		wantResult   string
	}{
		{
			name:         "CREATE of a Deployment of 3 whose third replica no node takes -> allowed, with the forecast's warning",
			req:          makeRequest().Workload(deployments, "Deployment", webDeployment(3)).Obj(),
			wantWarnings: []string{warning},
			wantResult:   ResultWarned,
		},
		{
			name:       "CREATE of a Deployment of 2 that fits -> allowed silently",
			req:        makeRequest().Workload(deployments, "Deployment", webDeployment(2)).Obj(),
			wantResult: ResultAllowed,
		},
		{
			name:    "UPDATE from 2 to 3 replicas, same template -> replica 3 forecast from the 2 that exist",
			cluster: withTwo,
			req: makeRequest().Operation(admissionv1.Update).Workload(deployments, "Deployment", webDeployment(3)).
				OldObject(webDeployment(2)).Obj(),
			wantWarnings: []string{warning},
			wantResult:   ResultWarned,
		},
		{
			name:      "UPDATE from 2 to 3 replicas, same template, its ReplicaSet hashed by an older Kubernetes -> replica 3 forecast from that ReplicaSet's 2 pods",
			cluster:   withTwoOlderHash,
			workloads: olderReader,
			req: makeRequest().Operation(admissionv1.Update).Workload(deployments, "Deployment", webDeployment(3)).
				OldObject(webDeployment(2)).Obj(),
			wantWarnings: []string{warning},
			wantResult:   ResultWarned,
		},
		{
			name:    "UPDATE of the template at 3 replicas, the old revision's 2 pods in place -> the new one starts at 0, replica 3 is refused",
			cluster: withTwo,
			req: makeRequest().Operation(admissionv1.Update).Workload(deployments, "Deployment", changed).
				OldObject(webDeployment(3)).Obj(),
			wantWarnings: []string{warning},
			wantResult:   ResultWarned,
		},
		{
			name:    "scale of the stored Deployment from 2 to 3 -> the Deployment is read, the warning returned",
			cluster: withTwo,
			req: makeRequest().Operation(admissionv1.Update).Workload(deployments, "Scale", scale(3)).
				Kind("autoscaling", "v1", "Scale").SubResource("scale").Name("web").OldObject(scale(2)).Obj(),
			wantWarnings: []string{warning},
			wantResult:   ResultWarned,
		},
		{
			name: "scale of a Deployment that cannot be read -> allowed with a warning that spreadguard failed",
			req: makeRequest().Operation(admissionv1.Update).Workload(deployments, "Scale", scale(3)).
				Kind("autoscaling", "v1", "Scale").SubResource("scale").Name("gone").OldObject(scale(2)).Obj(),
			wantWarnings: []string{`spreadguard could not forecast where this workload's replicas can be placed because of an internal error (reading the workload being scaled: deployments shop/gone: deployments.apps "gone" not found); the pod was admitted unchanged and the scheduler still enforces its constraints`},
			wantResult:   ResultErrored,
		},
		{
			name:       "DELETE -> not forecast",
			req:        makeRequest().Operation(admissionv1.Delete).Workload(deployments, "Deployment", webDeployment(3)).Obj(),
			wantResult: ResultSkipped,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := newTestMetrics(t)
			cluster := tt.cluster
			if cluster == nil {
				cluster = empty
			}
			workloads := tt.workloads
			if workloads == nil {
				workloads = reader
			}
			h := &WorkloadForecaster{Sources: staticSources(src), Config: testEngineConfig, Cluster: cluster,
				Synced: func() bool { return true }, Workloads: workloads, Metrics: m}
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

func TestWorkloadForecasterNeverRefusesOnAFault(t *testing.T) {
	src := shopSources()
	src.policyErr = errors.New("connection refused")
	h := &WorkloadForecaster{Sources: staticSources(src), Config: testEngineConfig,
		Cluster: spread.IndexFromSnapshot(spread.Snapshot{}), Metrics: newTestMetrics(t)}
	resp := handle(t, h, makeRequest().Workload(deployments, "Deployment", webDeployment(3)).Obj(), http.StatusOK)
	if len(resp.Warnings) != 1 || !strings.Contains(resp.Warnings[0], "connection refused") {
		t.Errorf("warnings = %q, want the fault named", resp.Warnings)
	}
	if got := testutil.ToFloat64(h.Metrics.Errors.WithLabelValues(WebhookForecastWorkload, FaultLookup)); got != 1 {
		t.Errorf("errors{reason=lookup} = %v, want 1", got)
	}
}

// A scale carries no pod template: the forecast reads the workload from the
// webhook's cache, whose transforms keep only part of it, and a
// Deployment's pod-template-hash from its current ReplicaSet there. For
// each kind, and for each thing a template carries that decides where and
// whether its pods are admitted, the forecast from the cache must be the
// forecast from the workload as stored.
func TestAScaleIsForecastFromTheCacheAsFromTheStoredWorkload(t *testing.T) {
	nodes := []*v1.Node{
		spreadtest.MakeNode().Name("a1").Zone("zone-a").Obj(),
		spreadtest.MakeNode().Name("b1").Zone("zone-b").Obj(),
		spreadtest.MakeNode().Name("c1").Zone("zone-c").Cordoned().Obj(),
	}
	src := shopSources()
	// The cordoned zone counts, at 0: the third replica of a workload
	// with two pods in zones a and b is refused.
	src.Policies[0] = policytest.MakeSpreadPolicy().Namespace(shop).Name("zones").Constraint(
		policytest.MakeConstraint().Zone().MaxSkew(1).DoNotSchedule().NodeTaintsPolicy(v1.NodeInclusionPolicyIgnore).Obj()).Obj()
	// ownZone is a zone constraint over the pods of the workload's
	// revision, as users write it for rollouts.
	ownZone := func(name string) v1.TopologySpreadConstraint {
		return spreadtest.Constraint(1, v1.LabelTopologyZone).MatchLabel("app", name).NodeTaintsPolicy(v1.NodeInclusionPolicyIgnore).
			MatchLabelKeys(appsv1.DefaultDeploymentUniqueLabelKey, appsv1.ControllerRevisionHashLabelKey).Obj()
	}
	templates := []struct {
		name string
		pod  func(name string) *spreadtest.PodWrapper
		// refused: the third replica is refused (else it is skipped or
		// placed), so that the comparison is of something.
		refused bool
		// previous: the 2 pods are of the revision before the current
		// one, which a Deployment's or StatefulSet's revision-scoped
		// constraint does not count.
		previous bool
	}{
		{name: "no constraint of its own: the zones policy's is injected", refused: true,
			pod: func(string) *spreadtest.PodWrapper { return spreadtest.MakePod() }},
		{name: "annotated spreadguard.io/skip",
			pod: func(string) *spreadtest.PodWrapper {
				return spreadtest.MakePod().Annotation(v1alpha1.AnnotationSkip, "true")
			}},
		{name: "a scheduling gate",
			pod: func(string) *spreadtest.PodWrapper { return spreadtest.MakePod().SchedulingGate("example.com/quota") }},
		{name: "left to another scheduler",
			pod: func(string) *spreadtest.PodWrapper {
				p := spreadtest.MakePod()
				p.Spec.SchedulerName = "batch-scheduler"
				return p
			}},
		{name: "a zone constraint of its own over its revision's pods (matchLabelKeys)", refused: true,
			pod: func(name string) *spreadtest.PodWrapper { return spreadtest.MakePod().SpreadConstraint(ownZone(name)) }},
		{name: "a zone constraint of its own over its revision's pods, the 2 pods of the previous revision", refused: true, previous: true,
			pod: func(name string) *spreadtest.PodWrapper { return spreadtest.MakePod().SpreadConstraint(ownZone(name)) }},
		{name: "its own zone constraint, pinned to zone-a by nodeSelector",
			pod: func(name string) *spreadtest.PodWrapper {
				return spreadtest.MakePod().NodeSelector(v1.LabelTopologyZone, "zone-a").SpreadConstraint(ownZone(name))
			}},
		{name: "its own zone constraint, tolerating the cordon",
			pod: func(name string) *spreadtest.PodWrapper {
				return spreadtest.MakePod().Toleration(v1.TaintNodeUnschedulable, v1.TolerationOpExists, "", v1.TaintEffectNoSchedule).
					SpreadConstraint(ownZone(name))
			}},
	}
	scale := func(name string, replicas int32) *autoscalingv1.Scale {
		return &autoscalingv1.Scale{ObjectMeta: metav1.ObjectMeta{Namespace: shop, Name: name}, Spec: autoscalingv1.ScaleSpec{Replicas: replicas}}
	}
	for i, tmpl := range templates {
		for _, kind := range []string{"Deployment", "StatefulSet", "ReplicaSet", "ReplicationController"} {
			t.Run(fmt.Sprintf("%s, %s, scaled from 2 to 3", kind, tmpl.name), func(t *testing.T) {
				name := fmt.Sprintf("%s-%d", strings.ToLower(kind), i)
				pod := tmpl.pod(name).Obj()
				template := v1.PodTemplateSpec{
					ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": name}, Annotations: pod.Annotations},
					Spec:       pod.Spec,
				}
				template.Spec.Containers = []v1.Container{{Name: "app", Image: "app:1", Env: []v1.EnvVar{{Name: "MODE", Value: name}}}}
				stored, cached, podLabels, resource := storedAndCached(t, kind, name, template)
				refused := tmpl.refused
				if tmpl.previous {
					for _, key := range []string{appsv1.DefaultDeploymentUniqueLabelKey, appsv1.ControllerRevisionHashLabelKey} {
						if _, ok := podLabels[key]; ok {
							podLabels[key] = "previous"
							refused = false
						}
					}
				}
				var existing []*v1.Pod
				for j, node := range []string{"a1", "b1"} {
					existing = append(existing, spreadtest.MakePod().Namespace(shop).Name(fmt.Sprintf("%s-%d", name, j)).
						Labels(podLabels).Node(node).Obj())
				}
				cluster := spread.IndexFromSnapshot(spread.Snapshot{Nodes: nodes, Pods: existing})
				req := makeRequest().Operation(admissionv1.Update).Workload(resource, "Scale", scale(name, 3)).
					Kind("autoscaling", "v1", "Scale").SubResource("scale").Name(name).OldObject(scale(name, 2)).Obj()
				forecastFrom := func(objs ...client.Object) *forecast.Forecast {
					t.Helper()
					h := &WorkloadForecaster{Sources: staticSources(src), Config: testEngineConfig, Cluster: cluster,
						Workloads: fake.NewClientBuilder().WithObjects(objs...).Build()}
					w, err := h.workload(t.Context(), req)
					if err != nil {
						t.Fatal(err)
					}
					fc, err := forecast.Run(w, src, cluster, testEngineConfig)
					if err != nil {
						t.Fatal(err)
					}
					return fc
				}
				want, got := forecastFrom(stored), forecastFrom(cached...)
				// The pod built from the cache has no containers; the
				// rest of the forecast is the same.
				if diff := cmp.Diff(want, got, cmpopts.IgnoreFields(forecast.Forecast{}, "Pod")); diff != "" {
					t.Errorf("forecast from the cache (-stored +cached):\n%s", diff)
				}
				if (want.Refused != nil) != refused {
					t.Errorf("replica 3 refused: %+v, want refused %v", want.Refused, refused)
				}
			})
		}
	}
}

// storedAndCached returns a workload of kind named name with template as
// the API server stores it, what the webhook's cache keeps of it (and, for
// a Deployment, of its current ReplicaSet), the labels its pods carry, and
// its resource.
func storedAndCached(t *testing.T, kind, name string, template v1.PodTemplateSpec) (
	stored client.Object, cached []client.Object, podLabels map[string]string, resource metav1.GroupVersionResource) {
	t.Helper()
	meta := metav1.ObjectMeta{Namespace: shop, Name: name, UID: types.UID("uid-" + name), ResourceVersion: "7",
		Annotations: map[string]string{"kubectl.kubernetes.io/last-applied-configuration": "{}"}}
	selector := &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}}
	strip := func(transform toolscache.TransformFunc, obj client.Object) client.Object {
		out, err := transform(obj)
		if err != nil {
			t.Fatal(err)
		}
		return out.(client.Object)
	}
	podLabels = map[string]string{"app": name}
	replicas := int32(2)
	switch kind {
	case "Deployment":
		d := &appsv1.Deployment{ObjectMeta: meta, Spec: appsv1.DeploymentSpec{Replicas: &replicas, Selector: selector, Template: template}}
		hash := forecast.PodTemplateHash(&template, nil)
		podLabels[appsv1.DefaultDeploymentUniqueLabelKey] = hash
		rs := func(hash, revision string) *appsv1.ReplicaSet {
			return &appsv1.ReplicaSet{
				ObjectMeta: metav1.ObjectMeta{Namespace: shop, Name: name + "-" + hash, UID: types.UID("uid-" + name + "-" + hash),
					Annotations:     map[string]string{workload.RevisionAnnotation: revision},
					OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(d, appsv1.SchemeGroupVersion.WithKind("Deployment"))}},
				Spec: appsv1.ReplicaSetSpec{Replicas: &replicas, Template: template,
					Selector: spreadtest.WithMatchLabel(selector.DeepCopy(), appsv1.DefaultDeploymentUniqueLabelKey, hash)},
			}
		}
		old := rs("5f6b7c8d9", "1")
		old.Spec.Replicas = new(int32(0))
		return d, []client.Object{strip(cache.StripDeployment, d), strip(cache.StripReplicaSet, rs(hash, "2")), strip(cache.StripReplicaSet, old)},
			podLabels, deployments
	case "StatefulSet":
		s := &appsv1.StatefulSet{ObjectMeta: meta, Spec: appsv1.StatefulSetSpec{Replicas: &replicas, Selector: selector, Template: template,
			ServiceName: name, Ordinals: &appsv1.StatefulSetOrdinals{Start: 3}}, Status: appsv1.StatefulSetStatus{UpdateRevision: name + "-6c9f"}}
		podLabels[appsv1.ControllerRevisionHashLabelKey] = name + "-6c9f"
		return s, []client.Object{strip(cache.StripStatefulSet, s)}, podLabels, metav1.GroupVersionResource(appsv1.SchemeGroupVersion.WithResource("statefulsets"))
	case "ReplicaSet":
		rs := &appsv1.ReplicaSet{ObjectMeta: meta, Spec: appsv1.ReplicaSetSpec{Replicas: &replicas, Selector: selector, Template: template}}
		return rs, []client.Object{strip(cache.StripReplicaSet, rs)}, podLabels, metav1.GroupVersionResource(appsv1.SchemeGroupVersion.WithResource("replicasets"))
	default:
		rc := &v1.ReplicationController{ObjectMeta: meta, Spec: v1.ReplicationControllerSpec{Replicas: &replicas,
			Selector: map[string]string{"app": name}, Template: &template}}
		return rc, []client.Object{strip(cache.StripReplicationController, rc)}, podLabels, metav1.GroupVersionResource(v1.SchemeGroupVersion.WithResource("replicationcontrollers"))
	}
}

func TestWorkloadEndpointRefusesWhatTheAPIServerCouldNotHaveSent(t *testing.T) {
	// As cmd/webhook registers /forecast-workload.
	e := NewEndpoint(allowAll, logr.Discard(), ForWorkloads(), WithMaxBodyBytes(MaxRequestBytes))
	statefulSets := metav1.GroupVersionResource{Group: "apps", Version: "v1", Resource: "statefulsets"}
	scaleOf := func(resource metav1.GroupVersionResource) *RequestWrapper {
		s := &autoscalingv1.Scale{ObjectMeta: metav1.ObjectMeta{Namespace: shop, Name: "web"}, Spec: autoscalingv1.ScaleSpec{Replicas: 3}}
		return makeRequest().Operation(admissionv1.Update).Workload(resource, "Scale", s).Kind("autoscaling", "v1", "Scale").
			SubResource("scale").Name("web").OldObject(s)
	}
	shaped := func(w *RequestWrapper, edit func(*admissionv1.AdmissionRequest)) []byte {
		req := w.Obj()
		req.RequestSubResource = req.SubResource
		kind, resource := req.Kind, req.Resource
		req.RequestKind, req.RequestResource = &kind, &resource
		edit(&req.AdmissionRequest)
		return reviewBody(req)
	}
	unchanged := func(*admissionv1.AdmissionRequest) {}
	generated := webDeployment(3)
	generated.Name, generated.GenerateName = "", "web-"
	// A Deployment of about 3 MiB, the most the API server takes in one
	// request: its UPDATE review carries it twice.
	large := webDeployment(3)
	large.Annotations = map[string]string{"example.com/blob": strings.Repeat("x", 3<<20-4<<10)}
	tests := []struct {
		name       string
		body       []byte
		wantCode   int
		wantReason string
	}{
		{
			name:     "the CREATE of a Deployment named by generateName -> answered",
			body:     shaped(makeRequest().Workload(deployments, "Deployment", generated), unchanged),
			wantCode: http.StatusOK,
		},
		{
			name: "the UPDATE of a Deployment -> answered",
			body: shaped(makeRequest().Operation(admissionv1.Update).Workload(deployments, "Deployment", webDeployment(3)).
				Name("web").OldObject(webDeployment(2)), unchanged),
			wantCode: http.StatusOK,
		},
		{
			name:     "a scale of a StatefulSet -> answered",
			body:     shaped(scaleOf(statefulSets), unchanged),
			wantCode: http.StatusOK,
		},
		{
			name: "the UPDATE of a 3 MiB Deployment, a 6 MiB review -> answered",
			body: shaped(makeRequest().Operation(admissionv1.Update).Workload(deployments, "Deployment", large).
				Name("web").OldObject(large), unchanged),
			wantCode: http.StatusOK,
		},
		{
			name: "a review of a Secret -> 400 naming the resource",
			body: shaped(makeRequest().Workload(deployments, "Deployment", webDeployment(3)), func(r *admissionv1.AdmissionRequest) {
				r.Resource = metav1.GroupVersionResource{Version: "v1", Resource: "secrets"}
			}),
			wantCode:   http.StatusBadRequest,
			wantReason: "resource v1/secrets is not a workload",
		},
		{
			name: "a Deployment review whose requestResource is pods -> 400",
			body: shaped(makeRequest().Workload(deployments, "Deployment", webDeployment(3)), func(r *admissionv1.AdmissionRequest) {
				r.RequestResource = &metav1.GroupVersionResource{Version: "v1", Resource: "pods"}
			}),
			wantCode:   http.StatusBadRequest,
			wantReason: "requestResource v1/pods is not a workload",
		},
		{
			name: "a review of a Deployment's status -> 400",
			body: shaped(makeRequest().Operation(admissionv1.Update).Workload(deployments, "Deployment", webDeployment(3)).Name("web"),
				func(r *admissionv1.AdmissionRequest) { r.SubResource, r.RequestSubResource = "status", "status" }),
			wantCode:   http.StatusBadRequest,
			wantReason: `subresource "status", want none or scale`,
		},
		{
			name:       "a review of deployments whose kind is StatefulSet -> 400",
			body:       shaped(makeRequest().Workload(deployments, "StatefulSet", webDeployment(3)), unchanged),
			wantCode:   http.StatusBadRequest,
			wantReason: "kind apps/v1, Kind=StatefulSet for resource apps/v1/deployments",
		},
		{
			name:       "a scale whose object is a Deployment -> 400",
			body:       shaped(scaleOf(deployments).Kind("apps", "v1", "Deployment"), unchanged),
			wantCode:   http.StatusBadRequest,
			wantReason: "a scale of a kind other than autoscaling/v1 Scale",
		},
		{
			name:       "a scale without a name -> 400, before any read",
			body:       shaped(scaleOf(deployments).Name(""), unchanged),
			wantCode:   http.StatusBadRequest,
			wantReason: "no name",
		},
		{
			name: "an UPDATE without a namespace or a name -> 400 naming both",
			body: shaped(makeRequest().Operation(admissionv1.Update).Workload(deployments, "Deployment", webDeployment(3)),
				func(r *admissionv1.AdmissionRequest) { r.Namespace = "" }),
			wantCode:   http.StatusBadRequest,
			wantReason: "no namespace; no name",
		},
		{
			name:       "a review without requestKind -> 400",
			body:       shaped(scaleOf(deployments), func(r *admissionv1.AdmissionRequest) { r.RequestKind = nil }),
			wantCode:   http.StatusBadRequest,
			wantReason: "no requestKind or requestResource",
		},
		{
			name:       "an 8 MiB body, larger than two 3 MiB workloads and their review -> 413",
			body:       bytes.Repeat([]byte(" "), 8<<20),
			wantCode:   http.StatusRequestEntityTooLarge,
			wantReason: fmt.Sprintf("request body larger than %d bytes", MaxRequestBytes),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, body := post(t, e, "application/json", bytes.NewReader(tt.body))
			if code != tt.wantCode {
				t.Fatalf("status = %d, want %d (body %q)", code, tt.wantCode, oneLine(body))
			}
			if tt.wantReason != "" && !strings.Contains(body, tt.wantReason) {
				t.Errorf("reason = %q, want it to contain %q", body, tt.wantReason)
			}
		})
	}
}

// Halfway through a rollout that changes only the image, the cache keeps
// the old and the new ReplicaSet with equal templates (its transforms keep
// no containers): the forecast of a change of replicas, by an UPDATE or a
// scale, is of the current ReplicaSet's pods, as the deployment controller
// numbers it (workload.CurrentReplicaSet), under its pod-template-hash.
func TestAForecastMidRolloutIsOfTheCurrentReplicaSet(t *testing.T) {
	stored := func(image string, replicas int32) *appsv1.Deployment {
		d := webDeployment(replicas)
		d.UID = "uid-web"
		d.Spec.Template.Spec.Containers = []v1.Container{{Name: "web", Image: image}}
		return d
	}
	strip := func(transform toolscache.TransformFunc, obj client.Object) client.Object {
		out, err := transform(obj)
		if err != nil {
			t.Fatal(err)
		}
		return out.(client.Object)
	}
	d := stored("web:2", 2)
	rs := func(hash, revision, image string, replicas int32) *appsv1.ReplicaSet {
		tmpl := *stored(image, replicas).Spec.Template.DeepCopy()
		tmpl.Labels[appsv1.DefaultDeploymentUniqueLabelKey] = hash
		return &appsv1.ReplicaSet{
			ObjectMeta: metav1.ObjectMeta{Namespace: shop, Name: "web-" + hash, UID: types.UID("uid-web-" + hash),
				Annotations:     map[string]string{workload.RevisionAnnotation: revision},
				OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(d, appsv1.SchemeGroupVersion.WithKind("Deployment"))}},
			Spec: appsv1.ReplicaSetSpec{Replicas: &replicas, Template: tmpl,
				Selector: spreadtest.WithMatchLabel(d.Spec.Selector.DeepCopy(), appsv1.DefaultDeploymentUniqueLabelKey, hash)},
		}
	}
	// The old revision is scaled up still: the transform keeps its
	// template, which the new one's equals once stripped. The cache keeps
	// no creationTimestamp either, and the old one's name sorts first.
	cached := fake.NewClientBuilder().WithObjects(strip(cache.StripDeployment, d),
		strip(cache.StripReplicaSet, rs("5d8c", "1", "web:1", 1)), strip(cache.StripReplicaSet, rs("7f9b", "2", "web:2", 2))).Build()
	scale := func(replicas int32) *autoscalingv1.Scale {
		return &autoscalingv1.Scale{ObjectMeta: metav1.ObjectMeta{Namespace: shop, Name: "web"}, Spec: autoscalingv1.ScaleSpec{Replicas: replicas}}
	}
	tests := []struct {
		name string
		req  admission.Request
	}{
		{name: "an UPDATE from 2 to 3 replicas, the template as it was",
			req: makeRequest().Operation(admissionv1.Update).Workload(deployments, "Deployment", stored("web:2", 3)).OldObject(stored("web:2", 2)).Obj()},
		{name: "a scale from 2 to 3",
			req: makeRequest().Operation(admissionv1.Update).Workload(deployments, "Scale", scale(3)).
				Kind("autoscaling", "v1", "Scale").SubResource("scale").Name("web").OldObject(scale(2)).Obj()},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := &WorkloadForecaster{Workloads: cached}
			w, err := h.workload(t.Context(), tt.req)
			if err != nil {
				t.Fatal(err)
			}
			got := struct {
				Hash               string
				Existing, Replicas int32
			}{w.Pod.Labels[appsv1.DefaultDeploymentUniqueLabelKey], w.Existing, w.Replicas}
			want := struct {
				Hash               string
				Existing, Replicas int32
			}{"7f9b", 2, 3}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("the workload forecast (-want +got):\n%s", diff)
			}
		})
	}
}
