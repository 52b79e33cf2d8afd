package server

import (
	"slices"
	"testing"
)

func TestMetricNamesAreWhatTheServerRegisters(t *testing.T) {
	got, err := MetricNames()
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"spreadguard_admission_requests_total", "spreadguard_admission_decision_duration_seconds",
		"spreadguard_workloads", "spreadguard_workload_skew", "spreadguard_policy_ready", "spreadguard_health_errors_total"} {
		if !slices.Contains(got, want) {
			t.Errorf("MetricNames() = %v, want %s among them", got, want)
		}
	}
	if !slices.IsSorted(got) {
		t.Errorf("MetricNames() = %v, not sorted", got)
	}
}
