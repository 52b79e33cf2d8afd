package server

import (
	"net/http"

	"github.com/go-logr/logr"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrladmission "sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/spreadguard/spreadguard/pkg/admission"
	"github.com/spreadguard/spreadguard/pkg/apis/spreadguard/v1alpha1"
	"github.com/spreadguard/spreadguard/pkg/engine"
	"github.com/spreadguard/spreadguard/pkg/forecast"
	"github.com/spreadguard/spreadguard/pkg/spread"
)

// The HTTP paths of the admission endpoints, as the chart's webhook
// configurations name them.
const (
	PathMutatePod                   = "/mutate-v1-pod"
	PathValidatePod                 = "/validate-v1-pod"
	PathValidateSpreadPolicy        = "/validate-spreadguard-io-v1alpha1-spreadpolicy"
	PathValidateClusterSpreadPolicy = "/validate-spreadguard-io-v1alpha1-clusterspreadpolicy"
	// PathForecastWorkload answers Deployments, StatefulSets, ReplicaSets
	// and ReplicationControllers (and their scale) with forecast warnings.
	PathForecastWorkload = "/forecast-workload"
)

// Deciders is what the admission endpoints decide with.
type Deciders struct {
	Sources admission.SourcesFunc
	Engine  engine.Config
	// Cluster holds the cluster's node and pod counts (the informer-fed
	// spread.Index): what a pod is checked and a workload forecast
	// against.
	Cluster interface {
		spread.Checker
		forecast.Cluster
	}
	// Synced reports whether the caches behind Cluster and Sources are
	// complete.
	Synced            func() bool
	RefuseUntilSynced bool
	// FailurePolicy is the pod webhook configurations' (--failure-policy).
	FailurePolicy admissionregistrationv1.FailurePolicyType
	Recorder      events.EventRecorder
	Metrics       *admission.Metrics
	// Workloads reads the workload a scale names (the informer cache).
	Workloads client.Reader
	// Scheme decodes the policies.
	Scheme *runtime.Scheme
}

// Endpoints returns every admission endpoint by its path, each logging
// under log with its path.
func Endpoints(d Deciders, log logr.Logger) map[string]http.Handler {
	decoder := ctrladmission.NewDecoder(d.Scheme)
	pods := metav1.GroupVersionResource{Version: "v1", Resource: "pods"}
	spreadPolicies := metav1.GroupVersionResource(v1alpha1.GroupVersion.WithResource("spreadpolicies"))
	clusterPolicies := metav1.GroupVersionResource(v1alpha1.GroupVersion.WithResource("clusterspreadpolicies"))
	podWebhook := admission.PodWebhook{Sources: d.Sources, Config: d.Engine, FailurePolicy: d.FailurePolicy, Metrics: d.Metrics}
	endpoints := []struct {
		path    string
		handler ctrladmission.Handler
		opts    []admission.EndpointOption
	}{
		// The mutating endpoint reviews CREATEs only, whose reviews carry
		// one object; the others also review UPDATEs, which carry two.
		{PathMutatePod, &admission.PodMutator{PodWebhook: podWebhook},
			[]admission.EndpointOption{admission.ForResource(pods, true), admission.WithMaxBodyBytes(admission.MaxCreateReviewBytes)}},
		// Also the UPDATE that removes a gated pod's last scheduling gate.
		{PathValidatePod, &admission.PodValidator{PodWebhook: podWebhook, Checker: d.Cluster, Synced: d.Synced,
			RefuseUntilSynced: d.RefuseUntilSynced, Recorder: d.Recorder},
			[]admission.EndpointOption{admission.ForResource(pods, true)}},
		{PathValidateSpreadPolicy, admission.NewSpreadPolicyValidator(decoder, d.Metrics),
			[]admission.EndpointOption{admission.ForResource(spreadPolicies, true)}},
		{PathValidateClusterSpreadPolicy, admission.NewClusterSpreadPolicyValidator(decoder, d.Metrics),
			[]admission.EndpointOption{admission.ForResource(clusterPolicies, false)}},
		// A scale carries no template: the workload is read from the cache.
		// A workload's UPDATE carries two objects, each up to the API
		// server's 3 MiB request limit: the default cap, as for pod UPDATEs.
		{PathForecastWorkload, &admission.WorkloadForecaster{Sources: d.Sources, Config: d.Engine, Cluster: d.Cluster,
			Synced: d.Synced, Workloads: d.Workloads, Metrics: d.Metrics},
			[]admission.EndpointOption{admission.ForWorkloads(), admission.WithMaxBodyBytes(admission.MaxRequestBytes)}},
	}
	out := make(map[string]http.Handler, len(endpoints))
	for _, e := range endpoints {
		out[e.path] = admission.NewEndpoint(e.handler, log.WithName("admission").WithValues("webhook", e.path), e.opts...)
	}
	return out
}
