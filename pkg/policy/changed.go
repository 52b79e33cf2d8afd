package policy

import "github.com/spreadguard/spreadguard/pkg/apis/spreadguard/v1alpha1"

// SpecChanged reports, for two versions of an object as an informer's
// update hands them, whether a SpreadPolicy or ClusterSpreadPolicy may say
// something new: its generation moved, which the API server does for a
// change of spec and not of status or metadata, or cur is not of old's
// kind. isPolicy is false when old is neither kind: the caller judges it.
func SpecChanged(old, cur any) (changed, isPolicy bool) {
	switch o := old.(type) {
	case *v1alpha1.SpreadPolicy:
		n, ok := cur.(*v1alpha1.SpreadPolicy)
		return !ok || o.Generation != n.Generation, true
	case *v1alpha1.ClusterSpreadPolicy:
		n, ok := cur.(*v1alpha1.ClusterSpreadPolicy)
		return !ok || o.Generation != n.Generation, true
	}
	return false, false
}
