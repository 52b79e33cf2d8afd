package autoscale

import (
	"cmp"
	"errors"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/yaml"

	"github.com/spreadguard/spreadguard/pkg/apis/spreadguard/v1alpha1"
)

// ClusterAutoscalerStatusNamespace, ClusterAutoscalerStatusName and
// ClusterAutoscalerStatusKey locate cluster-autoscaler's status: the key of
// the ConfigMap it writes every loop, with the defaults of its
// --config-namespace and --status-config-map-name.
const (
	ClusterAutoscalerStatusNamespace = "kube-system"
	ClusterAutoscalerStatusName      = "cluster-autoscaler-status"
	ClusterAutoscalerStatusKey       = "status"
)

// ErrLegacyClusterAutoscalerStatus is returned for the plain-text status
// of cluster-autoscaler before 1.30 ("Cluster-autoscaler status at ...:"),
// which is recognized but not read: its sizes sit in free text. Node
// groups are then judged as without the ConfigMap.
var ErrLegacyClusterAutoscalerStatus = errors.New("cluster-autoscaler's status is in the plain-text format of versions before 1.30, which spreadguard does not read")

// ClusterAutoscalerStatus is what spreadguard reads of cluster-autoscaler's
// status: the sizes of its node groups, their health and their scale-up.
type ClusterAutoscalerStatus struct {
	// NodeGroups are in the order the status lists them.
	NodeGroups []NodeGroupSize
}

// NodeGroupSize is one node group of cluster-autoscaler's status: its
// sizes, and what it says of the group's health and scale-up.
type NodeGroupSize struct {
	// Name is the cloud provider's name of the group as the status gives
	// it: an Auto Scaling group on AWS, a managed instance group's URL on
	// GCE, a scale set on Azure.
	Name string
	// Target is the size the cloud provider was last asked for
	// (cloudProviderTarget); Min and Max bound it.
	Target, Min, Max int
	// Health is health.status: HealthHealthy or HealthUnhealthy (too many
	// of its nodes unready or long unregistered); "" when not given.
	Health string
	// ScaleUp is scaleUp.status: ScaleUpInProgress, ScaleUpBackoff,
	// ScaleUpNoActivity, ...; "" when not given.
	ScaleUp string
	// Backoff is scaleUp.backoffInfo, why a group in ScaleUpBackoff failed
	// to scale up; zero when the status gives none. A value, so that two
	// reads of one status compare equal.
	Backoff Backoff
}

// Backoff is scaleUp.backoffInfo of a node group of cluster-autoscaler's
// status: the cloud provider's error of the failed scale-up.
type Backoff struct {
	// ErrorCode is e.g. InsufficientInstanceCapacity (AWS),
	// ZONE_RESOURCE_POOL_EXHAUSTED (GCE), QuotaExceeded, OTHER.
	ErrorCode    string
	ErrorMessage string
}

// The statuses cluster-autoscaler writes in health.status and
// scaleUp.status of a node group:
// https://github.com/kubernetes/autoscaler/blob/cluster-autoscaler-1.34.0/cluster-autoscaler/clusterstate/api/types.go
// (ClusterAutoscalerConditionStatus).
const (
	HealthHealthy   = "Healthy"
	HealthUnhealthy = "Unhealthy"
	// ScaleUpInProgress: the group was asked for more nodes that have not
	// registered yet.
	ScaleUpInProgress = "InProgress"
	// ScaleUpBackoff: a scale-up of the group failed recently, and no
	// other is tried for a while.
	ScaleUpBackoff    = "Backoff"
	ScaleUpNoActivity = "NoActivity"
)

// full reports whether cluster-autoscaler can add no node to g.
func (g NodeGroupSize) full() bool { return g.Target >= g.Max }

// Message is the finding of a group at its maximum size in a sentence,
// with its remedy, for the operator: it names the group.
func (g NodeGroupSize) Message() string {
	return fmt.Sprintf("cluster-autoscaler's node group %s is at its maximum size (%d of max %d), so it adds no node and a pod only a new node of it could take is refused. Remedy: raise the group's maximum size.",
		g.Name, g.Target, g.Max)
}

// caStatus mirrors the fields spreadguard reads of the YAML status of
// cluster-autoscaler 1.30 and later:
// https://github.com/kubernetes/autoscaler/blob/cluster-autoscaler-1.34.0/cluster-autoscaler/clusterstate/api/types.go
// (ClusterAutoscalerStatus, NodeGroupStatus, NodeGroupHealthCondition),
// written by WriteStatusConfigMap in
// https://github.com/kubernetes/autoscaler/blob/cluster-autoscaler-1.34.0/cluster-autoscaler/clusterstate/utils/status.go
type caStatus struct {
	AutoscalerStatus string `json:"autoscalerStatus"`
	NodeGroups       []struct {
		Name   string `json:"name"`
		Health struct {
			Status              string `json:"status"`
			CloudProviderTarget *int   `json:"cloudProviderTarget"`
			MinSize             *int   `json:"minSize"`
			MaxSize             *int   `json:"maxSize"`
		} `json:"health"`
		ScaleUp struct {
			Status      string `json:"status"`
			BackoffInfo struct {
				ErrorCode    string `json:"errorCode"`
				ErrorMessage string `json:"errorMessage"`
			} `json:"backoffInfo"`
		} `json:"scaleUp"`
	} `json:"nodeGroups"`
}

// legacyPrefix starts every status cluster-autoscaler wrote before 1.30.
const legacyPrefix = "Cluster-autoscaler status at "

// ParseClusterAutoscalerStatus reads the status key of cluster-autoscaler's
// status ConfigMap. The plain-text format of versions before 1.30 gives
// ErrLegacyClusterAutoscalerStatus; anything that is neither format, or a
// node group without its sizes, an error that says what is wrong.
func ParseClusterAutoscalerStatus(text string) (*ClusterAutoscalerStatus, error) {
	if strings.HasPrefix(strings.TrimSpace(text), legacyPrefix) {
		return nil, ErrLegacyClusterAutoscalerStatus
	}
	var raw caStatus
	if err := yaml.Unmarshal([]byte(text), &raw); err != nil {
		return nil, fmt.Errorf("parsing cluster-autoscaler's status: %w", err)
	}
	if raw.AutoscalerStatus == "" {
		return nil, errors.New("parsing cluster-autoscaler's status: no autoscalerStatus, so not the status of cluster-autoscaler 1.30 or later")
	}
	s := &ClusterAutoscalerStatus{}
	for i, g := range raw.NodeGroups {
		h := g.Health
		switch {
		case g.Name == "":
			return nil, fmt.Errorf("parsing cluster-autoscaler's status: nodeGroups[%d] has no name", i)
		case h.CloudProviderTarget == nil || h.MinSize == nil || h.MaxSize == nil:
			return nil, fmt.Errorf("parsing cluster-autoscaler's status: node group %s lacks health.cloudProviderTarget, minSize or maxSize", g.Name)
		}
		b := g.ScaleUp.BackoffInfo
		s.NodeGroups = append(s.NodeGroups, NodeGroupSize{
			Name: g.Name, Target: *h.CloudProviderTarget, Min: *h.MinSize, Max: *h.MaxSize,
			Health: h.Status, ScaleUp: g.ScaleUp.Status, Backoff: Backoff{ErrorCode: b.ErrorCode, ErrorMessage: b.ErrorMessage},
		})
	}
	return s, nil
}

// ScaledToZero is a node group cluster-autoscaler's status names at size 0
// that no node shows: spreadguard cannot see its shape, so no template
// stands for it until an operator declares one.
type ScaledToZero struct {
	// Group is its size as the status gives it.
	Group NodeGroupSize
	// NodeTemplate is the NodeTemplate to declare for it, with what the
	// status name says of its labels: the node-group label (EKS managed
	// node groups, AKS agent pools) and the zone (GKE); the labels and
	// taints its nodes get beyond those are for the operator to add.
	NodeTemplate v1alpha1.NodeTemplate
}

// Message is the finding in a sentence, with its remedy, for the
// operator.
func (z ScaledToZero) Message() string {
	return fmt.Sprintf("cluster-autoscaler's node group %s is scaled to 0 (min %d, max %d) and no node shows its shape, so no template stands for the nodes it can add. Remedy: declare NodeTemplate %s with the labels and taints of its nodes.",
		z.Group.Name, z.Group.Min, z.Group.Max, z.NodeTemplate.Name)
}

// groupRef is what a status name says of a node group: the value of its
// node-group label and its zone, when the name has a known shape.
type groupRef struct {
	// base is the name's last path segment (a GCE URL's group name).
	base string
	// label is the node-group label's value, "" when the shape does not
	// say it.
	label string
	// zone is the group's zone, "" when the name does not say it.
	zone string
}

var (
	// https://github.com/kubernetes/autoscaler/blob/cluster-autoscaler-1.34.0/cluster-autoscaler/cloudprovider/gce/gce_url.go
	gceURL = regexp.MustCompile(`/zones/([^/]+)/instanceGroups/([^/]+)$`)
	// EKS managed node groups: Auto Scaling group eks-<nodegroup>-<uuid>.
	eksASG = regexp.MustCompile(`^eks-(.+)-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`)
	// AKS agent pools: scale set aks-<pool>-<digits>-vmss.
	aksVMSS = regexp.MustCompile(`^aks-([a-z0-9]+)-[0-9]+-vmss$`)
	// GKE node pools: instance group gke-<cluster>-<pool>-<hash>-grp, the
	// hash 8 hexadecimal digits; any run of letters and digits is taken.
	gkeMIG = regexp.MustCompile(`^gke-(.+)-[0-9a-z]+-grp$`)
)

func parseGroupName(name string) groupRef {
	r := groupRef{base: name}
	if m := gceURL.FindStringSubmatch(name); m != nil {
		r.zone, r.base = m[1], m[2]
	} else if i := strings.LastIndex(name, "/"); i >= 0 {
		// cluster-api's MachineDeployment/<namespace>/<name>.
		r.base = name[i+1:]
	}
	if m := eksASG.FindStringSubmatch(r.base); m != nil {
		r.label = m[1]
	} else if m := aksVMSS.FindStringSubmatch(r.base); m != nil {
		r.label = m[1]
	}
	return r
}

// matches reports whether the status group r is node group label of the
// nodes: its name is the label's value, or has the shape the managed
// services give the group of that node pool.
func (r groupRef) matches(label string) bool {
	if r.base == label || r.label == label {
		return true
	}
	// The GKE cluster name before the pool name may hold dashes itself.
	m := gkeMIG.FindStringSubmatch(r.base)
	return m != nil && strings.HasSuffix(m[1], "-"+label)
}

// judge applies the status to the node groups seen on nodes: it removes
// from groups the (group, zone) pairs whose every matching status group is
// at its maximum, and returns those status groups, and the groups the
// status names at size 0 that no node shows and no NodeTemplate declares.
// A group the status does not name is kept: without a word from
// cluster-autoscaler it is judged as without the ConfigMap.
//
// A status group of one zone (a GKE managed instance group) that has room
// and that no node shows in its zone, whose node group has nodes in other
// zones, adds that group's template in its zone to groups, shaped like
// one of those nodes: cluster-autoscaler adds such a node there, from the
// instance template the group's MIGs share.
func (s *ClusterAutoscalerStatus) judge(groups map[groupZone]*v1.Node, groupLabel string, declared []Declared) (full []NodeGroupSize, zero []ScaledToZero) {
	refs := make([]groupRef, len(s.NodeGroups))
	for i, g := range s.NodeGroups {
		refs[i] = parseGroupName(g.Name)
	}
	shown, models := s.shownAndModels(refs, groups)
	fullSeen := map[int]bool{}
	for gz := range groups {
		matched, room := false, false
		for i, r := range refs {
			if !r.covers(gz) {
				continue
			}
			matched = true
			if s.NodeGroups[i].full() {
				fullSeen[i] = true
			} else {
				room = true
			}
		}
		if matched && !room {
			delete(groups, gz)
		}
	}
	added := map[groupZone]*v1.Node{}
	for i, g := range s.NodeGroups {
		if fullSeen[i] {
			full = append(full, g)
		}
		m, modelled := models[i]
		switch {
		case shown[i] || g.Max == 0:
			continue
		case modelled && !g.full():
			added[groupZone{group: m.group, zone: refs[i].zone}] = m.node
			continue
		case g.Target != 0:
			continue
		}
		t := declareFor(g, refs[i], groupLabel)
		if !isDeclared(t, declared, groupLabel) {
			zero = append(zero, ScaledToZero{Group: g, NodeTemplate: t})
		}
	}
	maps.Copy(groups, added)
	slices.SortFunc(full, func(a, b NodeGroupSize) int { return cmp.Compare(a.Name, b.Name) })
	slices.SortFunc(zero, func(a, b ScaledToZero) int { return cmp.Compare(a.Group.Name, b.Group.Name) })
	return full, zero
}

// covers reports whether the status group r stands for the node group gz
// names in gz's zone: r is that group, and, when r's name says a zone, in
// that zone.
func (r groupRef) covers(gz groupZone) bool {
	return r.matches(gz.group) && (r.zone == "" || r.zone == gz.zone)
}

// model is a node of a node group whose shape a new node of another zone
// of the group takes.
type model struct {
	group string
	node  *v1.Node
}

// shownAndModels reports, for each status group, whether a node of it is
// among groups (in its zone, when its name says one), and, for one of a
// zone that no node shows, a node of its node group in another zone to
// take the shape of: the better model (betterModel) of the first group
// by label value.
func (s *ClusterAutoscalerStatus) shownAndModels(refs []groupRef, groups map[groupZone]*v1.Node) (shown map[int]bool, models map[int]model) {
	keys := slices.SortedFunc(maps.Keys(groups), func(a, b groupZone) int {
		return cmp.Or(cmp.Compare(a.group, b.group), cmp.Compare(a.zone, b.zone))
	})
	shown, models = map[int]bool{}, map[int]model{}
	for i, r := range refs {
		for _, gz := range keys {
			switch {
			case !r.matches(gz.group):
			case r.covers(gz):
				shown[i] = true
			case r.zone != "" && gz.zone != "":
				if m, ok := models[i]; !ok || m.group == gz.group && betterModel(groups[gz], m.node) {
					models[i] = model{group: gz.group, node: groups[gz]}
				}
			}
		}
		if shown[i] {
			delete(models, i)
		}
	}
	return shown, models
}

// declareFor builds the NodeTemplate to declare for the status group g.
func declareFor(g NodeGroupSize, r groupRef, groupLabel string) v1alpha1.NodeTemplate {
	labels := map[string]string{}
	if r.label != "" && groupLabel != "" {
		labels[groupLabel] = r.label
	}
	if r.zone != "" {
		labels[v1.LabelTopologyZone] = r.zone
	}
	name := cmp.Or(r.label, r.base)
	return v1alpha1.NodeTemplate{
		TypeMeta:   metav1.TypeMeta{APIVersion: v1alpha1.GroupVersion.String(), Kind: v1alpha1.KindNodeTemplate},
		ObjectMeta: metav1.ObjectMeta{Name: objectName(name)},
		Spec:       v1alpha1.NodeTemplateSpec{Labels: labels},
	}
}

// objectName turns a group name into a valid object name (a DNS
// subdomain): lower case, runs of other characters as '-'.
func objectName(s string) string {
	var b strings.Builder
	dash := false
	for _, c := range strings.ToLower(s) {
		if c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '.' {
			b.WriteRune(c)
			dash = false
		} else if !dash {
			b.WriteByte('-')
			dash = true
		}
	}
	out := strings.Trim(b.String(), "-.")
	if len(out) > validation.DNS1123SubdomainMaxLength {
		out = strings.TrimRight(out[:validation.DNS1123SubdomainMaxLength], "-.")
	}
	return cmp.Or(out, "node-group")
}

// isDeclared reports whether a NodeTemplate already stands for the group
// of t: one of its name, or one that carries its node-group label.
func isDeclared(t v1alpha1.NodeTemplate, declared []Declared, groupLabel string) bool {
	want, byLabel := t.Spec.Labels[groupLabel]
	return slices.ContainsFunc(declared, func(d Declared) bool {
		if d.Name == t.Name {
			return true
		}
		got, ok := d.Labels[groupLabel]
		return byLabel && ok && got == want
	})
}

// expandZoneless gives a node group whose nodes carry no zone a template in
// each of the operator's zones: nothing else says where it adds nodes. A
// group with a node in some zone keeps the zones seen.
func expandZoneless(groups map[groupZone]*v1.Node, zones []string) map[groupZone]*v1.Node {
	if len(zones) == 0 {
		return groups
	}
	zoned := map[string]bool{}
	for gz := range groups {
		if gz.zone != "" {
			zoned[gz.group] = true
		}
	}
	for gz, n := range groups {
		if gz.zone != "" || zoned[gz.group] {
			continue
		}
		delete(groups, gz)
		for _, z := range zones {
			groups[groupZone{group: gz.group, zone: z}] = n
		}
	}
	return groups
}
