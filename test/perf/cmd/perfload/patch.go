package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

type mutatePatchOptions struct {
	url, caFile, out, label string
}

// reviewUID is the uid of the review mutate-patch sends; the answer must
// echo it.
const reviewUID = "perfload-mutate-patch"

// constraintsPath is where a patch that injects constraints writes them.
const constraintsPath = "/spec/topologySpreadConstraints"

// mutatePatch writes the JSON Patch the webhook at m.url answers to the
// mutating review of burst's first pod.
//
// The review holds the pod as the API server sends it to a mutating
// webhook: decoded and defaulted, with its managedFields, but not yet
// named, nor given a uid and a creation time, which come after the
// mutating webhooks. A dry-run create with no webhook registered returns
// the pod so, plus those three, which are cleared again. The patch answers
// this one pod; noopwebhook sends it for every pod of a burst, whose
// constraints then name the first pod's workload: the size and shape of
// the patch, which is what the API server's work on it depends on, are
// those of any burst pod's.
func mutatePatch(ctx context.Context, o *options, m *mutatePatchOptions) error {
	if m.url == "" || m.caFile == "" || m.out == "" {
		return errors.New("--webhook-url, --ca-file and --out are required")
	}
	key, value, ok := strings.Cut(m.label, "=")
	if !ok {
		return fmt.Errorf("--label %q: want key=value", m.label)
	}
	c, cl, err := o.connect()
	if err != nil {
		return err
	}
	p, err := burstPod(ctx, cl, c, 0, key, value)
	if err != nil {
		return err
	}
	if err := cl.Create(ctx, p, client.DryRunAll); err != nil {
		return fmt.Errorf("dry-run creating %s/%s: %w", p.Namespace, p.GenerateName, err)
	}
	if len(p.Spec.TopologySpreadConstraints) > 0 {
		return fmt.Errorf("the dry-run pod %s/%s came back with topology spread constraints: a webhook is registered", p.Namespace, p.Name)
	}
	p.Name, p.UID, p.CreationTimestamp = "", "", metav1.Time{}
	p.APIVersion, p.Kind = "v1", "Pod"
	raw, err := json.Marshal(p)
	if err != nil {
		return err
	}
	answer, err := postReview(ctx, m.url, m.caFile, podCreateReview(p.Namespace, raw))
	if err != nil {
		return err
	}
	patch, err := jsonPatchOf(answer)
	if err != nil {
		return fmt.Errorf("the answer of %s to the review of a new pod of %s/%s: %w", m.url, p.Namespace, p.GenerateName, err)
	}
	constraints, err := patchConstraints(patch)
	if err != nil {
		return fmt.Errorf("the patch of %s: %w", m.url, err)
	}
	if err := os.WriteFile(m.out, patch, 0o644); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "[perfload] the patch of %s for a new pod of %s/%s: %d bytes, %d topology spread constraints\n",
		m.url, p.Namespace, p.GenerateName, len(patch), len(constraints))
	return nil
}

// podCreateReview is the AdmissionReview of a dry-run pod CREATE in
// namespace, of the pod raw.
func podCreateReview(namespace string, raw []byte) *admissionv1.AdmissionReview {
	dryRun := true
	pod := metav1.GroupVersionKind{Version: "v1", Kind: "Pod"}
	pods := metav1.GroupVersionResource{Version: "v1", Resource: "pods"}
	return &admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
		Request: &admissionv1.AdmissionRequest{
			UID: reviewUID, Kind: pod, Resource: pods, RequestKind: &pod, RequestResource: &pods,
			Namespace: namespace, Operation: admissionv1.Create, DryRun: &dryRun,
			Object: runtime.RawExtension{Raw: raw},
		},
	}
}

// postReview sends review to the webhook at url, whose serving certificate
// the CA of caFile signed, and returns its answer.
func postReview(ctx context.Context, url, caFile string, review *admissionv1.AdmissionReview) (*admissionv1.AdmissionReview, error) {
	ca, err := os.ReadFile(caFile)
	if err != nil {
		return nil, err
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(ca) {
		return nil, fmt.Errorf("%s holds no PEM certificate", caFile)
	}
	body, err := json.Marshal(review)
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	hc := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots}}}
	data, err := do(hc, req)
	if err != nil {
		return nil, fmt.Errorf("posting a review to %s: %w", url, err)
	}
	var answer admissionv1.AdmissionReview
	if err := json.Unmarshal(data, &answer); err != nil {
		return nil, fmt.Errorf("the answer of %s is not an AdmissionReview: %w", url, err)
	}
	return &answer, nil
}

// jsonPatchOf is the JSON Patch of an answer to the review of reviewUID
// that allows the pod and patches it.
func jsonPatchOf(answer *admissionv1.AdmissionReview) ([]byte, error) {
	r := answer.Response
	switch {
	case r == nil:
		return nil, errors.New("it has no response")
	case r.UID != reviewUID:
		return nil, fmt.Errorf("it answers the review %q, not %q", r.UID, reviewUID)
	case !r.Allowed:
		msg := ""
		if r.Result != nil {
			msg = ": " + r.Result.Message
		}
		return nil, fmt.Errorf("it refuses the pod%s", msg)
	case len(r.Patch) == 0:
		return nil, errors.New("it does not patch the pod")
	case r.PatchType == nil || *r.PatchType != admissionv1.PatchTypeJSONPatch:
		return nil, errors.New("its patch is not of type JSONPatch")
	}
	return r.Patch, nil
}

// patchConstraints are the topology spread constraints patch writes into a
// pod that has none.
func patchConstraints(patch []byte) ([]v1.TopologySpreadConstraint, error) {
	var ops []struct {
		Op    string          `json:"op"`
		Path  string          `json:"path"`
		Value json.RawMessage `json:"value"`
	}
	if err := json.Unmarshal(patch, &ops); err != nil {
		return nil, fmt.Errorf("not a JSON Patch document: %w", err)
	}
	for _, op := range ops {
		if op.Path != constraintsPath || (op.Op != "add" && op.Op != "replace") {
			continue
		}
		var constraints []v1.TopologySpreadConstraint
		if err := json.Unmarshal(op.Value, &constraints); err != nil {
			return nil, fmt.Errorf("the value of %s %s: %w", op.Op, op.Path, err)
		}
		if len(constraints) == 0 {
			return nil, fmt.Errorf("it writes no constraint at %s", constraintsPath)
		}
		return constraints, nil
	}
	return nil, fmt.Errorf("it has no add or replace of %s", constraintsPath)
}
