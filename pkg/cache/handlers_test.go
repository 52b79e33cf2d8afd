package cache

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	toolscache "k8s.io/client-go/tools/cache"
	crcache "sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// handlerCount is an informer that counts the handlers added to it and
// not removed.
type handlerCount struct {
	crcache.Informer
	n int
}

func (h *handlerCount) AddEventHandler(toolscache.ResourceEventHandler) (toolscache.ResourceEventHandlerRegistration, error) {
	h.n++
	return nil, nil
}

func (h *handlerCount) RemoveEventHandler(toolscache.ResourceEventHandlerRegistration) error {
	h.n--
	return nil
}

// informersByType has one handlerCount per type, and no informer for a
// Service.
type informersByType struct {
	crcache.Informers
	byType map[string]*handlerCount
}

func (i informersByType) GetInformer(_ context.Context, obj client.Object, _ ...crcache.InformerGetOption) (crcache.Informer, error) {
	if _, ok := obj.(*v1.Service); ok {
		return nil, errors.New("no informer for Services")
	}
	return i.byType[fmt.Sprintf("%T", obj)], nil
}

func TestAddHandlerAddsToEveryInformerOrToNone(t *testing.T) {
	tests := []struct {
		name      string
		objs      []client.Object
		wantErr   bool
		wantAdded map[string]int
	}{
		{name: "nodes and pods -> one handler on each, until removed", objs: []client.Object{&v1.Node{}, &v1.Pod{}},
			wantAdded: map[string]int{"*v1.Node": 1, "*v1.Pod": 1}},
		{name: "nodes, then Services whose informer fails -> an error, and no handler left on the nodes'", objs: []client.Object{&v1.Node{}, &v1.Service{}},
			wantErr: true, wantAdded: map[string]int{"*v1.Node": 0, "*v1.Pod": 0}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			informers := informersByType{byType: map[string]*handlerCount{"*v1.Node": {}, "*v1.Pod": {}}}
			added := func() map[string]int {
				return map[string]int{"*v1.Node": informers.byType["*v1.Node"].n, "*v1.Pod": informers.byType["*v1.Pod"].n}
			}
			remove, err := AddHandler(t.Context(), informers, toolscache.ResourceEventHandlerFuncs{}, tt.objs...)
			if (err != nil) != tt.wantErr {
				t.Fatalf("AddHandler() error = %v, want an error: %v", err, tt.wantErr)
			}
			if diff := cmp.Diff(tt.wantAdded, added()); diff != "" {
				t.Errorf("handlers added (-want +got):\n%s", diff)
			}
			if err != nil {
				return
			}
			if err := remove(); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(map[string]int{"*v1.Node": 0, "*v1.Pod": 0}, added()); diff != "" {
				t.Errorf("handlers left after remove (-want +got):\n%s", diff)
			}
		})
	}
}
