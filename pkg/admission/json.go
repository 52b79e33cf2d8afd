package admission

import (
	"fmt"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
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
		return dec.SkipValue()
	})
}
