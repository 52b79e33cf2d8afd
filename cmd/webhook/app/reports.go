package app

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/spreadguard/spreadguard/pkg/health"
)

// reportGVK is the kind of the Reports the audit writes. spreadguard does
// not import the openreports API: it writes unstructured objects, and only
// while the API server serves the kind.
var reportGVK = schema.FromAPIVersionAndKind(health.ReportAPIVersion, health.ReportKind)

// labelManagedBy marks the Reports the audit owns, to find them again.
const labelManagedBy = "app.kubernetes.io/managed-by"

// reportWriter keeps one Report per namespace equal to the audit's: it
// creates, replaces and deletes them, and writes nothing when a Report is
// what it last wrote.
type reportWriter struct {
	client client.Client
	mapper meta.RESTMapper
	// written holds, per namespace, the content last written (JSON); nil
	// until a pass finds the Reports that exist.
	written map[string]string
}

// write makes the Reports of the cluster reports, and reports which
// namespaces it wrote in. Without the openreports CRD it does nothing.
func (w *reportWriter) write(ctx context.Context, reports map[string]*health.Report, wait func(context.Context) error, pass *AuditPass) error {
	if _, err := w.mapper.RESTMapping(reportGVK.GroupKind(), reportGVK.Version); meta.IsNoMatchError(err) {
		w.written = nil
		return nil
	} else if err != nil {
		return fmt.Errorf("looking up %s: %w", reportGVK, err)
	}
	if w.written == nil {
		list := &unstructured.UnstructuredList{}
		list.SetGroupVersionKind(reportGVK.GroupVersion().WithKind(reportGVK.Kind + "List"))
		if err := w.client.List(ctx, list, client.MatchingLabels{labelManagedBy: health.ReportSource}); err != nil {
			return fmt.Errorf("listing the Reports: %w", err)
		}
		w.written = map[string]string{}
		for _, r := range list.Items {
			if r.GetName() == health.ReportName {
				w.written[r.GetNamespace()] = "" // content unknown: write it again
			}
		}
	}
	for _, ns := range slices.Sorted(maps.Keys(reports)) {
		data, err := json.Marshal(reports[ns])
		if err != nil {
			return fmt.Errorf("encoding the Report of %s: %w", ns, err)
		}
		if content, ok := w.written[ns]; ok && content == string(data) {
			continue
		}
		if err := wait(ctx); err != nil {
			return err
		}
		if err := w.put(ctx, ns, reports[ns]); err != nil {
			return err
		}
		w.written[ns] = string(data)
		pass.Reports = append(pass.Reports, ns)
	}
	for _, ns := range slices.Sorted(maps.Keys(w.written)) {
		if _, ok := reports[ns]; ok {
			continue
		}
		if err := wait(ctx); err != nil {
			return err
		}
		r := &unstructured.Unstructured{}
		r.SetGroupVersionKind(reportGVK)
		r.SetNamespace(ns)
		r.SetName(health.ReportName)
		if err := w.client.Delete(ctx, r); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("deleting the Report of %s: %w", ns, err)
		}
		delete(w.written, ns)
		pass.Reports = append(pass.Reports, ns)
	}
	return nil
}

// put creates the Report of ns, or replaces the one there: its results are
// the audit's, none kept from before.
func (w *reportWriter) put(ctx context.Context, ns string, rep *health.Report) error {
	content, err := runtime.DefaultUnstructuredConverter.ToUnstructured(rep)
	if err != nil {
		return fmt.Errorf("converting the Report of %s: %w", ns, err)
	}
	r := &unstructured.Unstructured{}
	r.SetGroupVersionKind(reportGVK)
	err = w.client.Get(ctx, client.ObjectKey{Namespace: ns, Name: health.ReportName}, r)
	found := err == nil
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("reading the Report of %s: %w", ns, err)
	}
	if !found {
		r = &unstructured.Unstructured{Object: map[string]any{}}
		r.SetGroupVersionKind(reportGVK)
		r.SetNamespace(ns)
		r.SetName(health.ReportName)
	}
	labels := r.GetLabels()
	if labels == nil {
		labels = map[string]string{}
	}
	labels[labelManagedBy] = health.ReportSource
	r.SetLabels(labels)
	maps.Copy(r.Object, content)
	if found {
		err = w.client.Update(ctx, r)
	} else {
		err = w.client.Create(ctx, r)
	}
	if err != nil {
		return fmt.Errorf("writing the Report of %s: %w", ns, err)
	}
	return nil
}
