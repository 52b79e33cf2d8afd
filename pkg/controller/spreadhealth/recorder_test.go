package spreadhealth

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/spreadguard/spreadguard/pkg/apis/spreadguard/v1alpha1"
	"github.com/spreadguard/spreadguard/pkg/health"
	"github.com/spreadguard/spreadguard/pkg/lookup"
)

// recorder is the API server as the controller's writes see it: it keeps
// the Reports, applies status patches to the policies of a lookup.Store
// (which stands for the cache, and holds the objects themselves), and
// records every request. The controller calls nothing else of a
// client.Client; the embedded nil one fails loudly if it did.
type recorder struct {
	client.Client
	store *lookup.Store
	// refuse, when set, answers a request ("CREATE", "UPDATE", "DELETE",
	// "PATCH") on key instead of the API server.
	refuse func(verb string, key client.ObjectKey) error

	mu       sync.Mutex
	requests []string
	reports  map[client.ObjectKey]*unstructured.Unstructured
	version  int
	// largest is the size of the largest object written, in bytes of
	// JSON.
	largest int
}

func newRecorder(store *lookup.Store) *recorder {
	return &recorder{store: store, reports: map[client.ObjectKey]*unstructured.Unstructured{}}
}

// take returns the requests recorded since the last take.
func (r *recorder) take() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := r.requests
	r.requests = nil
	return out
}

func (r *recorder) record(verb string, key client.ObjectKey, obj any) error {
	r.requests = append(r.requests, verb+" "+key.String())
	if data, err := json.Marshal(obj); err == nil {
		r.largest = max(r.largest, len(data))
	}
	if r.refuse != nil {
		return r.refuse(verb, key)
	}
	return nil
}

func (r *recorder) Get(_ context.Context, key client.ObjectKey, obj client.Object, _ ...client.GetOption) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.requests = append(r.requests, "GET "+key.String())
	stored, ok := r.reports[key]
	if !ok {
		return apierrors.NewNotFound(reportGVK.GroupVersion().WithResource("reports").GroupResource(), key.Name)
	}
	stored.DeepCopyInto(obj.(*unstructured.Unstructured))
	return nil
}

func (r *recorder) List(_ context.Context, list client.ObjectList, opts ...client.ListOption) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.requests = append(r.requests, "LIST reports")
	o := (&client.ListOptions{}).ApplyOptions(opts)
	var items []unstructured.Unstructured
	for _, key := range sortedKeys(r.reports) {
		rep := r.reports[key]
		if o.LabelSelector == nil || o.LabelSelector.Matches(labels.Set(rep.GetLabels())) {
			items = append(items, *rep.DeepCopy())
		}
	}
	list.(*unstructured.UnstructuredList).Items = items
	return nil
}

func (r *recorder) Create(_ context.Context, obj client.Object, _ ...client.CreateOption) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	key := client.ObjectKeyFromObject(obj)
	if err := r.record("CREATE", key, obj); err != nil {
		return err
	}
	if _, ok := r.reports[key]; ok {
		return apierrors.NewAlreadyExists(reportGVK.GroupVersion().WithResource("reports").GroupResource(), key.Name)
	}
	return r.store1(key, obj)
}

func (r *recorder) Update(_ context.Context, obj client.Object, _ ...client.UpdateOption) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	key := client.ObjectKeyFromObject(obj)
	if err := r.record("UPDATE", key, obj); err != nil {
		return err
	}
	stored, ok := r.reports[key]
	switch {
	case !ok:
		return apierrors.NewNotFound(reportGVK.GroupVersion().WithResource("reports").GroupResource(), key.Name)
	case stored.GetResourceVersion() != obj.GetResourceVersion():
		return apierrors.NewConflict(reportGVK.GroupVersion().WithResource("reports").GroupResource(), key.Name,
			fmt.Errorf("resourceVersion %s, stored %s", obj.GetResourceVersion(), stored.GetResourceVersion()))
	}
	return r.store1(key, obj)
}

// store1 keeps obj at a new resourceVersion, which obj gets too.
func (r *recorder) store1(key client.ObjectKey, obj client.Object) error {
	r.version++
	obj.SetResourceVersion(strconv.Itoa(r.version))
	r.reports[key] = obj.(*unstructured.Unstructured).DeepCopy()
	return nil
}

func (r *recorder) Delete(_ context.Context, obj client.Object, _ ...client.DeleteOption) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	key := client.ObjectKeyFromObject(obj)
	if err := r.record("DELETE", key, nil); err != nil {
		return err
	}
	delete(r.reports, key)
	return nil
}

func (r *recorder) Status() client.SubResourceWriter { return statusRecorder{r: r} }

// report returns the content of the Report key as the controller wrote it.
func (r *recorder) report(key client.ObjectKey) (*health.Report, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	u, ok := r.reports[key]
	if !ok {
		return nil, false
	}
	data, err := json.Marshal(u.Object)
	if err != nil {
		return nil, false
	}
	var rep health.Report
	return &rep, json.Unmarshal(data, &rep) == nil
}

// statusRecorder patches the status of the store's policies, as the API
// server would and the cache would then show. The controller calls no
// other method of a client.SubResourceWriter.
type statusRecorder struct {
	client.SubResourceWriter
	r *recorder
}

func (s statusRecorder) Patch(ctx context.Context, obj client.Object, patch client.Patch, _ ...client.SubResourcePatchOption) error {
	r := s.r
	r.mu.Lock()
	defer r.mu.Unlock()
	key := client.ObjectKeyFromObject(obj)
	if err := r.record("PATCH", key, nil); err != nil {
		return err
	}
	data, err := patch.Data(obj)
	if err != nil {
		return err
	}
	var body struct{ Status *v1alpha1.PolicyStatus }
	if err := json.Unmarshal(data, &body); err != nil {
		return err
	}
	for _, o := range r.store.Objects() {
		if m, ok := o.(client.Object); ok && client.ObjectKeyFromObject(m) == key {
			switch p := o.(type) {
			case *v1alpha1.SpreadPolicy:
				p.Status = *body.Status
			case *v1alpha1.ClusterSpreadPolicy:
				p.Status = *body.Status
			}
		}
	}
	return nil
}
