package policy

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

func TestScopeServes(t *testing.T) {
	ns := func(name string, ls map[string]string) *v1.Namespace {
		return &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: ls}}
	}
	env, err := labels.Parse("env=prod")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name  string
		scope Scope
		ns    string
		obj   *v1.Namespace
		want  bool
	}{
		{name: "a namespace neither excluded nor labelled, no selector -> served", scope: Scope{Excluded: []string{"kube-system"}}, ns: "shop", obj: ns("shop", nil), want: true},
		{name: "kube-system, excluded by name -> not served", scope: Scope{Excluded: []string{"kube-system"}}, ns: "kube-system", obj: ns("kube-system", nil)},
		{name: "an excluded namespace whose object is not known -> not served", scope: Scope{Excluded: []string{"batch"}}, ns: "batch"},
		{name: "labelled spreadguard.io/ignore=true -> not served", ns: "shop", obj: ns("shop", map[string]string{"spreadguard.io/ignore": "true"})},
		{name: "labelled spreadguard.io/ignore=false -> served", ns: "shop", obj: ns("shop", map[string]string{"spreadguard.io/ignore": "false"}), want: true},
		{name: "the namespaceSelector env=prod, a namespace labelled env=prod -> served", scope: Scope{Selector: env}, ns: "shop", obj: ns("shop", map[string]string{"env": "prod"}), want: true},
		{name: "the namespaceSelector env=prod, a namespace labelled env=dev -> not served", scope: Scope{Selector: env}, ns: "shop", obj: ns("shop", map[string]string{"env": "dev"})},
		{name: "the namespaceSelector env=prod, the namespace's object not known -> judged by name only: served", scope: Scope{Selector: env}, ns: "shop", want: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.scope.Serves(tt.ns, tt.obj); got != tt.want {
				t.Errorf("Serves(%q) = %v, want %v", tt.ns, got, tt.want)
			}
		})
	}
}
