package parity

import (
	"fmt"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	podutil "k8s.io/kubernetes/pkg/api/pod"
	"k8s.io/kubernetes/pkg/apis/core"
	corev1 "k8s.io/kubernetes/pkg/apis/core/v1"
	corevalidation "k8s.io/kubernetes/pkg/apis/core/validation"
)

// TestGeneratedObjectsAreValid runs the apiserver's own validation over
// generated clusters: a disagreement on an object the apiserver would refuse
// proves nothing, so the generator must only draw objects that can exist.
func TestGeneratedObjectsAreValid(t *testing.T) {
	// The control: the validator is wired and refuses what the generator
	// must never draw.
	dup := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "dup", Namespace: "ns"}}
	for range 2 {
		dup.Spec.TopologySpreadConstraints = append(dup.Spec.TopologySpreadConstraints,
			v1.TopologySpreadConstraint{MaxSkew: 1, TopologyKey: labelZone, WhenUnsatisfiable: v1.DoNotSchedule})
	}
	if validatePod(dup) == nil {
		t.Fatalf("a pod repeating (topologyKey, whenUnsatisfiable) passed validation; the validator is not wired")
	}
	for i := range 300 {
		c := newGen(fixedSeed, i).clusterCase()
		for _, tpl := range c.Templates {
			if errs := validateNode(freshNode(tpl)); errs != nil {
				t.Errorf("case %d: the fresh node of template %s is invalid: %v", i, tpl.Name, errs)
			}
		}
		for _, n := range c.Nodes {
			if errs := validateNode(n); errs != nil {
				t.Errorf("case %d: node %s is invalid: %v", i, n.Name, errs)
			}
		}
		for _, p := range append([]*v1.Pod{storedPod(c.Pod)}, c.Pods...) {
			if errs := validatePod(p); errs != nil {
				t.Errorf("case %d: pod %s/%s is invalid: %v\n%s", i, p.Namespace, p.Name, errs, formatIncoming(p))
			}
		}
	}
}

func validateNode(n *v1.Node) error {
	n = n.DeepCopy()
	corev1.SetObjectDefaults_Node(n)
	var internal core.Node
	if err := corev1.Convert_v1_Node_To_core_Node(n, &internal, nil); err != nil {
		return fmt.Errorf("converting: %w", err)
	}
	return corevalidation.ValidateNode(&internal).ToAggregate()
}

// validatePod validates p as the apiserver does on create, after defaulting
// and with the options its feature gates give.
func validatePod(p *v1.Pod) error {
	p = p.DeepCopy()
	if len(p.Spec.Containers) == 0 {
		p.Spec.Containers = []v1.Container{{Name: "app", Image: "registry.example/app:1"}}
	}
	corev1.SetObjectDefaults_Pod(p)
	var internal core.Pod
	if err := corev1.Convert_v1_Pod_To_core_Pod(p, &internal, nil); err != nil {
		return fmt.Errorf("converting: %w", err)
	}
	opts := podutil.GetValidationOptionsFromPodSpecAndMeta(&internal.Spec, nil, &internal.ObjectMeta, nil)
	return corevalidation.ValidatePodCreate(&internal, opts).ToAggregate()
}
