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

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
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
// is what it last wrote. It remembers the resourceVersion of each Report
// it wrote, so that a replacement is one request, not a read and a write.
type reportWriter struct {
	client client.Client
	mapper meta.RESTMapper
	// written holds the Reports last written; nil until a pass lists the
	// Reports that exist.
	written map[client.ObjectKey]writtenReport
}

// writtenReport is what the writer knows of a Report it owns.
type writtenReport struct {
	// content is the JSON last written; empty when unknown (listed).
	content         string
	resourceVersion string
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
		w.written = nil
		return nil
	} else if err != nil {
		return fmt.Errorf("looking up %s: %w", reportGVK, err)
	}
	if w.written == nil {
		if err := w.list(ctx); err != nil {
			return err
		}
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
		old, known := w.written[key]
		if known && old.content == string(data) {
			continue
		}
		if err := wait(ctx); err != nil {
			return errors.Join(append(errs, err)...)
		}
		rv, err := w.put(ctx, key, wanted[key], old.resourceVersion)
		switch {
		case apierrors.HasStatusCause(err, v1.NamespaceTerminatingCause):
			continue
		case err != nil:
			m.failed(objectReport)
			errs = append(errs, err)
			continue
		}
		w.written[key] = writtenReport{content: string(data), resourceVersion: rv}
		p.Reports = append(p.Reports, key.String())
	}
	for _, key := range sortedKeys(w.written) {
		if _, ok := wanted[key]; ok || unsplit[key.Namespace] {
			continue
		}
		if err := wait(ctx); err != nil {
			return errors.Join(append(errs, err)...)
		}
		r := &unstructured.Unstructured{}
		r.SetGroupVersionKind(reportGVK)
		r.SetNamespace(key.Namespace)
		r.SetName(key.Name)
		if err := w.client.Delete(ctx, r); err != nil && !apierrors.IsNotFound(err) {
			m.failed(objectReport)
			errs = append(errs, fmt.Errorf("deleting the Report %s: %w", key, err))
			continue
		}
		delete(w.written, key)
		p.Reports = append(p.Reports, key.String())
	}
	return errors.Join(errs...)
}

// list finds the Reports the controller owns, whose content it does not
// know: they are written again, or deleted, by the pass. It is the one
// list the controller sends, once per leadership.
func (w *reportWriter) list(ctx context.Context) error {
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(reportGVK.GroupVersion().WithKind(reportGVK.Kind + "List"))
	if err := w.client.List(ctx, list, client.MatchingLabels{labelManagedBy: health.ReportSource}); err != nil {
		return fmt.Errorf("listing the Reports: %w", err)
	}
	w.written = map[client.ObjectKey]writtenReport{}
	for _, r := range list.Items {
		if r.GetName() == health.ReportName || strings.HasPrefix(r.GetName(), health.ReportName+"-") {
			w.written[client.ObjectKeyFromObject(&r)] = writtenReport{resourceVersion: r.GetResourceVersion()}
		}
	}
	return nil
}

// put creates the Report key, or replaces the one there at
// resourceVersion (empty: not known to be there), and returns the
// resourceVersion written. Its results are the audit's, none kept from
// before. A Report changed or deleted by someone else since it was
// written is read again and replaced.
func (w *reportWriter) put(ctx context.Context, key client.ObjectKey, rep *health.Report, resourceVersion string) (string, error) {
	content, err := runtime.DefaultUnstructuredConverter.ToUnstructured(rep)
	if err != nil {
		return "", fmt.Errorf("converting the Report %s: %w", key, err)
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
			return r.GetResourceVersion(), wrapPut(key, err)
		}
		r.SetResourceVersion("")
	}
	err = w.client.Create(ctx, r)
	if apierrors.IsAlreadyExists(err) {
		stored := &unstructured.Unstructured{}
		stored.SetGroupVersionKind(reportGVK)
		if err := w.client.Get(ctx, key, stored); err != nil {
			return "", fmt.Errorf("reading the Report %s: %w", key, err)
		}
		r.SetResourceVersion(stored.GetResourceVersion())
		err = w.client.Update(ctx, r)
	}
	return r.GetResourceVersion(), wrapPut(key, err)
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
