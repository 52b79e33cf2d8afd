package admission

import (
	"bytes"
	"fmt"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	admissionv1 "k8s.io/api/admission/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// The webhook decodes every pod created in the cluster, and the decode was
// most of a review's CPU: encoding/json (and sigs.k8s.io/json, its fork that
// the apiserver uses) first scans the whole document to validate it, then
// decodes it by reflection. github.com/go-json-experiment/json (what
// encoding/json/v2 is built from) does both in one pass, and can skip the
// parts of a pod that no decision reads without building them.

// reviewDecodeOptions decode an AdmissionReview as the apiserver's
// sigs.k8s.io/json would: names match case-sensitively, a repeated name
// is not an error (the apiserver would not send one), and invalid UTF-8 is
// replaced rather than refused, as encoding/json does.
//
// A raw object (runtime.RawExtension: the pod, its old version, the
// options) is a slice of the input instead of a copy: the pod is 90% of a
// review's bytes, and copying it was the largest allocation of a review.
// A review decoded so is valid only as long as its input is.
var reviewDecodeOptions = jsonv2.JoinOptions(
	jsontext.AllowDuplicateNames(true),
	jsontext.AllowInvalidUTF8(true),
	jsonv2.WithUnmarshalers(jsonv2.UnmarshalFromFunc(rawInPlace)),
)

// rawInPlace decodes a RawExtension as its UnmarshalJSON does (null leaves
// it empty), keeping the slice of the input the decoder hands out: decoding
// from a []byte, jsontext reads that slice and never writes into it.
func rawInPlace(dec *jsontext.Decoder, re *runtime.RawExtension) error {
	v, err := dec.ReadValue()
	if err != nil {
		return err
	}
	if v.Kind() != 'n' {
		// Capped, so that an append to it cannot write into the rest of
		// the input.
		re.Raw = v[:len(v):len(v)]
	}
	return nil
}

// podDecodeOptions decode a pod for engine.Mutate and engine.Validate, which
// read its metadata and the scheduling fields of its spec (labels, owners,
// annotations, spread constraints, node selector, affinity, tolerations).
// The containers, volumes, managed fields and status, most of a pod's
// bytes, are skipped: only their JSON kind is checked, so a container list
// that is not a list is still refused.
var podDecodeOptions = jsonv2.JoinOptions(
	reviewDecodeOptions,
	jsonv2.WithUnmarshalers(jsonv2.JoinUnmarshalers(
		skip[[]v1.Container]('['),
		skip[[]v1.EphemeralContainer]('['),
		skip[[]v1.Volume]('['),
		skip[[]metav1.ManagedFieldsEntry]('['),
	)),
)

// skip returns an unmarshaler that leaves a T empty, after checking that
// its JSON is null or of the kind want.
func skip[T any](want jsontext.Kind) *jsonv2.Unmarshalers {
	return jsonv2.UnmarshalFromFunc(func(dec *jsontext.Decoder, _ *T) error {
		if k := dec.PeekKind(); k != want && k != 'n' {
			return fmt.Errorf("expected %s or null, found %s", want, k)
		}
		// ReadValue, not SkipValue: SkipValue walks an array or object
		// token by token, ReadValue scans it in one loop, and from an
		// input slice it returns a slice of it without copying.
		_, err := dec.ReadValue()
		return err
	})
}

// The pod endpoints decode a review and its pod in one pass (podReview):
// decoding the review alone scans the pod's bytes to find where the
// object ends, and decoding the pod then parses them a second time; the
// pod is 90% of a review's bytes.

// podReview is an AdmissionReview whose object is decoded as a pod while
// the review is.
type podReview struct {
	metav1.TypeMeta `json:",inline"`
	Request         *podWireRequest `json:"request"`
}

// podWireRequest is an AdmissionRequest whose object is a podObject: its
// "object" member shadows the embedded request's.
type podWireRequest struct {
	admissionv1.AdmissionRequest
	Object podObject `json:"object"`
}

// podObject is a request's object: its bytes (a slice of the input, as
// rawInPlace keeps them), and the pod they encode.
type podObject struct {
	raw []byte
	obj rawObject
}

// UnmarshalJSONFrom decodes the pod with the decoder's options (the
// review is decoded with podDecodeOptions), and keeps the bytes it read:
// the decoder reads from the input slice, so what it had left before and
// after the value delimit them (after the name's colon). As with
// rawInPlace, null changes nothing, and of an object named twice the last
// one counts.
func (o *podObject) UnmarshalJSONFrom(dec *jsontext.Decoder) error {
	before := dec.UnreadBuffer()
	var obj rawObject
	if err := jsonv2.UnmarshalDecode(dec, &obj); err != nil {
		return err
	}
	after := dec.UnreadBuffer()
	raw := bytes.TrimLeft(before[:len(before)-len(after)], " \t\r\n:")
	if !bytes.Equal(raw, []byte("null")) {
		o.raw, o.obj = raw[:len(raw):len(raw)], obj
	}
	return nil
}

// decodeReviewWithPod decodes body as an AdmissionReview of a pod, the
// pod with it, in one pass. ok is false when it cannot, for any reason
// (not JSON, no request, an object that is not a pod's JSON): the caller
// then decodes the review as any other, and the handler says what is
// wrong with the pod. pod is nil when the review's object is absent or
// null.
func decodeReviewWithPod(body []byte) (review *admissionv1.AdmissionReview, pod *rawObject, ok bool) {
	var wire podReview
	if err := jsonv2.Unmarshal(body, &wire, podDecodeOptions); err != nil || wire.Request == nil {
		return nil, nil, false
	}
	req := &wire.Request.AdmissionRequest
	req.Object.Raw = wire.Request.Object.raw
	if req.Object.Raw != nil {
		pod = &wire.Request.Object.obj
	}
	return &admissionv1.AdmissionReview{TypeMeta: wire.TypeMeta, Request: req}, pod, true
}
