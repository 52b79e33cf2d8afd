package cache

import (
	"context"
	"errors"
	"fmt"

	toolscache "k8s.io/client-go/tools/cache"
	crcache "sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// AddHandler adds handler to the informer of each type of objs, which
// replays the objects it holds, and returns the function that removes it
// from every one: the lifetime of a controller that a manager starts and
// stops. Should adding it to one fail, it is removed from the others.
func AddHandler(ctx context.Context, informers crcache.Informers, handler toolscache.ResourceEventHandler, objs ...client.Object) (remove func() error, err error) {
	var removes []func() error
	remove = func() error {
		var errs []error
		for _, r := range removes {
			errs = append(errs, r())
		}
		return errors.Join(errs...)
	}
	for _, obj := range objs {
		inf, err := informers.GetInformer(ctx, obj)
		if err != nil {
			return nil, errors.Join(fmt.Errorf("getting the informer for %T: %w", obj, err), remove())
		}
		reg, err := inf.AddEventHandler(handler)
		if err != nil {
			return nil, errors.Join(fmt.Errorf("adding a handler to the %T informer: %w", obj, err), remove())
		}
		removes = append(removes, func() error { return inf.RemoveEventHandler(reg) })
	}
	return remove, nil
}
