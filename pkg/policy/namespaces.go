package policy

import (
	"slices"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/spreadguard/spreadguard/pkg/apis/spreadguard/v1alpha1"
)

// Scope is the namespaces spreadguard serves, as the webhook
// configurations' namespaceSelector sends them: every namespace but those
// excluded by name (the configured excludedNamespaces, kube-system among
// them), those labelled spreadguard.io/ignore=true, and those the
// configured namespaceSelector does not select. Admission, the keeper of
// deletion costs and spread health all ask Serves, so that none acts where
// the others do not.
type Scope struct {
	// Excluded are the namespaces left alone by name.
	Excluded []string
	// Selector is the chart's webhook.namespaceSelector; nil selects
	// every namespace.
	Selector labels.Selector
}

// Serves reports whether spreadguard serves the namespace called name,
// whose object is ns. When ns is nil (not known yet, or a cluster file
// without it) only its name is judged.
func (s Scope) Serves(name string, ns *v1.Namespace) bool {
	if slices.Contains(s.Excluded, name) {
		return false
	}
	if ns == nil {
		return true
	}
	if ns.Labels[v1alpha1.LabelIgnoreNamespace] == "true" {
		return false
	}
	return s.Selector == nil || s.Selector.Matches(labels.Set(ns.Labels))
}
