package cache

import (
	"sync"

	v1 "k8s.io/api/core/v1"

	"github.com/spreadguard/spreadguard/pkg/spread"
)

var _ spread.ServiceCandidates = (*ServiceIndex)(nil)

// ServiceIndex finds the Services that may select a pod without visiting
// the other Services of its namespace, so that a pod's default selector
// costs the same in a namespace of 3 Services and of 3,000.
//
// A Service selects a pod when every pair of its selector is among the
// pod's labels; so each Service is filed under one pair of its selector
// (the one with the smallest key), and a pod's candidates are the Services
// filed under one of its own pairs. A Service with an empty selector
// selects every pod and is always a candidate; one with a nil selector
// selects none and is not filed. The candidates are exact for single-pair
// selectors and a superset otherwise: spread.DefaultSelector matches each
// one.
//
// It holds the informer's (transformed, immutable) Services and hands them
// out without copying: their readers must not modify them.
type ServiceIndex struct {
	mu         sync.RWMutex
	namespaces map[string]*namespaceServices
}

type namespaceServices struct {
	filed     map[string]filing // by Service name
	byPair    map[labelPair]map[string]*v1.Service
	selectAll map[string]*v1.Service
}

type labelPair struct{ key, value string }

// filing is where a Service is filed: under pair, or, when all is set,
// among the Services that select every pod. It is what removing an older
// version of the Service needs, whose selector may differ from the new one.
type filing struct {
	pair labelPair
	all  bool
}

// NewServiceIndex returns an empty index.
func NewServiceIndex() *ServiceIndex {
	return &ServiceIndex{namespaces: map[string]*namespaceServices{}}
}

// Set files s, replacing an earlier version of it.
func (x *ServiceIndex) Set(s *v1.Service) {
	if s == nil {
		return
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	x.remove(s.Namespace, s.Name)
	if s.Spec.Selector == nil {
		return
	}
	ns := x.namespaces[s.Namespace]
	if ns == nil {
		ns = &namespaceServices{
			filed:     map[string]filing{},
			byPair:    map[labelPair]map[string]*v1.Service{},
			selectAll: map[string]*v1.Service{},
		}
		x.namespaces[s.Namespace] = ns
	}
	f := filing{all: len(s.Spec.Selector) == 0}
	if f.all {
		ns.selectAll[s.Name] = s
	} else {
		k := minKey(s.Spec.Selector)
		f.pair = labelPair{k, s.Spec.Selector[k]}
		byName := ns.byPair[f.pair]
		if byName == nil {
			byName = map[string]*v1.Service{}
			ns.byPair[f.pair] = byName
		}
		byName[s.Name] = s
	}
	ns.filed[s.Name] = f
}

// Delete forgets s.
func (x *ServiceIndex) Delete(s *v1.Service) {
	if s == nil {
		return
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	x.remove(s.Namespace, s.Name)
}

func (x *ServiceIndex) remove(namespace, name string) {
	ns := x.namespaces[namespace]
	if ns == nil {
		return
	}
	f, ok := ns.filed[name]
	if !ok {
		return
	}
	delete(ns.filed, name)
	if f.all {
		delete(ns.selectAll, name)
	} else if byName := ns.byPair[f.pair]; byName != nil {
		if delete(byName, name); len(byName) == 0 {
			delete(ns.byPair, f.pair)
		}
	}
	if len(ns.filed) == 0 {
		delete(x.namespaces, namespace)
	}
}

// ServicesSelecting is Selecting as spread.ServiceCandidates asks it; it
// never fails.
func (x *ServiceIndex) ServicesSelecting(namespace string, podLabels map[string]string) ([]*v1.Service, error) {
	return x.Selecting(namespace, podLabels), nil
}

// Selecting returns the Services of namespace that may select a pod
// labelled podLabels: every one that does, and possibly others.
func (x *ServiceIndex) Selecting(namespace string, podLabels map[string]string) []*v1.Service {
	x.mu.RLock()
	defer x.mu.RUnlock()
	ns := x.namespaces[namespace]
	if ns == nil {
		return nil
	}
	var out []*v1.Service
	for _, s := range ns.selectAll {
		out = append(out, s)
	}
	for k, v := range podLabels {
		for _, s := range ns.byPair[labelPair{k, v}] {
			out = append(out, s)
		}
	}
	return out
}

func minKey(m map[string]string) string {
	first := true
	var key string
	for k := range m {
		if first || k < key {
			key, first = k, false
		}
	}
	return key
}
