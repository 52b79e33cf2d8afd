package spreadhealth

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/spreadguard/spreadguard/pkg/apis/spreadguard/v1alpha1"
	"github.com/spreadguard/spreadguard/pkg/health"
	"github.com/spreadguard/spreadguard/pkg/lookup"
)

// recorder is the API server as the controller's writes see it: it keeps
// the Reports, applies status patches to the policies of a lookup.Store
// (which stands for the cache, and holds the objects themselves), and
// records every request; it serves watches of the Reports' metadata from
// a log of their changes, as the API server's watch cache does. The
// controller calls nothing else of a client.Client; the embedded nil one
// fails loudly if it did.
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
	// events are the Reports' changes, in order, at their versions; the
	// watches send them.
	events  []watch.Event
	watches []*reportWatch
	// watched counts the watches opened, which requests leaves out (a
	// watch is one long request, not one a pass sends).
	watched int
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
	switch l := list.(type) {
	case *unstructured.UnstructuredList:
		l.Items = items
		l.SetResourceVersion(strconv.Itoa(r.version))
	case *metav1.PartialObjectMetadataList:
		l.Items = nil
		for i := range items {
			l.Items = append(l.Items, *metadataOf(&items[i]))
		}
		l.ResourceVersion = strconv.Itoa(r.version)
	default:
		return fmt.Errorf("listing %T: not served", list)
	}
	return nil
}

// Watch sends the changes of the Reports' metadata after the list
// options' resourceVersion, then each as it happens, to the labels
// selected (a Report relabelled out of them is deleted, as the API server
// says).
func (r *recorder) Watch(_ context.Context, list client.ObjectList, opts ...client.ListOption) (watch.Interface, error) {
	if _, ok := list.(*metav1.PartialObjectMetadataList); !ok {
		return nil, fmt.Errorf("watching %T: not served", list)
	}
	o := (&client.ListOptions{}).ApplyOptions(opts)
	from := 0
	if o.Raw != nil && o.Raw.ResourceVersion != "" {
		var err error
		if from, err = strconv.Atoi(o.Raw.ResourceVersion); err != nil {
			return nil, fmt.Errorf("watching from resourceVersion %q: %w", o.Raw.ResourceVersion, err)
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.watched++
	w := &reportWatch{selector: o.LabelSelector, ch: make(chan watch.Event, 1024), done: make(chan struct{})}
	for _, ev := range r.events {
		if v, _ := strconv.Atoi(ev.Object.(*metav1.PartialObjectMetadata).ResourceVersion); v > from {
			w.send(ev)
		}
	}
	r.watches = append(r.watches, w)
	return w, nil
}

// IsWatchListSemanticsUnSupported says that the recorder's watches send no
// initial events: the informer lists, then watches.
func (r *recorder) IsWatchListSemanticsUnSupported() bool { return true }

// changed logs a change of a Report and sends it to the watches.
func (r *recorder) changed(typ watch.EventType, obj *unstructured.Unstructured) {
	ev := watch.Event{Type: typ, Object: metadataOf(obj)}
	r.events = append(r.events, ev)
	for _, w := range r.watches {
		w.send(ev)
	}
}

// deletedBySomeoneElse deletes the Report key, as a user's kubectl delete
// would: no request of the controller's.
func (r *recorder) deletedBySomeoneElse(key client.ObjectKey) {
	r.mu.Lock()
	defer r.mu.Unlock()
	stored, ok := r.reports[key]
	if !ok {
		return
	}
	delete(r.reports, key)
	r.version++
	stored.SetResourceVersion(strconv.Itoa(r.version))
	r.changed(watch.Deleted, stored)
}

// rewrittenBySomeoneElse replaces the results of the Report key with none,
// as another writer might.
func (r *recorder) rewrittenBySomeoneElse(key client.ObjectKey) {
	r.mu.Lock()
	defer r.mu.Unlock()
	stored, ok := r.reports[key]
	if !ok {
		return
	}
	stored.Object["results"] = []any{}
	stored.SetGeneration(stored.GetGeneration() + 1)
	r.version++
	stored.SetResourceVersion(strconv.Itoa(r.version))
	r.changed(watch.Modified, stored)
}

func metadataOf(u *unstructured.Unstructured) *metav1.PartialObjectMetadata {
	return &metav1.PartialObjectMetadata{
		TypeMeta: metav1.TypeMeta{APIVersion: u.GetAPIVersion(), Kind: u.GetKind()},
		ObjectMeta: metav1.ObjectMeta{Namespace: u.GetNamespace(), Name: u.GetName(), Labels: u.GetLabels(),
			ResourceVersion: u.GetResourceVersion(), UID: u.GetUID(), Generation: u.GetGeneration()},
	}
}

// reportWatch is one watch of the Reports.
type reportWatch struct {
	selector labels.Selector
	ch       chan watch.Event
	done     chan struct{}
	stopped  sync.Once
}

func (w *reportWatch) ResultChan() <-chan watch.Event { return w.ch }

func (w *reportWatch) Stop() { w.stopped.Do(func() { close(w.done) }) }

// send sends ev when its Report is selected, unless the watch stopped.
func (w *reportWatch) send(ev watch.Event) {
	if m := ev.Object.(*metav1.PartialObjectMetadata); w.selector != nil && !w.selector.Matches(labels.Set(m.Labels)) {
		return
	}
	select {
	case w.ch <- ev:
	case <-w.done:
	}
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

// store1 keeps obj at a new resourceVersion and generation, which obj
// gets too, and a new uid when it is created.
func (r *recorder) store1(key client.ObjectKey, obj client.Object) error {
	r.version++
	obj.SetResourceVersion(strconv.Itoa(r.version))
	typ := watch.Modified
	if stored, ok := r.reports[key]; ok {
		obj.SetUID(stored.GetUID())
		obj.SetGeneration(stored.GetGeneration() + 1)
	} else {
		typ = watch.Added
		obj.SetUID(types.UID(fmt.Sprintf("uid-%d", r.version)))
		obj.SetGeneration(1)
	}
	r.reports[key] = obj.(*unstructured.Unstructured).DeepCopy()
	r.changed(typ, r.reports[key])
	return nil
}

func (r *recorder) Delete(_ context.Context, obj client.Object, _ ...client.DeleteOption) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	key := client.ObjectKeyFromObject(obj)
	if err := r.record("DELETE", key, nil); err != nil {
		return err
	}
	if stored, ok := r.reports[key]; ok {
		delete(r.reports, key)
		r.version++
		stored.SetResourceVersion(strconv.Itoa(r.version))
		r.changed(watch.Deleted, stored)
	}
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
