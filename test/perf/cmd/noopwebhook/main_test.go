package main

import (
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

const podReview = `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"705ab4f5","operation":"CREATE","object":{"kind":"Pod","spec":{"containers":[{"name":"a"}]}}}}`

// patch is a JSON Patch like spreadguard's; "W3sib3AiOi..." below is its base64.
const patch = `[{"op":"add","path":"/spec/topologySpreadConstraints","value":[]}]`

func TestAllow(t *testing.T) {
	tests := []struct {
		name         string
		patch        string
		path         string
		body         string
		wantStatus   int
		wantBody     string
		wantRequests string
	}{
		{
			name:         "a pod review is allowed with its own uid, whatever the pod",
			path:         "/validate-v1-pod",
			body:         podReview,
			wantStatus:   http.StatusOK,
			wantBody:     `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","response":{"uid":"705ab4f5","allowed":true}}` + "\n",
			wantRequests: "noopwebhook_admission_requests_total 1",
		},
		{
			name:         "without a patch the mutating path is allowed without one",
			path:         "/mutate-v1-pod",
			body:         podReview,
			wantStatus:   http.StatusOK,
			wantBody:     `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","response":{"uid":"705ab4f5","allowed":true}}` + "\n",
			wantRequests: "noopwebhook_admission_requests_total 1",
		},
		{
			name:       "with a patch the mutating path is allowed with it, base64, of type JSONPatch",
			patch:      patch,
			path:       "/mutate-v1-pod",
			body:       podReview,
			wantStatus: http.StatusOK,
			wantBody: `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","response":{"uid":"705ab4f5","allowed":true,` +
				`"patch":"W3sib3AiOiJhZGQiLCJwYXRoIjoiL3NwZWMvdG9wb2xvZ3lTcHJlYWRDb25zdHJhaW50cyIsInZhbHVlIjpbXX1d","patchType":"JSONPatch"}}` + "\n",
			wantRequests: "noopwebhook_admission_requests_total 1",
		},
		{
			name:         "with a patch the validating path is still allowed without one",
			patch:        patch,
			path:         "/validate-v1-pod",
			body:         podReview,
			wantStatus:   http.StatusOK,
			wantBody:     `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","response":{"uid":"705ab4f5","allowed":true}}` + "\n",
			wantRequests: "noopwebhook_admission_requests_total 1",
		},
		{
			name:         "a review without a uid is a bad request and is not counted",
			path:         "/mutate-v1-pod",
			body:         `{"request":{}}`,
			wantStatus:   http.StatusBadRequest,
			wantBody:     "the body is not an AdmissionReview with a request uid\n",
			wantRequests: "noopwebhook_admission_requests_total 0",
		},
		{
			name:         "a body that is not JSON is a bad request",
			path:         "/validate-v1-pod",
			body:         `not json`,
			wantStatus:   http.StatusBadRequest,
			wantBody:     "the body is not an AdmissionReview with a request uid\n",
			wantRequests: "noopwebhook_admission_requests_total 0",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := &handler{mutatePath: "/mutate-v1-pod"}
			if tt.patch != "" {
				h.patch = []byte(tt.patch)
			}
			rec := httptest.NewRecorder()
			h.allow(rec, httptest.NewRequest(http.MethodPost, tt.path, strings.NewReader(tt.body)))
			if rec.Code != tt.wantStatus {
				t.Errorf("status = %d, want %d", rec.Code, tt.wantStatus)
			}
			if diff := cmp.Diff(tt.wantBody, rec.Body.String()); diff != "" {
				t.Errorf("body (-want +got):\n%s", diff)
			}
			metrics := httptest.NewRecorder()
			h.metricsMux().ServeHTTP(metrics, httptest.NewRequest(http.MethodGet, "/metrics", nil))
			if !strings.Contains(metrics.Body.String(), tt.wantRequests+"\n") {
				t.Errorf("/metrics does not say %q:\n%s", tt.wantRequests, metrics.Body.String())
			}
		})
	}
}

func TestReadPatch(t *testing.T) {
	tests := []struct {
		name    string
		content string
		wantErr string
	}{
		{name: "a patch of spreadguard's two operations is read as it is", content: `[{"op":"add","path":"/spec/topologySpreadConstraints","value":[]},{"op":"add","path":"/metadata/annotations/spreadguard.io~1policy","value":"p"}]`},
		{name: "an empty patch is refused: it would be the plain no-op", content: `[]`, wantErr: "holds no operation"},
		{name: "an operation without a path is refused", content: `[{"op":"add","value":1}]`, wantErr: "operation 0 has no op or no path"},
		{name: "an AdmissionReview instead of its patch is refused", content: `{"response":{"patch":"W10="}}`, wantErr: "is not a JSON Patch document"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "patch.json")
			if err := os.WriteFile(path, []byte(tt.content), 0o600); err != nil {
				t.Fatal(err)
			}
			got, err := readPatch(path)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("readPatch = %v, want an error saying %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("readPatch: %v", err)
			}
			if diff := cmp.Diff(tt.content, string(got)); diff != "" {
				t.Errorf("patch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestMetricsMuxServesProfiles(t *testing.T) {
	rec := httptest.NewRecorder()
	(&handler{}).metricsMux().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/debug/pprof/", nil))
	if rec.Code != http.StatusOK || !strings.Contains(rec.Body.String(), "profile") {
		t.Errorf("/debug/pprof/ = %d, want 200 with the list of profiles:\n%s", rec.Code, rec.Body.String())
	}
}

func TestMetricsCountCPUAndCollections(t *testing.T) {
	read := func() (cpu, gc float64) {
		t.Helper()
		rec := httptest.NewRecorder()
		(&handler{}).metricsMux().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
		found := map[string]float64{}
		for line := range strings.Lines(rec.Body.String()) {
			f := strings.Fields(line)
			if len(f) == 2 && (f[0] == "process_cpu_seconds_total" || f[0] == "go_gc_duration_seconds_count") {
				v, err := strconv.ParseFloat(f[1], 64)
				if err != nil {
					t.Fatalf("%s: %v", line, err)
				}
				found[f[0]] = v
			}
		}
		if len(found) != 2 {
			t.Fatalf("/metrics lacks the CPU or GC counter:\n%s", rec.Body.String())
		}
		return found["process_cpu_seconds_total"], found["go_gc_duration_seconds_count"]
	}
	cpu0, gc0 := read()
	runtime.GC()
	for deadline := time.Now().Add(50 * time.Millisecond); time.Now().Before(deadline); {
		// Burn some CPU time to count.
	}
	cpu1, gc1 := read()
	if gc1 < gc0+1 {
		t.Errorf("go_gc_duration_seconds_count went from %v to %v across runtime.GC(), want one more at least", gc0, gc1)
	}
	if cpu1 <= cpu0 {
		t.Errorf("process_cpu_seconds_total went from %v to %v across 50 ms of work, want it to grow", cpu0, cpu1)
	}
}
