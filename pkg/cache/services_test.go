package cache

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

func service(ns, name string, selector map[string]string) *v1.Service {
	return &v1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: v1.ServiceSpec{Selector: selector}}
}

// TestServiceIndexSelectsWhatAScanSelects checks, over random Services,
// updates and pods, that the candidates hold every Service that selects the
// pod, and that matching the candidates gives what matching every Service
// of the namespace gives.
func TestServiceIndexSelectsWhatAScanSelects(t *testing.T) {
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	r := rand.New(rand.NewPCG(seed, 0))
	randomLabels := func(max int) map[string]string {
		if r.IntN(10) == 0 {
			return nil
		}
		m := map[string]string{}
		for range r.IntN(max + 1) {
			m[fmt.Sprintf("k%d", r.IntN(4))] = fmt.Sprintf("v%d", r.IntN(3))
		}
		return m
	}
	for round := range 200 {
		x := NewServiceIndex()
		all := map[string]*v1.Service{} // what a scan of the namespaces sees
		for range 40 {
			s := service(fmt.Sprintf("ns%d", r.IntN(2)), fmt.Sprintf("s%d", r.IntN(15)), randomLabels(3))
			key := s.Namespace + "/" + s.Name
			if r.IntN(5) == 0 {
				x.Delete(s)
				delete(all, key)
				continue
			}
			x.Set(s)
			all[key] = s
		}
		for range 20 {
			ns, podLabels := fmt.Sprintf("ns%d", r.IntN(2)), randomLabels(4)
			var want, got []string
			for _, s := range all {
				if s.Namespace == ns && s.Spec.Selector != nil && labels.SelectorFromValidatedSet(s.Spec.Selector).Matches(labels.Set(podLabels)) {
					want = append(want, s.Namespace+"/"+s.Name)
				}
			}
			for _, s := range x.Selecting(ns, podLabels) {
				if labels.SelectorFromValidatedSet(s.Spec.Selector).Matches(labels.Set(podLabels)) {
					got = append(got, s.Namespace+"/"+s.Name)
				}
			}
			slices.Sort(want)
			slices.Sort(got)
			if diff := cmp.Diff(want, got); diff != "" {
				t.Fatalf("round %d, pod %v in %s: Services that select it (-scan +index):\n%s", round, podLabels, ns, diff)
			}
		}
	}
}
