// Package config is spreadguard's configuration, defined once for both
// binaries: Decisions, the settings that change a decision, with its flags and
// its validation; WebhookConfiguration, the file the webhook reads with
// --config (and the Helm chart renders into a ConfigMap), with its one
// decoder; and FromRelease, which reads that file from an installed
// release, so that kubectl-spread decides as the release's webhook does.
package config

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"

	"github.com/spf13/pflag"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	karpenterv1 "github.com/spreadguard/spreadguard/pkg/apis/karpenter/v1"
	"github.com/spreadguard/spreadguard/pkg/apis/spreadguard/v1alpha1"
	"github.com/spreadguard/spreadguard/pkg/autoscale"
	"github.com/spreadguard/spreadguard/pkg/engine"
	"github.com/spreadguard/spreadguard/pkg/lookup"
	"github.com/spreadguard/spreadguard/pkg/spread"
)

// KubeSystem is excluded whatever the configuration says: the control plane's
// own pods must never wait on the webhook.
const KubeSystem = metav1.NamespaceSystem

// Decisions is the part of the configuration that changes a decision: what to
// do with an unsatisfiable pod, which namespaces are left alone, what a
// message may name and where the nodes an autoscaler can add come from. The
// webhook reads it from its configuration file and flags; kubectl-spread
// from the same flags, or from an installed release's file (FromRelease)
// with its flags winning, so that a decision made offline is the webhook's.
// Its fields are inlined into WebhookConfiguration: their JSON names are
// the file's. It is not engine.Config: that is what the engine decides
// with, parsed from these settings by Config, without the autoscalers'
// sources, which lookup reads (Templates).
type Decisions struct {
	// DefaultAction applies to unsatisfiable pods whose policy sets none.
	DefaultAction v1alpha1.ValidationAction `json:"defaultAction"`
	// ExcludedNamespaces are never mutated nor validated; kube-system is
	// always among them (ExcludedNamespaceSet).
	ExcludedNamespaces []string `json:"excludedNamespaces"`
	// NamespaceSelector is the webhook configurations' extra condition on
	// the namespaces they send (the chart's webhook.namespaceSelector), in
	// the syntax of kubectl's --selector: the keeper and spread health act
	// only where admission does (engine.Config.Scope). Empty: every
	// namespace.
	NamespaceSelector string `json:"namespaceSelector,omitempty"`
	// MessageDetail is what a denial shown to the pod's creator may name:
	// "domains" (per-domain counts and reasons, no node names, labels or
	// taints) or "nodes" (everything, for single-tenant clusters).
	MessageDetail spread.MessageDetail `json:"messageDetail"`
	// AutoscalerKarpenter says whether Karpenter's NodePools are read as
	// templates of the nodes an autoscaler can add: auto (when the
	// karpenter.sh/v1 NodePool API is served), true or false.
	AutoscalerKarpenter Toggle `json:"autoscalerKarpenter"`
	// NodeGroupLabel is the node label that names a node's group
	// (eks.amazonaws.com/nodegroup, cloud.google.com/gke-nodepool,
	// kubernetes.azure.com/agentpool): each group and zone seen on a node
	// is a template of a node the cluster autoscaler can add. Empty: none.
	NodeGroupLabel string `json:"nodeGroupLabel,omitempty"`
	// AutoscalerZones are the zones new nodes may come up in, where nothing
	// in the API says so: the zones of a Karpenter NodePool that leaves the
	// zone open and whose node class names none (Azure's, Google Cloud's,
	// the kwok provider's), and of a node group whose nodes carry no zone
	// (autoscale.Inputs.Zones). Empty: the zones seen on nodes.
	AutoscalerZones []string `json:"autoscalerZones,omitempty"`
	// ClusterAutoscalerStatus is cluster-autoscaler's status ConfigMap,
	// namespace/name: the sizes of its node groups, where it is there (a
	// group at its maximum adds no node; one scaled to zero that no node
	// shows is reported). Empty: not read, every node group can grow.
	ClusterAutoscalerStatus string `json:"clusterAutoscalerStatus"`
}

// NewDecisions returns the engine settings with the webhook's defaults.
func NewDecisions() Decisions {
	return Decisions{
		DefaultAction:           v1alpha1.ActionDeny,
		ExcludedNamespaces:      []string{KubeSystem},
		MessageDetail:           spread.DetailDomains,
		AutoscalerKarpenter:     ToggleAuto,
		ClusterAutoscalerStatus: autoscale.ClusterAutoscalerStatusNamespace + "/" + autoscale.ClusterAutoscalerStatusName,
	}
}

// Toggle is a setting that can also be decided from the cluster.
type Toggle string

// The values of a Toggle.
const (
	ToggleAuto  Toggle = "auto"
	ToggleTrue  Toggle = "true"
	ToggleFalse Toggle = "false"
)

// decisionFlags are Decisions' flags, the same in both binaries.
var decisionFlags = []Flag[Decisions]{
	{"default-action", "What to do with a pod whose hard spread constraints cannot be met when its policy sets no action: Deny, Warn or Audit.",
		func(e *Decisions) any { return &e.DefaultAction }},
	{"excluded-namespaces", "Comma-separated namespaces whose pods are never mutated nor validated; kube-system is always added.",
		func(e *Decisions) any { return &e.ExcludedNamespaces }},
	{"namespace-selector", "Label selector (kubectl's syntax) the namespaces served must match, as the webhook configurations' namespaceSelector: the deletion cost keeper and spread health act only there. Empty: every namespace.",
		func(e *Decisions) any { return &e.NamespaceSelector }},
	{"message-detail", "What a denial may name: domains (counts and reasons per domain, no node names, labels or taints) or nodes.",
		func(e *Decisions) any { return &e.MessageDetail }},
	{"autoscaler-karpenter", "Read Karpenter's NodePools as nodes an autoscaler can add: auto (when the karpenter.sh/v1 NodePool API is served), true or false.",
		func(e *Decisions) any { return &e.AutoscalerKarpenter }},
	{"node-group-label", "Node label naming a node's group (eks.amazonaws.com/nodegroup, cloud.google.com/gke-nodepool, kubernetes.azure.com/agentpool): each group and zone seen on a node is a node the autoscaler can add. Empty: none.",
		func(e *Decisions) any { return &e.NodeGroupLabel }},
	{"autoscaler-zones", "Comma-separated zones new nodes may come up in, for the NodePools that leave the zone open and whose node class names no zone, and the node groups whose nodes carry none. Empty: the zones seen on nodes.",
		func(e *Decisions) any { return &e.AutoscalerZones }},
	{"cluster-autoscaler-status", "cluster-autoscaler's status ConfigMap, namespace/name (its --config-namespace and --status-config-map-name): node groups at their maximum size add no node. Empty: not read.",
		func(e *Decisions) any { return &e.ClusterAutoscalerStatus }},
}

// AddFlags binds Decisions' flags to the fields of e; the current values of
// e are the defaults --help shows.
func (e *Decisions) AddFlags(fs *pflag.FlagSet) { AddFlags(fs, e, decisionFlags) }

// DecisionFlagNames maps each of Decisions' fields, by its JSON name, to its
// flag (see FlagNames).
func DecisionFlagNames() map[string]string { return FlagNames(decisionFlags) }

// Override sets on e every field whose flag fs was given, to its value in
// flagged, the Decisions fs's flags are bound to: flags given on the command
// line win over settings read from elsewhere.
func (e *Decisions) Override(flagged *Decisions, fs *pflag.FlagSet) {
	for _, f := range decisionFlags {
		if fs.Changed(f.Name) {
			reflect.ValueOf(f.Field(e)).Elem().Set(reflect.ValueOf(f.Field(flagged)).Elem())
		}
	}
}

// Validate checks every field; each error's path is the field's JSON name,
// which DecisionFlagNames maps to its flag.
func (e *Decisions) Validate() field.ErrorList {
	var errs field.ErrorList
	actions := []string{string(v1alpha1.ActionDeny), string(v1alpha1.ActionWarn), string(v1alpha1.ActionAudit)}
	if !slices.Contains(actions, string(e.DefaultAction)) {
		errs = append(errs, field.NotSupported(field.NewPath("defaultAction"), e.DefaultAction, actions))
	}
	for i, ns := range e.ExcludedNamespaces {
		for _, msg := range validation.IsDNS1123Label(ns) {
			errs = append(errs, field.Invalid(field.NewPath("excludedNamespaces").Index(i), ns, msg))
		}
	}
	if _, err := labels.Parse(e.NamespaceSelector); err != nil {
		errs = append(errs, field.Invalid(field.NewPath("namespaceSelector"), e.NamespaceSelector, err.Error()))
	}
	details := []string{string(spread.DetailDomains), string(spread.DetailNodes)}
	if !slices.Contains(details, string(e.MessageDetail)) {
		errs = append(errs, field.NotSupported(field.NewPath("messageDetail"), e.MessageDetail, details))
	}
	toggles := []string{string(ToggleAuto), string(ToggleTrue), string(ToggleFalse)}
	if !slices.Contains(toggles, string(e.AutoscalerKarpenter)) {
		errs = append(errs, field.NotSupported(field.NewPath("autoscalerKarpenter"), e.AutoscalerKarpenter, toggles))
	}
	if e.NodeGroupLabel != "" {
		for _, msg := range validation.IsQualifiedName(e.NodeGroupLabel) {
			errs = append(errs, field.Invalid(field.NewPath("nodeGroupLabel"), e.NodeGroupLabel, msg))
		}
	}
	errs = append(errs, validateZones(field.NewPath("autoscalerZones"), e.AutoscalerZones)...)
	if _, err := e.ClusterAutoscalerStatusKey(); err != nil {
		errs = append(errs, field.Invalid(field.NewPath("clusterAutoscalerStatus"), e.ClusterAutoscalerStatus, err.Error()))
	}
	return errs
}

// ClusterAutoscalerStatusKey returns the namespace and name of
// ClusterAutoscalerStatus; a zero key when it is empty.
func (e *Decisions) ClusterAutoscalerStatusKey() (types.NamespacedName, error) {
	if e.ClusterAutoscalerStatus == "" {
		return types.NamespacedName{}, nil
	}
	ns, name, ok := strings.Cut(e.ClusterAutoscalerStatus, "/")
	if !ok {
		return types.NamespacedName{}, errors.New("must be namespace/name, or empty to read no status")
	}
	var msgs []string
	for _, msg := range validation.IsDNS1123Label(ns) {
		msgs = append(msgs, "namespace: "+msg)
	}
	for _, msg := range validation.IsDNS1123Subdomain(name) {
		msgs = append(msgs, "name: "+msg)
	}
	if len(msgs) > 0 {
		return types.NamespacedName{}, errors.New(strings.Join(msgs, "; "))
	}
	return types.NamespacedName{Namespace: ns, Name: name}, nil
}

// validateZones checks that each zone is a label value a node's
// topology.kubernetes.io/zone can hold, and not empty: an empty zone (a
// trailing comma) names no zone a node could come up in.
func validateZones(path *field.Path, zones []string) field.ErrorList {
	var errs field.ErrorList
	seen := map[string]bool{}
	for i, z := range zones {
		switch {
		case z == "":
			errs = append(errs, field.Invalid(path.Index(i), z, "must be a zone, not empty"))
		case seen[z]:
			errs = append(errs, field.Duplicate(path.Index(i), z))
		}
		seen[z] = true
		for _, msg := range validation.IsValidLabelValue(z) {
			errs = append(errs, field.Invalid(path.Index(i), z, msg))
		}
	}
	return errs
}

// ExcludedNamespaceSet returns the namespaces to exclude, kube-system first
// and without duplicates.
func (e *Decisions) ExcludedNamespaceSet() []string {
	out := []string{KubeSystem}
	for _, ns := range e.ExcludedNamespaces {
		if !slices.Contains(out, ns) {
			out = append(out, ns)
		}
	}
	return out
}

// Config is the engine's configuration of a valid e.
func (e *Decisions) Config() engine.Config {
	cfg := engine.Config{DefaultAction: e.DefaultAction, ExcludedNamespaces: e.ExcludedNamespaceSet(), MessageDetail: e.MessageDetail}
	if sel, err := labels.Parse(e.NamespaceSelector); err == nil && !sel.Empty() {
		cfg.NamespaceSelector = sel
	}
	return cfg
}

// Templates says where the templates of the nodes an autoscaler can add
// come from, given whether the cluster serves the NodeTemplate and the
// NodePool APIs: the NodeTemplates when served; the NodePools when served
// and AutoscalerKarpenter is not false; the node groups of NodeGroupLabel;
// the zones of AutoscalerZones; cluster-autoscaler's status ConfigMap.
// AutoscalerKarpenter true without the NodePool API is an error: the
// setting says Karpenter runs, and it cannot be read.
func (e *Decisions) Templates(nodeTemplatesServed, nodePoolsServed bool) (lookup.TemplateOptions, error) {
	// Validate has refused a key that does not parse.
	status, _ := e.ClusterAutoscalerStatusKey()
	o := lookup.TemplateOptions{NodeTemplates: nodeTemplatesServed, NodeGroupLabel: e.NodeGroupLabel, Zones: e.AutoscalerZones,
		ClusterAutoscalerStatus: status}
	switch e.AutoscalerKarpenter {
	case ToggleTrue:
		if !nodePoolsServed {
			return lookup.TemplateOptions{}, fmt.Errorf("--autoscaler-karpenter is true, but the API server does not serve %s: "+
				"install Karpenter's CRDs or set it to %s", karpenterv1.GroupVersion.WithKind(karpenterv1.KindNodePool), ToggleAuto)
		}
		o.Karpenter = true
	case ToggleAuto:
		o.Karpenter = nodePoolsServed
	}
	return o, nil
}
