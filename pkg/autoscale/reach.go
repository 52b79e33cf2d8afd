package autoscale

import (
	"maps"
	"slices"

	v1 "k8s.io/api/core/v1"

	"github.com/spreadguard/spreadguard/pkg/apis/spreadguard/v1alpha1"
	"github.com/spreadguard/spreadguard/pkg/spread"
)

// OutOfReach is a hard constraint whose minDomains exceeds the domains the
// existing nodes and every node an autoscaler can add can ever be in. The
// scheduler then counts fewer domains than minDomains for ever: the global
// minimum stays 0, every domain fills at maxSkew matching pods, and the
// pods beyond stay Pending (or are refused) until a node exists in another
// domain.
type OutOfReach struct {
	// Index is the constraint's position in the list given.
	Index int
	// TopologyKey and MinDomains are the constraint's.
	TopologyKey string
	MinDomains  int32
	// Domains are the values of TopologyKey on the nodes and the
	// templates, sorted.
	Domains []string
}

// ConstraintsOutOfReach returns the hard constraints of cs (a policy's)
// whose minDomains the nodes and the templates cannot reach, in the order
// of cs. It counts the domains any node could give, whatever a pod's
// affinity; the check of a pod (pkg/spread) counts those its own affinity
// and inclusion policies allow, and words its message from them.
//
// A per-host constraint is always within reach when some template has no
// hostname of its own: an autoscaler adds such nodes without bound.
func ConstraintsOutOfReach(cs []v1alpha1.Constraint, nodes []*v1.Node, templates []spread.Template) []OutOfReach {
	var out []OutOfReach
	for i, c := range cs {
		if c.WhenUnsatisfiable != v1.DoNotSchedule || c.MinDomains == nil || *c.MinDomains <= 1 {
			continue
		}
		domains, unbounded := reachable(c.TopologyKey, nodes, templates)
		if unbounded || len(domains) >= int(*c.MinDomains) {
			continue
		}
		out = append(out, OutOfReach{Index: i, TopologyKey: c.TopologyKey, MinDomains: *c.MinDomains, Domains: domains})
	}
	return out
}

// reachable returns the sorted values of key on nodes and templates, and
// whether a template adds fresh values without bound (a fresh hostname).
func reachable(key string, nodes []*v1.Node, templates []spread.Template) ([]string, bool) {
	set := map[string]struct{}{}
	for _, n := range nodes {
		if v, ok := n.Labels[key]; ok {
			set[v] = struct{}{}
		}
	}
	for _, t := range templates {
		v, ok := t.Labels[key]
		if !ok && key == v1.LabelHostname {
			return nil, true
		}
		if ok {
			set[v] = struct{}{}
		}
	}
	return slices.Sorted(maps.Keys(set)), false
}
