package spreadhealth

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/spreadguard/spreadguard/pkg/health"
)

// reportGVK is the kind of the Reports the controller writes. spreadguard
// does not import the openreports API: it writes unstructured objects, and
// only while the API server serves the kind.
var reportGVK = schema.FromAPIVersionAndKind(health.ReportAPIVersion, health.ReportKind)

// labelManagedBy marks the Reports the controller owns, to find them
// again.
const labelManagedBy = "app.kubernetes.io/managed-by"

// reportWriter keeps the Reports of each namespace equal to the audit's
// (one, or its shards when one would outgrow etcd's limit: health.Shards):
// it creates, replaces and deletes them, and writes nothing when a Report
// is what it last wrote and still on the server as it wrote it. It
// remembers the resourceVersion of each Report it wrote, so that a
// replacement is one request, not a read and a write.
//
// What the server holds it learns from a watch of the metadata of the
// Reports it owns, opened by the first pass that finds the kind served:
// one list (or a streaming watch) when it starts, then events alone. A
// Report that someone else deletes, or rewrites, is forgotten and a pass
// is asked for, which writes it again; the Reports' own content never
// crosses the watch.
type reportWriter struct {
	client client.Client
	// watcher lists and watches the metadata of the Reports.
	watcher client.WithWatch
	mapper  meta.RESTMapper
	// changed asks for a pass: a Report was deleted or rewritten by
	// someone else.
	changed func()

	mu sync.Mutex
	// written holds the Reports last written; nil until the watch has
	// listed the Reports that exist.
	written map[client.ObjectKey]writtenReport
	// stop ends the watch; nil when none runs.
	stop context.CancelFunc
}

// writtenReport is what the writer knows of a Report it owns.
type writtenReport struct {
	// content is the JSON last written; empty when unknown (listed, or
	// rewritten by someone else).
	content         string
	resourceVersion string
	// uid and generation are those of the Report as written: an event of
	// the same Report at a later generation is someone else's write, and
	// one of another uid is of a Report deleted before.
	uid        types.UID
	generation int64
}

// reset forgets every Report and ends the watch: another replica may have
// led in between.
func (w *reportWriter) reset() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.stop != nil {
		w.stop()
		w.stop = nil
	}
	w.written = nil
}

func (w *reportWriter) known(key client.ObjectKey) (writtenReport, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	r, ok := w.written[key]
	return r, ok
}

func (w *reportWriter) remember(key client.ObjectKey, r writtenReport) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.written[key] = r
}

func (w *reportWriter) forget(key client.ObjectKey) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.written, key)
}

// keys returns the keys of the Reports written, in order.
func (w *reportWriter) keys() []client.ObjectKey {
	w.mu.Lock()
	defer w.mu.Unlock()
	return sortedKeys(w.written)
}

// write makes the Reports of the cluster those of reports (by namespace),
// and reports which it wrote or deleted. Without the openreports CRD it
// does nothing. A namespace being deleted is passed over (nothing can be
// created in it); a Report that cannot be written (a quota, an admission
// policy on Reports) is counted and passed over, and the errors are
// returned together, so that one namespace never stops the others.
func (w *reportWriter) write(ctx context.Context, reports map[string]*health.Report, terminating func(namespace string) bool,
	wait func(context.Context) error, p *Pass, m *Metrics) error {
	if _, err := w.mapper.RESTMapping(reportGVK.GroupKind(), reportGVK.Version); meta.IsNoMatchError(err) {
		w.reset()
		return nil
	} else if err != nil {
		return fmt.Errorf("looking up %s: %w", reportGVK, err)
	}
	if err := w.watch(ctx); err != nil {
		return err
	}
	wanted := map[client.ObjectKey]*health.Report{}
	// unsplit holds the namespaces whose Reports could not be bounded:
	// their Reports stay as last written rather than be deleted.
	unsplit := map[string]bool{}
	var errs []error
	for ns, rep := range reports {
		shards, err := health.Shards(rep, health.ReportLimit)
		if err != nil {
			m.failed(objectReport)
			unsplit[ns] = true
			errs = append(errs, fmt.Errorf("splitting the Report of %s: %w", ns, err))
			continue
		}
		for name, shard := range shards {
			wanted[client.ObjectKey{Namespace: ns, Name: name}] = shard
		}
	}
	for _, key := range sortedKeys(wanted) {
		if terminating(key.Namespace) {
			continue
		}
		data, err := json.Marshal(wanted[key])
		if err != nil {
			errs = append(errs, fmt.Errorf("encoding the Report %s: %w", key, err))
			continue
		}
		old, known := w.known(key)
		if known && old.content == string(data) {
			continue
		}
		if err := wait(ctx); err != nil {
			return errors.Join(append(errs, err)...)
		}
		stored, err := w.put(ctx, key, wanted[key], old.resourceVersion)
		switch {
		case apierrors.HasStatusCause(err, v1.NamespaceTerminatingCause):
			continue
		case err != nil:
			m.failed(objectReport)
			errs = append(errs, err)
			continue
		}
		w.remember(key, writtenReport{content: string(data), resourceVersion: stored.GetResourceVersion(),
			uid: stored.GetUID(), generation: stored.GetGeneration()})
		p.Reports = append(p.Reports, key.String())
	}
	for _, key := range w.keys() {
		if _, ok := wanted[key]; ok || unsplit[key.Namespace] {
			continue
		}
		if err := wait(ctx); err != nil {
			return errors.Join(append(errs, err)...)
		}
		// Forgotten first, so that the watch's event of this deletion
		// asks for no pass.
		old, _ := w.known(key)
		w.forget(key)
		r := &unstructured.Unstructured{}
		r.SetGroupVersionKind(reportGVK)
		r.SetNamespace(key.Namespace)
		r.SetName(key.Name)
		if err := w.client.Delete(ctx, r); err != nil && !apierrors.IsNotFound(err) {
			w.remember(key, old)
			m.failed(objectReport)
			errs = append(errs, fmt.Errorf("deleting the Report %s: %w", key, err))
			continue
		}
		p.Reports = append(p.Reports, key.String())
	}
	return errors.Join(errs...)
}

// watch starts the watch of the Reports the controller owns, unless it
// runs, and waits until it has listed them: those it finds, whose content
// the writer does not know, are written again, or deleted, by the pass.
// Its list is the one the controller sends, once per leadership (or when
// the API server has compacted past the watch); after it, only events.
func (w *reportWriter) watch(ctx context.Context) error {
	w.mu.Lock()
	running := w.stop != nil
	w.mu.Unlock()
	if running {
		return nil
	}
	listGVK := reportGVK.GroupVersion().WithKind(reportGVK.Kind + "List")
	owned := labels.SelectorFromSet(labels.Set{labelManagedBy: health.ReportSource})
	lw := &toolscache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			list := &metav1.PartialObjectMetadataList{}
			list.SetGroupVersionKind(listGVK)
			err := w.watcher.List(ctx, list, &client.ListOptions{LabelSelector: owned, Raw: &o})
			return list, err
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			list := &metav1.PartialObjectMetadataList{}
			list.SetGroupVersionKind(listGVK)
			return w.watcher.Watch(ctx, list, &client.ListOptions{LabelSelector: owned, Raw: &o})
		},
	}
	informer := toolscache.NewSharedIndexInformer(toolscache.ToListWatcherWithWatchListSemantics(lw, w.watcher),
		&metav1.PartialObjectMetadata{}, 0, toolscache.Indexers{})
	if _, err := informer.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		UpdateFunc: func(_, obj any) { w.seen(obj, false) },
		DeleteFunc: func(obj any) { w.seen(obj, true) },
	}); err != nil {
		return fmt.Errorf("watching the Reports: %w", err)
	}
	watchCtx, stop := context.WithCancel(ctx)
	go informer.RunWithContext(watchCtx)
	if !toolscache.WaitForCacheSync(ctx.Done(), informer.HasSynced) {
		stop()
		return fmt.Errorf("listing the Reports: %w", ctx.Err())
	}
	written := map[client.ObjectKey]writtenReport{}
	for _, obj := range informer.GetStore().List() {
		r, ok := obj.(*metav1.PartialObjectMetadata)
		if ok && (r.Name == health.ReportName || strings.HasPrefix(r.Name, health.ReportName+"-")) {
			written[client.ObjectKeyFromObject(r)] = writtenReport{resourceVersion: r.ResourceVersion, uid: r.UID, generation: r.Generation}
		}
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.written, w.stop = written, stop
	return nil
}

// seen is the watch's event of a Report the controller owns. When it is a
// Report as the writer wrote it, deleted or rewritten by someone else
// since, the writer forgets it (or its content) and asks for a pass. An
// event of its own writes, or of a Report deleted before it wrote one
// again, changes nothing.
func (w *reportWriter) seen(obj any, deleted bool) {
	if tombstone, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
		obj = tombstone.Obj
	}
	r, ok := obj.(*metav1.PartialObjectMetadata)
	if !ok {
		return
	}
	key := client.ObjectKeyFromObject(r)
	w.mu.Lock()
	old, known := w.written[key]
	switch {
	case !known || old.uid != r.UID:
		w.mu.Unlock()
		return
	case deleted:
		delete(w.written, key)
	case r.Generation > old.generation:
		w.written[key] = writtenReport{resourceVersion: r.ResourceVersion, uid: r.UID, generation: r.Generation}
	default:
		w.mu.Unlock()
		return
	}
	w.mu.Unlock()
	if w.changed != nil {
		w.changed()
	}
}

// put creates the Report key, or replaces the one there at
// resourceVersion (empty: not known to be there), and returns the
// Report as stored. Its results are the audit's, none kept from
// before. A Report changed or deleted by someone else since it was
// written is read again and replaced.
func (w *reportWriter) put(ctx context.Context, key client.ObjectKey, rep *health.Report, resourceVersion string) (*unstructured.Unstructured, error) {
	content, err := runtime.DefaultUnstructuredConverter.ToUnstructured(rep)
	if err != nil {
		return nil, fmt.Errorf("converting the Report %s: %w", key, err)
	}
	r := &unstructured.Unstructured{Object: content}
	r.SetGroupVersionKind(reportGVK)
	r.SetNamespace(key.Namespace)
	r.SetName(key.Name)
	r.SetLabels(map[string]string{labelManagedBy: health.ReportSource})
	if resourceVersion != "" {
		r.SetResourceVersion(resourceVersion)
		err = w.client.Update(ctx, r)
		if !apierrors.IsConflict(err) && !apierrors.IsNotFound(err) {
			return r, wrapPut(key, err)
		}
		r.SetResourceVersion("")
	}
	err = w.client.Create(ctx, r)
	if apierrors.IsAlreadyExists(err) {
		stored := &unstructured.Unstructured{}
		stored.SetGroupVersionKind(reportGVK)
		if err := w.client.Get(ctx, key, stored); err != nil {
			return nil, fmt.Errorf("reading the Report %s: %w", key, err)
		}
		r.SetResourceVersion(stored.GetResourceVersion())
		err = w.client.Update(ctx, r)
	}
	return r, wrapPut(key, err)
}

func wrapPut(key client.ObjectKey, err error) error {
	if err != nil {
		return fmt.Errorf("writing the Report %s: %w", key, err)
	}
	return nil
}

func sortedKeys[V any](m map[client.ObjectKey]V) []client.ObjectKey {
	return slices.SortedFunc(maps.Keys(m), func(a, b client.ObjectKey) int {
		return cmp.Or(strings.Compare(a.Namespace, b.Namespace), strings.Compare(a.Name, b.Name))
	})
}
