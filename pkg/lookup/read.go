package lookup

import (
	"context"
	"fmt"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/spreadguard/spreadguard/pkg/apis/spreadguard/v1alpha1"
	"github.com/spreadguard/spreadguard/pkg/cache"
)

// Read lists from r what the webhook's informers hold that can matter for a
// pod of namespace: every object of cache.InformedKinds, limited to the namespace
// for the namespaced kinds (spread counts only the pods of the pod's own
// namespace). A cluster without spreadguard's CRDs has no policies and no
// NodeTemplates, and one without Karpenter no NodePools: answers, not
// errors. NewStore takes what it returns. A Named kind is not listed
// (ReadStatusConfigMap reads the one object).
func Read(ctx context.Context, r client.Reader, namespace string) ([]runtime.Object, error) {
	var objs []runtime.Object
	for _, k := range cache.InformedKinds {
		if k.Named {
			continue
		}
		l := k.NewList()
		var opts []client.ListOption
		where := ""
		if k.Namespaced {
			opts = append(opts, client.InNamespace(namespace))
			where = " of namespace " + namespace
		}
		err := r.List(ctx, l, opts...)
		if (k.Optional || k.GVK.Group == v1alpha1.GroupName) && (meta.IsNoMatchError(err) || apierrors.IsNotFound(err)) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("listing the %s%s: %w", k.Resource, where, err)
		}
		items, err := meta.ExtractList(l)
		if err != nil {
			return nil, fmt.Errorf("listing the %s%s: %w", k.Resource, where, err)
		}
		objs = append(objs, items...)
	}
	return objs, nil
}

// ReadStatusConfigMap gets from r cluster-autoscaler's status ConfigMap,
// which key names, for a Store that Derive then reads it from (Read lists
// no ConfigMap): nil when it is not there, or when key is zero.
func ReadStatusConfigMap(ctx context.Context, r client.Reader, key types.NamespacedName) (*v1.ConfigMap, error) {
	if key.Name == "" {
		return nil, nil
	}
	var cm v1.ConfigMap
	err := r.Get(ctx, key, &cm)
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("getting cluster-autoscaler's status ConfigMap %s: %w", key, err)
	}
	return &cm, nil
}
