package admission

import (
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus/testutil"
	admissionv1 "k8s.io/api/admission/v1"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/spreadguard/spreadguard/pkg/forecast"
	"github.com/spreadguard/spreadguard/pkg/forecast/forecasttest"
	"github.com/spreadguard/spreadguard/pkg/policy/policytest"
	"github.com/spreadguard/spreadguard/pkg/spread"
	"github.com/spreadguard/spreadguard/pkg/spread/spreadtest"
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
	src := shopSources()
	src.Policies[0] = policytest.MakeSpreadPolicy().Namespace(shop).Name("zones").Constraint(
		policytest.MakeConstraint().Zone().MaxSkew(1).DoNotSchedule().NodeTaintsPolicy(v1.NodeInclusionPolicyIgnore).Obj()).Obj()
	stored := webDeployment(2)
	reader := fake.NewClientBuilder().WithObjects(stored).Build()
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
			h := &WorkloadForecaster{Sources: staticSources(src), Config: testEngineConfig, Cluster: cluster,
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
