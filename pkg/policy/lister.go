package policy

import (
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/spreadguard/spreadguard/pkg/apis/spreadguard/v1alpha1"
)

// Lister reads what resolution needs. Get-style methods return (nil, nil)
// when absent. Any other error stops resolution and is returned, so that a
// broken lookup is never mistaken for "no policy".
type Lister interface {
	// Namespace returns the namespace called name, or nil if there is none.
	Namespace(name string) (*v1.Namespace, error)
	// SpreadPolicies returns the SpreadPolicies of namespace.
	SpreadPolicies(namespace string) ([]*v1alpha1.SpreadPolicy, error)
	// ClusterSpreadPolicies returns every ClusterSpreadPolicy.
	ClusterSpreadPolicies() ([]*v1alpha1.ClusterSpreadPolicy, error)
}

// Verdicts is implemented by a Lister whose policies were validated as
// they entered its cache (policies.Watcher, through lookup.Sources):
// Resolve then reads the verdict on a policy instead of validating it on
// every request. known is false for a policy, or a generation of it, not
// validated yet; Resolve validates that one itself.
type Verdicts interface {
	PolicyVerdict(uid types.UID, generation int64) (valid, known bool)
}

// SliceLister is a Lister over plain slices: the kubectl plugin's snapshot
// and tests. Its methods never fail.
type SliceLister struct {
	Namespaces      []*v1.Namespace
	Policies        []*v1alpha1.SpreadPolicy
	ClusterPolicies []*v1alpha1.ClusterSpreadPolicy
}

var _ Lister = SliceLister{}

// Namespace returns the namespace called name, or nil.
func (s SliceLister) Namespace(name string) (*v1.Namespace, error) {
	for _, ns := range s.Namespaces {
		if ns.Name == name {
			return ns, nil
		}
	}
	return nil, nil
}

// SpreadPolicies returns the SpreadPolicies whose namespace is namespace.
func (s SliceLister) SpreadPolicies(namespace string) ([]*v1alpha1.SpreadPolicy, error) {
	var out []*v1alpha1.SpreadPolicy
	for _, p := range s.Policies {
		if p.Namespace == namespace {
			out = append(out, p)
		}
	}
	return out, nil
}

// ClusterSpreadPolicies returns every ClusterSpreadPolicy.
func (s SliceLister) ClusterSpreadPolicies() ([]*v1alpha1.ClusterSpreadPolicy, error) {
	return s.ClusterPolicies, nil
}
