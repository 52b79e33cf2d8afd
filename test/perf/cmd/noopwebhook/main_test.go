package main

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestAllow(t *testing.T) {
	tests := []struct {
		name         string
		body         string
		wantStatus   int
		wantBody     string
		wantRequests string
	}{
		{
			name:         "a pod review is allowed with its own uid, whatever the pod",
			body:         `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"705ab4f5","operation":"CREATE","object":{"kind":"Pod","spec":{"containers":[{"name":"a"}]}}}}`,
			wantStatus:   http.StatusOK,
			wantBody:     `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","response":{"uid":"705ab4f5","allowed":true}}` + "\n",
			wantRequests: "noopwebhook_admission_requests_total 1",
		},
		{
			name:         "a review without a uid is a bad request and is not counted",
			body:         `{"request":{}}`,
			wantStatus:   http.StatusBadRequest,
			wantBody:     "the body is not an AdmissionReview with a request uid\n",
			wantRequests: "noopwebhook_admission_requests_total 0",
		},
		{
			name:         "a body that is not JSON is a bad request",
			body:         `not json`,
			wantStatus:   http.StatusBadRequest,
			wantBody:     "the body is not an AdmissionReview with a request uid\n",
			wantRequests: "noopwebhook_admission_requests_total 0",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var c counters
			rec := httptest.NewRecorder()
			c.allow(rec, httptest.NewRequest(http.MethodPost, "/validate", strings.NewReader(tt.body)))
			if rec.Code != tt.wantStatus {
				t.Errorf("status = %d, want %d", rec.Code, tt.wantStatus)
			}
			if diff := cmp.Diff(tt.wantBody, rec.Body.String()); diff != "" {
				t.Errorf("body (-want +got):\n%s", diff)
			}
			metrics := httptest.NewRecorder()
			c.metrics(metrics, httptest.NewRequest(http.MethodGet, "/metrics", nil))
			if !strings.Contains(metrics.Body.String(), tt.wantRequests+"\n") {
				t.Errorf("/metrics does not say %q:\n%s", tt.wantRequests, metrics.Body.String())
			}
		})
	}
}
