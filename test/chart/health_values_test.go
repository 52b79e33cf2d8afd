package chart_test

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

const oldAuditWarning = "WARNING: audit.enabled is deprecated"

// TestHealthValueAndItsOldName checks health.enabled and audit.enabled, its
// old name, which the chart reads until the next minor version: each turns
// spread health on or off in the server's configuration and in the RBAC of
// its writes, and the notes warn only when the old name is set.
func TestHealthValueAndItsOldName(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name        string
		vals        string
		wantHealth  bool
		wantWarning string
	}{
		{name: "neither name set -> spread health on, no warning", vals: "", wantHealth: true},
		{name: "health.enabled false -> spread health off, no warning", vals: "health: {enabled: false}", wantHealth: false},
		{name: "health.enabled true -> spread health on, no warning", vals: "health: {enabled: true}", wantHealth: true},
		{
			name: "the old audit.enabled false -> spread health off, the notes warn and say it is off",
			vals: "audit: {enabled: false}", wantHealth: false,
			wantWarning: oldAuditWarning + " and is read until the next minor version only: set health.enabled instead (spread health is off).",
		},
		{
			name: "the old audit.enabled true -> spread health on, the notes warn",
			vals: "audit: {enabled: true}", wantHealth: true,
			wantWarning: oldAuditWarning + " and is read until the next minor version only: set health.enabled instead.",
		},
		{
			name: "health.enabled false beside the old audit.enabled true -> the new name wins, the notes warn",
			vals: "health: {enabled: false}\naudit: {enabled: true}", wantHealth: false,
			wantWarning: oldAuditWarning + " and is read until the next minor version only: set health.enabled instead (spread health is off).",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r := render(t, valuesYAML(t, tt.vals))
			if got := serverConfig(t, r)["health"]; got != tt.wantHealth {
				t.Errorf("config.yaml health = %v, want %v", got, tt.wantHealth)
			}
			if _, ok := serverConfig(t, r)["audit"]; ok {
				t.Errorf("config.yaml sets the old key audit, want health only")
			}
			statusWrite := false
			for _, rule := range find[*clusterRole](t, r.objects, fullname).Rules {
				if containsAll(rule.Resources, "spreadpolicies/status") && containsAll(rule.Verbs, "patch") {
					statusWrite = true
				}
			}
			if statusWrite != tt.wantHealth {
				t.Errorf("ClusterRole may patch spreadpolicies/status = %v, want %v (spread health on)", statusWrite, tt.wantHealth)
			}
			var gotWarning string
			for line := range strings.Lines(r.notes) {
				if strings.HasPrefix(line, "WARNING: audit.enabled") {
					gotWarning = strings.TrimSpace(line)
				}
			}
			if diff := cmp.Diff(tt.wantWarning, gotWarning); diff != "" {
				t.Errorf("NOTES.txt warning (-want +got):\n%s", diff)
			}
		})
	}
}

func containsAll(list []string, want ...string) bool {
	for _, w := range want {
		found := false
		for _, s := range list {
			found = found || s == w
		}
		if !found {
			return false
		}
	}
	return true
}
