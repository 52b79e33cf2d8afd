package admission

import (
	"net/http"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/spreadguard/spreadguard/pkg/policy/policytest"
)

func TestPolicyValidators(t *testing.T) {
	zone := policytest.MakeConstraint().Zone().MaxSkew(1).DoNotSchedule().Obj()
	valid := policytest.MakeSpreadPolicy().Namespace(shop).Name("zones").Constraint(zone).Obj()
	badKey := policytest.MakeSpreadPolicy().Namespace(shop).Name("zones").
		Constraint(policytest.MakeConstraint().TopologyKey("zone with spaces").MaxSkew(1).DoNotSchedule().Obj()).Obj()
	badSelector := policytest.MakeSpreadPolicy().Namespace(shop).Name("zones").Constraint(zone).
		PodExpression("app", metav1.LabelSelectorOpIn).Obj()
	validCluster := policytest.MakeClusterSpreadPolicy().Name("default").Constraint(zone).Obj()
	badNamespaceSelector := policytest.MakeClusterSpreadPolicy().Name("default").Constraint(zone).
		NamespaceExpression("team", metav1.LabelSelectorOpExists, "x").Obj()

	// The API server sends each request to the endpoint of its resource.
	endpoints := map[string]admission.Handler{
		"spreadpolicies":        NewSpreadPolicyValidator(testDecoder, nil),
		"clusterspreadpolicies": NewClusterSpreadPolicyValidator(testDecoder, nil),
	}
	tests := []struct {
		name     string
		req      admission.Request
		wantCode int32
		// wantMsg are substrings of the message, in order.
		wantMsg []string
	}{
		{
			name:     "valid SpreadPolicy created -> allowed",
			req:      makeRequest().SpreadPolicy(valid).Obj(),
			wantCode: http.StatusOK,
		},
		{
			name:     "SpreadPolicy whose topologyKey is not a label name -> denied naming the field",
			req:      makeRequest().SpreadPolicy(badKey).Obj(),
			wantCode: http.StatusForbidden,
			wantMsg:  []string{"SpreadPolicy shop/zones is invalid: ", "spec.constraints[0].topologyKey", "zone with spaces"},
		},
		{
			name:     "SpreadPolicy updated to an In requirement without values -> denied naming the field",
			req:      makeRequest().Operation(admissionv1.Update).SpreadPolicy(badSelector).Obj(),
			wantCode: http.StatusForbidden,
			wantMsg:  []string{"spec.podSelector.matchExpressions[0].values"},
		},
		{
			name:     "invalid SpreadPolicy deleted -> allowed",
			req:      makeRequest().Operation(admissionv1.Delete).SpreadPolicy(badKey).Obj(),
			wantCode: http.StatusOK,
		},
		{
			name:     "ClusterSpreadPolicy sent to the SpreadPolicy endpoint -> 400",
			req:      makeRequest().ClusterSpreadPolicy(validCluster).Resource("spreadpolicies").Obj(),
			wantCode: http.StatusBadRequest,
			wantMsg:  []string{"expected a spreadguard.io/v1alpha1 SpreadPolicy, got spreadguard.io/v1alpha1 ClusterSpreadPolicy"},
		},
		{
			name:     "SpreadPolicy that is not JSON -> 400",
			req:      makeRequest().SpreadPolicy(valid).Raw([]byte("[")).Obj(),
			wantCode: http.StatusBadRequest,
			wantMsg:  []string{"decoding the SpreadPolicy"},
		},
		{
			name:     "valid ClusterSpreadPolicy updated -> allowed",
			req:      makeRequest().Operation(admissionv1.Update).ClusterSpreadPolicy(validCluster).Obj(),
			wantCode: http.StatusOK,
		},
		{
			name:     "ClusterSpreadPolicy with Exists and values in its namespaceSelector -> denied naming the field",
			req:      makeRequest().ClusterSpreadPolicy(badNamespaceSelector).Obj(),
			wantCode: http.StatusForbidden,
			wantMsg:  []string{"ClusterSpreadPolicy default is invalid: ", "spec.namespaceSelector.matchExpressions[0].values"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			handle(t, endpoints[tt.req.Resource.Resource], tt.req, tt.wantCode, tt.wantMsg...)
		})
	}
}

func TestPolicyValidatorCountsDenials(t *testing.T) {
	m := newTestMetrics(t)
	h := NewSpreadPolicyValidator(testDecoder, m)
	bad := policytest.MakeSpreadPolicy().Namespace(shop).Name("empty").Obj() // no constraints
	h.Handle(t.Context(), makeRequest().SpreadPolicy(bad).Obj())
	if got := testutil.ToFloat64(m.Denials.WithLabelValues(DenialInvalidPolicy, shop)); got != 1 {
		t.Errorf("denials{reason=invalid_policy} = %v, want 1", got)
	}
	if got := testutil.ToFloat64(m.Requests.WithLabelValues(WebhookValidateSpreadPolicy, ResultDenied)); got != 1 {
		t.Errorf("requests{webhook=validate-spreadpolicy,result=denied} = %v, want 1", got)
	}
}
