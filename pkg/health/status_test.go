package health_test

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/spreadguard/spreadguard/pkg/apis/spreadguard/v1alpha1"
	"github.com/spreadguard/spreadguard/pkg/health"
	"github.com/spreadguard/spreadguard/pkg/policy"
	pt "github.com/spreadguard/spreadguard/pkg/policy/policytest"
	"github.com/spreadguard/spreadguard/pkg/spread"
)

func TestReady(t *testing.T) {
	ix := spread.IndexFromSnapshot(spread.Snapshot{
		Nodes: threeZoneNodes(),
		Pods:  []*v1.Pod{webPod("a-0")},
	})
	counts := health.Counts{Workloads: 3, Spread: 1, Skewed: 1, Uncovered: 1}
	tests := []struct {
		name   string
		policy *pt.SpreadPolicyWrapper
		want   metav1.Condition
	}{
		{
			name: "a spec the schema let through but validation refuses names the field, before anything else",
			policy: pt.MakeSpreadPolicy().Constraint(pt.MakeConstraint().TopologyKey("example.com/rack").MaxSkew(1).DoNotSchedule().Obj(),
				pt.MakeConstraint().TopologyKey("example.com/rack").MaxSkew(2).DoNotSchedule().Obj()),
			want: metav1.Condition{Type: "Ready", Status: "False", Reason: "Invalid",
				Message: `spec.constraints[1]: Duplicate value: "{example.com/rack, DoNotSchedule}": has the same topologyKey and whenUnsatisfiable ` +
					`as spec.constraints[0]; the apiserver refuses a pod with two such constraints, so merge them into one; ` +
					`spreadguard applies this policy to no pod until it is corrected`},
		},
		{
			name:   "a policy over a key the nodes carry, selecting a running pod, is ready and sums up its workloads",
			policy: pt.MakeSpreadPolicy().PodLabel("app", "web").Constraint(pt.MakeConstraint().Zone().MaxSkew(1).DoNotSchedule().Obj()),
			want: metav1.Condition{Type: "Ready", Status: "True", Reason: "Audited",
				Message: "3 workloads: 1 spread, 1 skewed, 1 uncovered"},
		},
		{
			name: "a topology key no node carries names the constraint's field",
			policy: pt.MakeSpreadPolicy().Constraint(pt.MakeConstraint().Zone().MaxSkew(1).DoNotSchedule().Obj(),
				pt.MakeConstraint().TopologyKey("example.com/rack").MaxSkew(1).DoNotSchedule().Obj()),
			want: metav1.Condition{Type: "Ready", Status: "False", Reason: "UnknownTopologyKey",
				Message: `spec.constraints[1].topologyKey: no node carries the label "example.com/rack", so the constraint has no domain to spread over; label the nodes or correct the key`},
		},
		{
			name:   "a podSelector no pod matches names spec.podSelector",
			policy: pt.MakeSpreadPolicy().PodLabel("app", "wbe").Constraint(pt.MakeConstraint().Zone().MaxSkew(1).DoNotSchedule().Obj()),
			want: metav1.Condition{Type: "Ready", Status: "False", Reason: "NoPodSelected",
				Message: "spec.podSelector: no running or pending pod in the policy's scope matches app=wbe; correct the selector or the pods' labels"},
		},
		{
			name:   "a policy without podSelector is ready in an empty namespace: it waits for pods",
			policy: pt.MakeSpreadPolicy().Constraint(pt.MakeConstraint().Zone().MaxSkew(1).DoNotSchedule().Obj()),
			want: metav1.Condition{Type: "Ready", Status: "True", Reason: "Audited",
				Message: "3 workloads: 1 spread, 1 skewed, 1 uncovered"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := tt.policy.Obj()
			got := health.Ready(&p.Spec, policy.ValidateSpreadPolicy(p), []string{ns}, counts, ix)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Ready() (-want +got):\n%s", diff)
			}
		})
	}
}

func TestSetStatus(t *testing.T) {
	ready := metav1.Condition{Type: "Ready", Status: "True", Reason: "Audited", Message: "1 workloads: 1 spread, 0 skewed, 0 uncovered"}
	counts := health.Counts{Workloads: 1, Spread: 1}
	var st v1alpha1.PolicyStatus
	if !health.SetStatus(&st, 2, ready, counts) {
		t.Fatalf("SetStatus() on an empty status reported no change")
	}
	want := v1alpha1.PolicyStatus{ObservedGeneration: 2, Workloads: 1, Spread: 1, Conditions: []metav1.Condition{
		{Type: "Ready", Status: "True", Reason: "Audited", Message: ready.Message, ObservedGeneration: 2},
	}}
	if diff := cmp.Diff(want, st, cmpopts.IgnoreFields(metav1.Condition{}, "LastTransitionTime")); diff != "" {
		t.Errorf("status (-want +got):\n%s", diff)
	}
	// As if written by an earlier pass, an hour ago.
	written := metav1.NewTime(time.Now().Add(-time.Hour).Truncate(time.Second))
	st.Conditions[0].LastTransitionTime = written
	if health.SetStatus(&st, 2, ready, counts) {
		t.Errorf("SetStatus() with what the status already says reported a change")
	}
	skewed := health.Counts{Workloads: 1, Skewed: 1}
	ready.Message = "1 workloads: 0 spread, 1 skewed, 0 uncovered"
	if !health.SetStatus(&st, 2, ready, skewed) {
		t.Errorf("SetStatus() with new counts reported no change")
	}
	if got := st.Conditions[0].LastTransitionTime; !got.Equal(&written) {
		t.Errorf("Ready stayed True but its LastTransitionTime moved from %v to %v", written, got)
	}
}
