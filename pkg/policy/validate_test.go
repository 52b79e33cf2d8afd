package policy_test

import (
	"time"

	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/spreadguard/spreadguard/pkg/apis/spreadguard/v1alpha1"
	"github.com/spreadguard/spreadguard/pkg/policy"
	pt "github.com/spreadguard/spreadguard/pkg/policy/policytest"
)

// summarize turns errs into "<type>: <path>" lines, the part of an error a
// test can pin without copying upstream's wording.
func summarize(errs field.ErrorList) []string {
	var out []string
	for _, e := range errs {
		out = append(out, fmt.Sprintf("%s: %s", e.Type, e.Field))
	}
	return out
}

func TestValidateSpreadPolicy(t *testing.T) {
	base := func() *pt.SpreadPolicyWrapper { return pt.MakeSpreadPolicy().Namespace("shop").Name("zones") }
	nineZones := base()
	for i := range 9 {
		nineZones.Constraint(pt.MakeConstraint().TopologyKey(fmt.Sprintf("example.com/level-%d", i)).MaxSkew(1).DoNotSchedule().Obj())
	}

	tests := []struct {
		name string
		p    *v1alpha1.SpreadPolicy
		want []string
		// wantDetail, when set, must appear in the first error's message.
		wantDetail string
	}{
		{
			name: "one hard zone constraint -> valid",
			p:    base().Constraint(zoneHard().Obj()).Obj(),
		},
		{
			name: "every field set to a valid value -> valid",
			p: base().Priority(-3).Action(v1alpha1.ActionAudit).
				PodLabel("app", "web").PodExpression("tier", metav1.LabelSelectorOpNotIn, "batch").
				Constraint(
					pt.MakeConstraint().Zone().MaxSkew(2).DoNotSchedule().MinDomains(3).
						NodeAffinityPolicy(v1.NodeInclusionPolicyIgnore).NodeTaintsPolicy(v1.NodeInclusionPolicyHonor).
						MatchLabelKeys("pod-template-hash", "example.com/track").Obj(),
					// Same key as [0], other whenUnsatisfiable: a different constraint.
					pt.MakeConstraint().Zone().MaxSkew(1).ScheduleAnyway().Obj(),
					hostSoft().Obj(),
				).Obj(),
		},
		{
			name: "8 constraints, the maximum -> valid",
			p: func() *v1alpha1.SpreadPolicy {
				p := nineZones.Obj()
				p.Spec.Constraints = p.Spec.Constraints[:8]
				return p
			}(),
		},
		{
			name: "empty validation block -> valid, the webhook's default applies",
			p:    base().Constraint(zoneHard().Obj()).Action("").Obj(),
		},
		{
			name: "nil policy -> spec required",
			p:    nil,
			want: []string{"Required value: spec"},
		},
		{
			name: "no constraints -> spec.constraints required",
			p:    base().Obj(),
			want: []string{"Required value: spec.constraints"},
		},
		{
			name: "9 constraints -> too many",
			p:    nineZones.Obj(),
			want: []string{"Too many: spec.constraints"},
		},
		{
			name: "maxSkew 0 in the second constraint -> spec.constraints[1].maxSkew",
			p:    base().Constraint(hostSoft().Obj(), zoneHard().MaxSkew(0).Obj()).Obj(),
			want: []string{"Invalid value: spec.constraints[1].maxSkew"},
		},
		{
			name: "empty topologyKey -> required",
			p:    base().Constraint(zoneHard().TopologyKey("").Obj()).Obj(),
			want: []string{"Required value: spec.constraints[0].topologyKey"},
		},
		{
			name: "topologyKey 'zone name' is not a qualified name -> spec.constraints[1].topologyKey",
			p:    base().Constraint(hostSoft().Obj(), zoneHard().TopologyKey("zone name").Obj()).Obj(),
			want: []string{"Invalid value: spec.constraints[1].topologyKey"},
		},
		{
			name: "topologyKey with two slashes -> invalid",
			p:    base().Constraint(zoneHard().TopologyKey("a/b/c").Obj()).Obj(),
			want: []string{"Invalid value: spec.constraints[0].topologyKey"},
		},
		{
			name: "whenUnsatisfiable unset -> required",
			p:    base().Constraint(zoneHard().WhenUnsatisfiable("").Obj()).Obj(),
			want: []string{"Required value: spec.constraints[0].whenUnsatisfiable"},
		},
		{
			name:       "whenUnsatisfiable Sometimes -> not supported, listing the two values",
			p:          base().Constraint(zoneHard().WhenUnsatisfiable("Sometimes").Obj()).Obj(),
			want:       []string{"Unsupported value: spec.constraints[0].whenUnsatisfiable"},
			wantDetail: `"DoNotSchedule", "ScheduleAnyway"`,
		},
		{
			name: "minDomains 0 -> spec.constraints[0].minDomains",
			p:    base().Constraint(zoneHard().MinDomains(0).Obj()).Obj(),
			want: []string{"Invalid value: spec.constraints[0].minDomains"},
		},
		{
			name:       "minDomains 3 with ScheduleAnyway -> only with DoNotSchedule",
			p:          base().Constraint(hostSoft().MinDomains(3).Obj()).Obj(),
			want:       []string{"Invalid value: spec.constraints[0].minDomains"},
			wantDetail: "can only be used with whenUnsatisfiable: DoNotSchedule",
		},
		{
			name: "nodeAffinityPolicy Always -> not supported",
			p:    base().Constraint(zoneHard().NodeAffinityPolicy("Always").Obj()).Obj(),
			want: []string{"Unsupported value: spec.constraints[0].nodeAffinityPolicy"},
		},
		{
			name: "nodeTaintsPolicy honor (lower case) -> not supported",
			p:    base().Constraint(zoneHard().NodeTaintsPolicy("honor").Obj()).Obj(),
			want: []string{"Unsupported value: spec.constraints[0].nodeTaintsPolicy"},
		},
		{
			name: "matchLabelKeys [pod-template-hash, 'bad key'] -> spec.constraints[0].matchLabelKeys[1]",
			p:    base().Constraint(zoneHard().MatchLabelKeys("pod-template-hash", "bad key").Obj()).Obj(),
			want: []string{"Invalid value: spec.constraints[0].matchLabelKeys[1]"},
		},
		{
			name: "matchLabelKeys [a, b, a] -> duplicate at [2]",
			p:    base().Constraint(zoneHard().MatchLabelKeys("a", "b", "a").Obj()).Obj(),
			want: []string{"Duplicate value: spec.constraints[0].matchLabelKeys[2]"},
		},
		{
			name:       "labelSelector set -> forbidden, saying it is derived",
			p:          base().Constraint(zoneHard().LabelSelector(&metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}).Obj()).Obj(),
			want:       []string{"Forbidden: spec.constraints[0].labelSelector"},
			wantDetail: "derives each pod's selector",
		},
		{
			name:       "{zone, DoNotSchedule} at [0] and [2] -> duplicate at spec.constraints[2], pointing at [0]",
			p:          base().Constraint(zoneHard().Obj(), hostSoft().Obj(), zoneHard().MaxSkew(3).Obj()).Obj(),
			want:       []string{"Duplicate value: spec.constraints[2]"},
			wantDetail: "spec.constraints[0]",
		},
		{
			name: "podSelector operator Like -> spec.podSelector.matchExpressions[0].operator",
			p:    base().Constraint(zoneHard().Obj()).PodExpression("app", "Like", "web").Obj(),
			want: []string{"Invalid value: spec.podSelector.matchExpressions[0].operator"},
		},
		{
			name: "podSelector value with a space -> spec.podSelector.matchLabels",
			p:    base().Constraint(zoneHard().Obj()).PodLabel("app", "my app").Obj(),
			want: []string{"Invalid value: spec.podSelector.matchLabels"},
		},
		{
			name: "podSelector Exists with values -> spec.podSelector.matchExpressions[0].values",
			p:    base().Constraint(zoneHard().Obj()).PodExpression("app", metav1.LabelSelectorOpExists, "web").Obj(),
			want: []string{"Forbidden: spec.podSelector.matchExpressions[0].values"},
		},
		{
			name:       "validation.action Block -> not supported, listing Deny, Warn, Audit",
			p:          base().Constraint(zoneHard().Obj()).Action("Block").Obj(),
			want:       []string{"Unsupported value: spec.validation.action"},
			wantDetail: `"Deny", "Warn", "Audit"`,
		},
		{
			name:       "deletionCost Off -> not supported, listing Enabled, Disabled",
			p:          base().Constraint(zoneHard().Obj()).DeletionCost("Off").Obj(),
			want:       []string{"Unsupported value: spec.deletionCost"},
			wantDetail: `"Enabled", "Disabled"`,
		},
		{
			name: "deletionCost Disabled -> valid",
			p:    base().Constraint(zoneHard().Obj()).DeletionCost(v1alpha1.DeletionCostDisabled).Obj(),
		},
		{
			name: "fallback after 5s -> spec.fallback.after, at least 10s",
			p:    base().Constraint(zoneHard().Obj()).Fallback(5*time.Second, 0).Obj(),
			want: []string{"Invalid value: spec.fallback.after"},
		},
		{
			name: "fallback maxDomains -1 -> spec.fallback.maxDomains, at least 1",
			p:    base().Constraint(zoneHard().Obj()).Fallback(time.Minute, -1).Obj(),
			want: []string{"Invalid value: spec.fallback.maxDomains"},
		},
		{
			name: "fallback with its defaults -> valid",
			p:    base().Constraint(zoneHard().Obj()).Fallback(0, 0).Obj(),
		},
		{
			name: "fallback after 10s and 2 domains -> valid",
			p:    base().Constraint(zoneHard().Obj()).Fallback(10*time.Second, 2).Obj(),
		},
		{
			name: "four problems at once -> all four, in field order",
			p: base().PodExpression("app", "Like").Action("deny").Constraint(
				zoneHard().MaxSkew(-1).Obj(),
				zoneHard().TopologyKey("").WhenUnsatisfiable("").Obj(),
			).Obj(),
			want: []string{
				"Invalid value: spec.podSelector.matchExpressions[0].operator",
				"Invalid value: spec.constraints[0].maxSkew",
				"Required value: spec.constraints[1].topologyKey",
				"Required value: spec.constraints[1].whenUnsatisfiable",
				"Unsupported value: spec.validation.action",
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			errs := policy.ValidateSpreadPolicy(tt.p)
			if diff := cmp.Diff(tt.want, summarize(errs)); diff != "" {
				t.Errorf("ValidateSpreadPolicy (-want +got):\n%s\nerrors: %v", diff, errs)
			}
			if tt.wantDetail != "" && (len(errs) == 0 || !strings.Contains(errs[0].Error(), tt.wantDetail)) {
				t.Errorf("first error %v does not contain %q", errs, tt.wantDetail)
			}
		})
	}
}

func TestValidateClusterSpreadPolicy(t *testing.T) {
	base := func() *pt.ClusterSpreadPolicyWrapper {
		return pt.MakeClusterSpreadPolicy().Name("defaults").Constraint(zoneHard().Obj())
	}
	tests := []struct {
		name string
		p    *v1alpha1.ClusterSpreadPolicy
		want []string
	}{
		{
			name: "namespaceSelector and podSelector both valid -> valid",
			p: base().NamespaceLabel("env", "prod").
				NamespaceExpression(v1.LabelMetadataName, metav1.LabelSelectorOpNotIn, "kube-system").
				PodLabel("app", "web").Obj(),
		},
		{
			name: "nil policy -> spec required",
			p:    nil,
			want: []string{"Required value: spec"},
		},
		{
			name: "namespaceSelector In without values -> spec.namespaceSelector.matchExpressions[0].values",
			p:    base().NamespaceExpression("env", metav1.LabelSelectorOpIn).Obj(),
			want: []string{"Required value: spec.namespaceSelector.matchExpressions[0].values"},
		},
		{
			name: "namespaceSelector key '-env' -> spec.namespaceSelector.matchLabels",
			p:    base().NamespaceLabel("-env", "prod").Obj(),
			want: []string{"Invalid value: spec.namespaceSelector.matchLabels"},
		},
		{
			name: "bad podSelector, bad namespaceSelector and a labelSelector -> all three, in field order",
			p: base().PodExpression("app", "Like").NamespaceExpression("env", metav1.LabelSelectorOpDoesNotExist, "x").
				Constraint(hostSoft().LabelSelector(&metav1.LabelSelector{}).Obj()).Obj(),
			want: []string{
				"Invalid value: spec.podSelector.matchExpressions[0].operator",
				"Forbidden: spec.namespaceSelector.matchExpressions[0].values",
				"Forbidden: spec.constraints[1].labelSelector",
			},
		},
		{
			name: "shared fields are checked as for a SpreadPolicy: minDomains with ScheduleAnyway",
			p:    base().Constraint(hostSoft().MinDomains(2).Obj()).Obj(),
			want: []string{"Invalid value: spec.constraints[1].minDomains"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			errs := policy.ValidateClusterSpreadPolicy(tt.p)
			if diff := cmp.Diff(tt.want, summarize(errs)); diff != "" {
				t.Errorf("ValidateClusterSpreadPolicy (-want +got):\n%s\nerrors: %v", diff, errs)
			}
		})
	}
}
