package cache

import (
	"encoding/json"
	"fmt"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	toolscache "k8s.io/client-go/tools/cache"
	crcache "sigs.k8s.io/controller-runtime/pkg/cache"

	"github.com/spreadguard/spreadguard/pkg/forecast"
	"github.com/spreadguard/spreadguard/pkg/spread/spreadtest"
	"github.com/spreadguard/spreadguard/test/perf/fixture"
)

// BenchmarkDeploymentCache measures what watching the cluster's
// Deployments costs the webhook in memory: the heap the informer's store
// holds once it has every Deployment of the 5,000-node cluster of the other
// benchmarks (150,000 pods in Deployments of 30 replicas: 5,000
// Deployments of about 9 KiB of JSON each), through StripDeployment. The
// baseline keeps each Deployment whole less its managedFields, what an
// informer without a transform of its own keeps
// (crcache.TransformStripManagedFields). Each Deployment is decoded from its
// JSON on its own, as a watch decodes it, so that none shares memory with
// another. Each op is one fill.
func BenchmarkDeploymentCache(b *testing.B) {
	c := fixture.New(5000)
	n := c.Workloads()
	encoded := make([][]byte, n)
	for w := range n {
		var err error
		if encoded[w], err = json.Marshal(c.Deployment(w)); err != nil {
			b.Fatal(err)
		}
	}
	for _, cache := range []struct {
		name      string
		transform toolscache.TransformFunc
	}{
		{name: "strip", transform: StripDeployment},
		{name: "untransformed", transform: crcache.TransformStripManagedFields()},
	} {
		b.Run(fmt.Sprintf("deployments=%d/cache=%s", n, cache.name), func(b *testing.B) {
			var held uint64
			for b.Loop() {
				held = spreadtest.HeldBy(b, func() any { return fillDeployments(b, encoded, cache.transform) })
			}
			b.ReportMetric(float64(held)/float64(n), "B/deployment")
			b.ReportMetric(float64(held)/(1<<20), "MiB")
			b.ReportMetric(float64(len(encoded[0])), "json-B/deployment")
		})
	}
}

// fillDeployments decodes every Deployment, transforms it and adds it to
// an informer's store.
func fillDeployments(b *testing.B, encoded [][]byte, transform toolscache.TransformFunc) toolscache.Indexer {
	store := toolscache.NewIndexer(toolscache.MetaNamespaceKeyFunc,
		toolscache.Indexers{toolscache.NamespaceIndex: toolscache.MetaNamespaceIndexFunc})
	for _, data := range encoded {
		d := &appsv1.Deployment{}
		if err := json.Unmarshal(data, d); err != nil {
			b.Fatal(err)
		}
		obj, err := transform(d)
		if err != nil {
			b.Fatal(err)
		}
		if err := store.Add(obj); err != nil {
			b.Fatal(err)
		}
	}
	return store
}

// BenchmarkDeploymentEvent measures the transform of one Deployment event,
// decoded. The baseline is StripReplicaSet on the ReplicaSet of the same
// template, which keeps the same part of it. hash=PodTemplateHash is what
// hashing the whole template for the pod-template-hash would add to each
// event, which is why StripDeployment leaves it to the ReplicaSet.
func BenchmarkDeploymentEvent(b *testing.B) {
	c := fixture.New(50)
	d := c.Deployment(0)
	hash := func(obj any) (any, error) {
		return forecast.PodTemplateHash(&obj.(*appsv1.Deployment).Spec.Template, nil), nil
	}
	for _, tt := range []struct {
		name      string
		transform toolscache.TransformFunc
		obj       any
	}{
		{name: "transform=StripDeployment", transform: StripDeployment, obj: d},
		{name: "transform=StripReplicaSet", transform: StripReplicaSet, obj: c.ReplicaSet(0)},
		{name: "hash=PodTemplateHash", transform: hash, obj: d},
	} {
		b.Run(tt.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := tt.transform(tt.obj); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
