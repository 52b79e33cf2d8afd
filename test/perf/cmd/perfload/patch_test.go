package main

import (
	"encoding/json"
	"encoding/pem"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	admissionv1 "k8s.io/api/admission/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// spreadguardPatch is a patch of the shape spreadguard answers a pod that
// has annotations and no constraints with.
const spreadguardPatch = `[{"op":"add","path":"/spec/topologySpreadConstraints","value":[` +
	`{"maxSkew":1,"topologyKey":"topology.kubernetes.io/zone","whenUnsatisfiable":"DoNotSchedule","labelSelector":{"matchLabels":{"app":"a"}},"nodeTaintsPolicy":"Honor"}]},` +
	`{"op":"add","path":"/metadata/annotations/spreadguard.io~1policy","value":"/default"}]`

func TestPatchConstraints(t *testing.T) {
	honor := v1.NodeInclusionPolicyHonor
	tests := []struct {
		name    string
		patch   string
		want    []v1.TopologySpreadConstraint
		wantErr string
	}{
		{
			name:  "spreadguard's patch writes its constraints, whatever else it adds",
			patch: spreadguardPatch,
			want: []v1.TopologySpreadConstraint{{MaxSkew: 1, TopologyKey: "topology.kubernetes.io/zone", WhenUnsatisfiable: v1.DoNotSchedule,
				LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "a"}}, NodeTaintsPolicy: &honor}},
		},
		{
			name:  "a replace of constraints that were null writes them too",
			patch: `[{"op":"replace","path":"/spec/topologySpreadConstraints","value":[{"maxSkew":2,"topologyKey":"kubernetes.io/hostname","whenUnsatisfiable":"ScheduleAnyway"}]}]`,
			want:  []v1.TopologySpreadConstraint{{MaxSkew: 2, TopologyKey: "kubernetes.io/hostname", WhenUnsatisfiable: v1.ScheduleAnyway}},
		},
		{
			name:    "a patch that only annotates the pod writes no constraints",
			patch:   `[{"op":"add","path":"/metadata/annotations/spreadguard.io~1policy","value":"/default"}]`,
			wantErr: "it has no add or replace of /spec/topologySpreadConstraints",
		},
		{
			name:    "a patch that removes the constraints writes none",
			patch:   `[{"op":"remove","path":"/spec/topologySpreadConstraints"}]`,
			wantErr: "it has no add or replace of /spec/topologySpreadConstraints",
		},
		{
			name:    "an add of an empty list writes no constraint",
			patch:   `[{"op":"add","path":"/spec/topologySpreadConstraints","value":[]}]`,
			wantErr: "it writes no constraint at /spec/topologySpreadConstraints",
		},
		{
			name:    "an AdmissionReview is not a patch",
			patch:   `{"response":{"patch":"W10="}}`,
			wantErr: "not a JSON Patch document",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := patchConstraints([]byte(tt.patch))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("patchConstraints = %v, want an error saying %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("patchConstraints: %v", err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("constraints (-want +got):\n%s", diff)
			}
		})
	}
}

func TestPostReviewThenJSONPatchOf(t *testing.T) {
	jsonPatch := admissionv1.PatchTypeJSONPatch
	tests := []struct {
		name string
		// answer is what the webhook answers the review with; its uid is
		// the review's unless set.
		answer    admissionv1.AdmissionResponse
		status    int
		wantPatch string
		wantErr   string
	}{
		{
			name:      "a webhook that patches the pod gives its patch",
			answer:    admissionv1.AdmissionResponse{Allowed: true, Patch: []byte(spreadguardPatch), PatchType: &jsonPatch},
			wantPatch: spreadguardPatch,
		},
		{
			name:    "a webhook that allows the pod unchanged has no patch to give",
			answer:  admissionv1.AdmissionResponse{Allowed: true},
			wantErr: "it does not patch the pod",
		},
		{
			name:    "a webhook that refuses the pod says why",
			answer:  admissionv1.AdmissionResponse{Allowed: false, Result: &metav1.Status{Message: "no node can take it"}},
			wantErr: "it refuses the pod: no node can take it",
		},
		{
			name:    "a patch of another type than JSONPatch is refused",
			answer:  admissionv1.AdmissionResponse{Allowed: true, Patch: []byte(spreadguardPatch)},
			wantErr: "its patch is not of type JSONPatch",
		},
		{
			name:    "an answer to another review is refused",
			answer:  admissionv1.AdmissionResponse{UID: "other", Allowed: true, Patch: []byte(spreadguardPatch), PatchType: &jsonPatch},
			wantErr: `it answers the review "other", not "perfload-mutate-patch"`,
		},
		{
			name:    "a webhook that fails the request is an error with its status",
			status:  http.StatusInternalServerError,
			wantErr: "500 Internal Server Error: caches not synced",
		},
	}
	raw := []byte(`{"apiVersion":"v1","kind":"Pod","metadata":{"namespace":"ns-1","generateName":"w-1-"}}`)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got admissionv1.AdmissionReview
			srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				body, _ := io.ReadAll(r.Body)
				if err := json.Unmarshal(body, &got); err != nil {
					t.Errorf("the webhook got a body that is not an AdmissionReview: %v", err)
				}
				if tt.status != 0 {
					http.Error(w, "caches not synced", tt.status)
					return
				}
				answer := tt.answer
				if answer.UID == "" {
					answer.UID = got.Request.UID
				}
				_ = json.NewEncoder(w).Encode(admissionv1.AdmissionReview{TypeMeta: got.TypeMeta, Response: &answer})
			}))
			defer srv.Close()

			answer, err := postReview(t.Context(), srv.URL+"/mutate-v1-pod", caFile(t, srv), podCreateReview("ns-1", raw))
			var patch []byte
			if err == nil {
				patch, err = jsonPatchOf(answer)
			}
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error = %v, want one saying %q", err, tt.wantErr)
				}
			} else if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.wantPatch, string(patch)); diff != "" {
				t.Errorf("patch (-want +got):\n%s", diff)
			}
			req := got.Request
			if req == nil || req.Operation != admissionv1.Create || req.Namespace != "ns-1" || req.Kind.Kind != "Pod" || string(req.Object.Raw) != string(raw) {
				t.Errorf("the webhook got the review %+v, want a CREATE of the pod %s in ns-1", req, raw)
			}
		})
	}
}

// caFile writes the certificate of srv, which signs itself, to a PEM file.
func caFile(t *testing.T, srv *httptest.Server) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "ca.crt")
	data := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}
