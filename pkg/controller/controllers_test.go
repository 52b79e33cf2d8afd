package controller

import (
	"context"
	"errors"
	"os"
	"testing"

	"github.com/go-logr/logr"
	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/spreadguard/spreadguard/pkg/config"
)

// listReader answers every List with err and counts the lists.
type listReader struct {
	client.Reader
	err   error
	lists int
}

func (r *listReader) List(context.Context, client.ObjectList, ...client.ListOption) error {
	r.lists++
	return r.err
}

func TestWatchStatus(t *testing.T) {
	key := types.NamespacedName{Namespace: "kube-system", Name: "cluster-autoscaler-status"}
	forbidden := apierrors.NewForbidden(corev1.Resource("configmaps"), key.Name, errors.New("no RBAC"))
	tests := []struct {
		name      string
		key       types.NamespacedName
		listErr   error
		want      bool
		wantLists int
		wantErr   bool
	}{
		{name: "no status configured is not watched, and nothing is listed", key: types.NamespacedName{}, want: false, wantLists: 0},
		{name: "a status that can be listed is watched", key: key, want: true, wantLists: 1},
		{name: "a status the webhook may not list is not watched, without an error", key: key, listErr: forbidden, want: false, wantLists: 1},
		{name: "any other failure to list is an error", key: key, listErr: errors.New("connection refused"), wantLists: 1, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := &listReader{err: tt.listErr}
			got, err := watchStatus(t.Context(), r, tt.key, logr.Discard())
			if (err != nil) != tt.wantErr {
				t.Fatalf("watchStatus() error = %v, want error %v", err, tt.wantErr)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("watchStatus() (-want,+got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.wantLists, r.lists); diff != "" {
				t.Errorf("lists (-want,+got):\n%s", diff)
			}
		})
	}
}

func TestLeaseNamespace(t *testing.T) {
	tests := []struct {
		name       string
		configured string
		wantNS     string
		wantOK     bool
	}{
		{name: "the configured namespace holds the Lease", configured: "spreadguard", wantNS: "spreadguard", wantOK: true},
		// The test does not run in a pod: there is no namespace file.
		{name: "outside a cluster without a namespace the controller is off, without an error", configured: "", wantNS: "", wantOK: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := os.Stat("/var/run/secrets/kubernetes.io/serviceaccount/namespace"); tt.configured == "" && err == nil {
				t.Skip("running in a pod: the pod's own namespace holds the Lease")
			}
			cfg := &config.WebhookConfiguration{LeaderElectionNamespace: tt.configured}
			ns, ok, err := leaseNamespace(cfg, "the audit", logr.Discard())
			if err != nil {
				t.Fatalf("leaseNamespace() error = %v", err)
			}
			if diff := cmp.Diff([2]any{tt.wantNS, tt.wantOK}, [2]any{ns, ok}); diff != "" {
				t.Errorf("leaseNamespace() (-want,+got):\n%s", diff)
			}
		})
	}
}
