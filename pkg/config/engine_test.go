package config

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/spf13/pflag"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/spreadguard/spreadguard/pkg/apis/spreadguard/v1alpha1"
	"github.com/spreadguard/spreadguard/pkg/engine"
	"github.com/spreadguard/spreadguard/pkg/lookup"
	"github.com/spreadguard/spreadguard/pkg/spread"
)

// engineWith returns the webhook's defaults changed by fn.
func engineWith(fn func(e *Decisions)) Decisions {
	e := NewDecisions()
	fn(&e)
	return e
}

// parse binds Decisions' flags to start and parses args into it, as either
// binary does, and returns the flag set to tell which flags were given.
func parse(t *testing.T, start Decisions, args ...string) (Decisions, *pflag.FlagSet) {
	t.Helper()
	fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
	e := start
	e.AddFlags(fs)
	if err := fs.Parse(args); err != nil {
		t.Fatalf("parsing %q: %v", args, err)
	}
	return e, fs
}

func TestEngineFlagsBindStraightIntoTheFields(t *testing.T) {
	nodes := engineWith(func(e *Decisions) { e.MessageDetail = spread.DetailNodes })
	tests := []struct {
		name  string
		start Decisions
		args  []string
		want  Decisions
	}{
		{
			name:  "no flags -> the webhook's defaults",
			start: NewDecisions(),
			want:  NewDecisions(),
		},
		{
			name:  "no flags on a struct whose message detail is nodes -> nodes: the struct's value is the default",
			start: nodes,
			want:  nodes,
		},
		{
			name:  "every flag given -> every field set from its flag",
			start: NewDecisions(),
			args: []string{"--default-action=Warn", "--excluded-namespaces=a,b", "--message-detail=nodes",
				"--autoscaler-karpenter=false", "--node-group-label=eks.amazonaws.com/nodegroup", "--autoscaler-zones=us-east-1a,us-east-1b",
				"--cluster-autoscaler-status=autoscaling/ca-status"},
			want: Decisions{DefaultAction: v1alpha1.ActionWarn, ExcludedNamespaces: []string{"a", "b"},
				MessageDetail: spread.DetailNodes, AutoscalerKarpenter: ToggleFalse, NodeGroupLabel: "eks.amazonaws.com/nodegroup",
				AutoscalerZones: []string{"us-east-1a", "us-east-1b"}, ClusterAutoscalerStatus: "autoscaling/ca-status"},
		},
		{
			name:  "--excluded-namespaces given twice -> both lists, the default replaced",
			start: NewDecisions(),
			args:  []string{"--excluded-namespaces=a", "--excluded-namespaces=b,c"},
			want:  engineWith(func(e *Decisions) { e.ExcludedNamespaces = []string{"a", "b", "c"} }),
		},
		{
			name:  "a value Validate refuses -> taken as given, for Validate to name",
			start: NewDecisions(),
			args:  []string{"--default-action=deny"},
			want:  engineWith(func(e *Decisions) { e.DefaultAction = "deny" }),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, _ := parse(t, tt.start, tt.args...)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Decisions after %q (-want +got):\n%s", tt.args, diff)
			}
		})
	}
}

func TestEngineValidate(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want field.ErrorList
	}{
		{name: "defaults -> valid"},
		{name: "every value valid -> valid", args: []string{"--default-action=Audit", "--excluded-namespaces=spreadguard-system",
			"--message-detail=nodes", "--autoscaler-karpenter=true", "--node-group-label=cloud.google.com/gke-nodepool"}},
		{name: "lowercase action deny -> defaultAction not supported", args: []string{"--default-action=deny"},
			want: field.ErrorList{field.NotSupported[string](field.NewPath("defaultAction"), nil, nil)}},
		{name: "second excluded namespace with capitals -> excludedNamespaces[1] invalid", args: []string{"--excluded-namespaces=ok,Not-OK"},
			want: field.ErrorList{field.Invalid(field.NewPath("excludedNamespaces").Index(1), nil, "")}},
		{name: "excluded namespace with a space after the comma -> excludedNamespaces[1] invalid", args: []string{"--excluded-namespaces=a, b"},
			want: field.ErrorList{field.Invalid(field.NewPath("excludedNamespaces").Index(1), nil, "")}},
		{name: "message detail all -> messageDetail not supported", args: []string{"--message-detail=all"},
			want: field.ErrorList{field.NotSupported[string](field.NewPath("messageDetail"), nil, nil)}},
		{name: "karpenter yes -> autoscalerKarpenter not supported", args: []string{"--autoscaler-karpenter=yes"},
			want: field.ErrorList{field.NotSupported[string](field.NewPath("autoscalerKarpenter"), nil, nil)}},
		{name: "node group label with a space -> nodeGroupLabel invalid", args: []string{"--node-group-label=node group"},
			want: field.ErrorList{field.Invalid(field.NewPath("nodeGroupLabel"), nil, "")}},
		{name: "zones eu-west-1a and eu-west-1b -> valid", args: []string{"--autoscaler-zones=eu-west-1a,eu-west-1b"}},
		{name: "zones with a trailing comma -> autoscalerZones[1] invalid: an empty zone", args: []string{"--autoscaler-zones=eu-west-1a,"},
			want: field.ErrorList{field.Invalid(field.NewPath("autoscalerZones").Index(1), nil, "")}},
		{name: "zone with a space -> autoscalerZones[0] invalid: no label value", args: []string{"--autoscaler-zones=eu west 1a"},
			want: field.ErrorList{field.Invalid(field.NewPath("autoscalerZones").Index(0), nil, "")}},
		{name: "zone a listed twice -> autoscalerZones[2] duplicate", args: []string{"--autoscaler-zones=a,b,a"},
			want: field.ErrorList{field.Duplicate(field.NewPath("autoscalerZones").Index(2), nil)}},
		{name: "no cluster-autoscaler status -> valid", args: []string{"--cluster-autoscaler-status="}},
		{name: "cluster-autoscaler status without its namespace -> clusterAutoscalerStatus invalid", args: []string{"--cluster-autoscaler-status=cluster-autoscaler-status"},
			want: field.ErrorList{field.Invalid(field.NewPath("clusterAutoscalerStatus"), nil, "")}},
		{name: "cluster-autoscaler status in namespace Kube_System -> clusterAutoscalerStatus invalid", args: []string{"--cluster-autoscaler-status=Kube_System/status"},
			want: field.ErrorList{field.Invalid(field.NewPath("clusterAutoscalerStatus"), nil, "")}},
		{name: "action and detail wrong -> two errors in field order", args: []string{"--message-detail=", "--default-action=Block"},
			want: field.ErrorList{
				field.NotSupported[string](field.NewPath("defaultAction"), nil, nil),
				field.NotSupported[string](field.NewPath("messageDetail"), nil, nil),
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e, _ := parse(t, NewDecisions(), tt.args...)
			got := e.Validate()
			if diff := cmp.Diff(tt.want, got, ignoreDetail, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("Validate() (-want +got):\n%s", diff)
			}
			for _, err := range got {
				if flag := FlagOf(err, DecisionFlagNames()); flag == "" {
					t.Errorf("error %q names no flag", err)
				}
			}
		})
	}
}

// ignoreDetail compares validation errors by kind and field.
var ignoreDetail = cmpopts.IgnoreFields(field.Error{}, "Detail", "BadValue")

func TestEngineOverrideLetsTheFlagsGivenWin(t *testing.T) {
	release := Decisions{DefaultAction: v1alpha1.ActionWarn, ExcludedNamespaces: []string{"spreadguard-system"},
		MessageDetail: spread.DetailDomains, AutoscalerKarpenter: ToggleFalse, NodeGroupLabel: "eks.amazonaws.com/nodegroup",
		AutoscalerZones: []string{"a", "b", "c"}, ClusterAutoscalerStatus: "autoscaling/ca-status"}
	cli := engineWith(func(e *Decisions) { e.MessageDetail = spread.DetailNodes })
	tests := []struct {
		name string
		args []string
		want Decisions
	}{
		{name: "no flags -> the release's settings, the CLI's defaults ignored", want: release},
		{
			name: "--autoscaler-karpenter=auto and --message-detail=nodes -> those two from the flags, the rest from the release",
			args: []string{"--autoscaler-karpenter=auto", "--message-detail=nodes"},
			want: func() Decisions {
				e := release
				e.AutoscalerKarpenter, e.MessageDetail = ToggleAuto, spread.DetailNodes
				return e
			}(),
		},
		{
			name: "--default-action=Deny, the default's own value, given -> Deny: a flag given wins even when it repeats the default",
			args: []string{"--default-action=Deny"},
			want: func() Decisions { e := release; e.DefaultAction = v1alpha1.ActionDeny; return e }(),
		},
		{
			name: "--autoscaler-zones=x,y -> the release's zones replaced",
			args: []string{"--autoscaler-zones=x,y"},
			want: func() Decisions { e := release; e.AutoscalerZones = []string{"x", "y"}; return e }(),
		},
		{
			name: "--cluster-autoscaler-status= -> the release's status not read",
			args: []string{"--cluster-autoscaler-status="},
			want: func() Decisions { e := release; e.ClusterAutoscalerStatus = ""; return e }(),
		},
		{
			name: "--autoscaler-zones= -> the release's zones cleared",
			args: []string{"--autoscaler-zones="},
			want: func() Decisions { e := release; e.AutoscalerZones = []string{}; return e }(),
		},
		{
			name: "--excluded-namespaces=a --node-group-label= -> the list replaced and the label cleared",
			args: []string{"--excluded-namespaces=a", "--node-group-label="},
			want: func() Decisions { e := release; e.ExcludedNamespaces, e.NodeGroupLabel = []string{"a"}, ""; return e }(),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			flagged, fs := parse(t, cli, tt.args...)
			got := release
			got.ExcludedNamespaces = append([]string(nil), release.ExcludedNamespaces...)
			got.Override(&flagged, fs)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("release's settings overridden by %q (-want +got):\n%s", tt.args, diff)
			}
		})
	}
}

func TestExcludedNamespaceSet(t *testing.T) {
	tests := []struct {
		name     string
		excluded []string
		want     []string
	}{
		{name: "none configured -> kube-system alone", want: []string{"kube-system"}},
		{name: "others configured -> kube-system added first", excluded: []string{"a", "b"}, want: []string{"kube-system", "a", "b"}},
		{name: "kube-system and duplicates configured -> each once", excluded: []string{"a", "kube-system", "a"}, want: []string{"kube-system", "a"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := engineWith(func(e *Decisions) { e.ExcludedNamespaces = tt.excluded })
			if diff := cmp.Diff(tt.want, e.ExcludedNamespaceSet()); diff != "" {
				t.Errorf("ExcludedNamespaceSet() (-want +got):\n%s", diff)
			}
		})
	}
}

func TestEngineConfigIsWhatTheEngineDecidesWith(t *testing.T) {
	e := Decisions{DefaultAction: v1alpha1.ActionAudit, ExcludedNamespaces: []string{"tools"}, MessageDetail: spread.DetailNodes}
	want := engine.Config{DefaultAction: v1alpha1.ActionAudit, ExcludedNamespaces: []string{"kube-system", "tools"}, MessageDetail: spread.DetailNodes}
	if diff := cmp.Diff(want, e.Config()); diff != "" {
		t.Errorf("Config() (-want +got):\n%s", diff)
	}
}

func TestEngineTemplates(t *testing.T) {
	status := types.NamespacedName{Namespace: "kube-system", Name: "cluster-autoscaler-status"}
	tests := []struct {
		name                    string
		karpenter               Toggle
		nodeTemplates, nodePool bool
		zones                   []string
		noStatus                bool
		want                    lookup.TemplateOptions
		wantErr                 string
	}{
		{name: "auto, NodePools served -> NodePools read", karpenter: ToggleAuto, nodePool: true,
			want: lookup.TemplateOptions{Karpenter: true, NodeGroupLabel: "pool", ClusterAutoscalerStatus: status}},
		{name: "auto, NodePools not served -> none read, no error", karpenter: ToggleAuto,
			want: lookup.TemplateOptions{NodeGroupLabel: "pool", ClusterAutoscalerStatus: status}},
		{name: "false, NodePools and NodeTemplates served -> NodeTemplates only", karpenter: ToggleFalse, nodeTemplates: true, nodePool: true,
			want: lookup.TemplateOptions{NodeTemplates: true, NodeGroupLabel: "pool", ClusterAutoscalerStatus: status}},
		{name: "true, NodePools served -> NodePools read", karpenter: ToggleTrue, nodePool: true,
			want: lookup.TemplateOptions{Karpenter: true, NodeGroupLabel: "pool", ClusterAutoscalerStatus: status}},
		{name: "auto, NodePools served, zones a and b listed -> NodePools read, the zones passed on", karpenter: ToggleAuto, nodePool: true, zones: []string{"a", "b"},
			want: lookup.TemplateOptions{Karpenter: true, NodeGroupLabel: "pool", ClusterAutoscalerStatus: status, Zones: []string{"a", "b"}}},
		{name: "auto, no cluster-autoscaler status -> none read", karpenter: ToggleAuto, noStatus: true,
			want: lookup.TemplateOptions{NodeGroupLabel: "pool"}},
		{name: "true, NodePools not served -> an error naming the setting and the remedy", karpenter: ToggleTrue,
			wantErr: "--autoscaler-karpenter is true, but the API server does not serve karpenter.sh/v1, Kind=NodePool: install Karpenter's CRDs or set it to auto"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := engineWith(func(e *Decisions) {
				e.AutoscalerKarpenter, e.NodeGroupLabel, e.AutoscalerZones = tt.karpenter, "pool", tt.zones
				if tt.noStatus {
					e.ClusterAutoscalerStatus = ""
				}
			})
			got, err := e.Templates(tt.nodeTemplates, tt.nodePool)
			if gotErr := errString(err); gotErr != tt.wantErr {
				t.Fatalf("Templates() error = %q, want %q", gotErr, tt.wantErr)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Templates() (-want +got):\n%s", diff)
			}
		})
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

func TestEngineNamespaceSelector(t *testing.T) {
	tests := []struct {
		name     string
		selector string
		wantErr  bool
		// serves is whether the engine's scope serves a namespace
		// labelled env=prod.
		serves bool
	}{
		{name: "none -> every namespace served", serves: true},
		{name: "env=prod -> a namespace labelled env=prod served", selector: "env=prod", serves: true},
		{name: "env in (dev) -> a namespace labelled env=prod not served", selector: "env in (dev)"},
		{name: "a selector that does not parse -> an error naming namespaceSelector", selector: "env in (", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := NewDecisions()
			e.NamespaceSelector = tt.selector
			errs := e.Validate()
			if (len(errs) > 0) != tt.wantErr || (tt.wantErr && errs[0].Field != "namespaceSelector") {
				t.Fatalf("Validate() = %v, want an error: %v", errs, tt.wantErr)
			}
			if tt.wantErr {
				return
			}
			ns := &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "shop", Labels: map[string]string{"env": "prod"}}}
			if got := e.Config().Scope().Serves("shop", ns); got != tt.serves {
				t.Errorf("Serves(shop, env=prod) = %v, want %v", got, tt.serves)
			}
		})
	}
}
