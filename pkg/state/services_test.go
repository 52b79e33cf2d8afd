package state

import (
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/spreadguard/spreadguard/pkg/cache"
	"github.com/spreadguard/spreadguard/pkg/spread"
)

func service(ns, name string, selector map[string]string) *v1.Service {
	return &v1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: v1.ServiceSpec{Selector: selector}}
}

func names(svcs []*v1.Service) []string {
	out := []string{}
	for _, s := range svcs {
		out = append(out, s.Namespace+"/"+s.Name)
	}
	slices.Sort(out)
	return out
}

func TestClusterFilesServices(t *testing.T) {
	shop := []*v1.Service{
		service("shop", "web", map[string]string{"app": "web"}),
		service("shop", "web-fe", map[string]string{"app": "web", "tier": "fe"}),
		service("shop", "db", map[string]string{"app": "db"}),
		service("shop", "everything", map[string]string{}),
		service("shop", "headless", nil),
		service("other", "web", map[string]string{"app": "web"}),
	}
	tests := []struct {
		name      string
		events    func(c *Cluster)
		namespace string
		podLabels map[string]string
		want      []string
	}{
		{
			name:      "pod app=web,tier=fe in shop -> web, web-fe and the empty selector; not db, not the nil selector, not other/web",
			namespace: "shop", podLabels: map[string]string{"app": "web", "tier": "fe"},
			want: []string{"shop/everything", "shop/web", "shop/web-fe"},
		},
		{
			name:      "pod app=web in shop -> web-fe is a candidate (filed under app=web) though it does not select the pod",
			namespace: "shop", podLabels: map[string]string{"app": "web"},
			want: []string{"shop/everything", "shop/web", "shop/web-fe"},
		},
		{
			name:      "pod without labels in shop -> only the empty selector",
			namespace: "shop",
			want:      []string{"shop/everything"},
		},
		{
			name:      "namespace without Services -> none",
			namespace: "empty", podLabels: map[string]string{"app": "web"},
			want: []string{},
		},
		{
			name: "web's selector changed to app=api -> no longer a candidate for app=web",
			events: func(c *Cluster) {
				c.Update(shop[0], service("shop", "web", map[string]string{"app": "api"}))
			},
			namespace: "shop", podLabels: map[string]string{"app": "web"},
			want: []string{"shop/everything", "shop/web-fe"},
		},
		{
			name: "everything's selector set to nil, web deleted, web-fe deleted through a tombstone -> none",
			events: func(c *Cluster) {
				c.Update(shop[3], service("shop", "everything", nil))
				c.Delete(shop[0])
				c.Delete(toolscache.DeletedFinalStateUnknown{Key: "shop/web-fe", Obj: shop[1]})
			},
			namespace: "shop", podLabels: map[string]string{"app": "web", "tier": "fe"},
			want: []string{},
		},
		{
			name: "a pod and a tombstone without object -> ignored",
			events: func(c *Cluster) {
				c.Add(&v1.Pod{})
				c.Delete(toolscache.DeletedFinalStateUnknown{Key: "shop/web"})
			},
			namespace: "shop", podLabels: map[string]string{"app": "db"},
			want: []string{"shop/db", "shop/everything"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := NewCluster(spread.NewIndex(), cache.NewServiceIndex())
			for _, s := range shop {
				c.Add(s)
			}
			if tt.events != nil {
				tt.events(c)
			}
			if diff := cmp.Diff(tt.want, names(c.Services().Selecting(tt.namespace, tt.podLabels))); diff != "" {
				t.Errorf("candidates (-want +got):\n%s", diff)
			}
		})
	}
}
