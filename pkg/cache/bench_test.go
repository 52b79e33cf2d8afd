package cache

import (
	"fmt"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"

	"github.com/spreadguard/spreadguard/pkg/spread"
	"github.com/spreadguard/spreadguard/pkg/spread/spreadtest"
)

// lookupSources answers DefaultSelector's owner lookups from a map, and its
// Service lookup by handing out the namespace's whole list, as the
// scheduler's Service lister does.
type lookupSources struct {
	services    map[string][]*v1.Service
	replicaSets map[string]*appsv1.ReplicaSet
}

func (s *lookupSources) Services(namespace string) ([]*v1.Service, error) {
	return s.services[namespace], nil
}

func (s *lookupSources) ReplicaSet(namespace, name string) (*appsv1.ReplicaSet, error) {
	return s.replicaSets[namespace+"/"+name], nil
}

func (s *lookupSources) ReplicationController(string, string) (*v1.ReplicationController, error) {
	return nil, nil
}

func (s *lookupSources) StatefulSet(string, string) (*appsv1.StatefulSet, error) { return nil, nil }

// indexedSources narrows the Services through a ServiceIndex, as the
// webhook's Sources does once synced.
type indexedSources struct {
	*lookupSources
	index *ServiceIndex
}

func (s *indexedSources) ServicesSelecting(namespace string, podLabels map[string]string) ([]*v1.Service, error) {
	return s.index.Selecting(namespace, podLabels), nil
}

// BenchmarkDefaultSelector measures the lookups of a mutation: the
// selector of a new replica of a Deployment (its Service and its
// ReplicaSet) in a namespace of n Deployments, each with a Service and a
// ReplicaSet: n = 25 and 2,500 are the busiest namespace of the
// 50-node and 5,000-node clusters of the other benchmarks (30 pods per
// node, Deployments of 30 replicas, half of them in one namespace). The
// baseline matches every Service of the namespace, as kube-scheduler's
// DefaultSelector does; the index visits the Services filed under the
// pod's labels.
func BenchmarkDefaultSelector(b *testing.B) {
	for _, n := range []int{25, 2500} {
		src := &lookupSources{services: map[string][]*v1.Service{}, replicaSets: map[string]*appsv1.ReplicaSet{}}
		index := NewServiceIndex()
		for i := range n {
			app := fmt.Sprintf("app-%d", i)
			svc := spreadtest.MakeService().Namespace("big").Name(app).Selector("app", app).Obj()
			src.services["big"] = append(src.services["big"], svc)
			index.Set(svc)
			rs := spreadtest.MakeReplicaSet().Namespace("big").Name(app+"-7d9f").
				MatchLabel("app", app).MatchLabel("pod-template-hash", "7d9f").Obj()
			src.replicaSets["big/"+rs.Name] = rs
		}
		app := fmt.Sprintf("app-%d", n/2)
		pod := spreadtest.MakePod().Namespace("big").Name(app+"-7d9f-x").Label("app", app).
			Label("pod-template-hash", "7d9f").ControlledBy("ReplicaSet", "apps/v1", app+"-7d9f").Obj()
		for _, lookup := range []struct {
			name string
			src  spread.SelectorSources
		}{{"scan", src}, {"index", &indexedSources{src, index}}} {
			b.Run(fmt.Sprintf("services=%d/lookup=%s", n, lookup.name), func(b *testing.B) {
				sel, err := spread.DefaultSelector(pod, lookup.src)
				// The Service's pair, then the ReplicaSet's requirements
				// appended, as the scheduler builds it.
				if want := "app=" + app + ",app=" + app + ",pod-template-hash=7d9f"; err != nil || sel.String() != want {
					b.Fatalf("DefaultSelector() = %v, %v; want %s", sel, err, want)
				}
				b.ReportAllocs()
				for b.Loop() {
					_, _ = spread.DefaultSelector(pod, lookup.src)
				}
			})
		}
	}
}
