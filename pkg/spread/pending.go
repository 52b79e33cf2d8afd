package spread

import (
	"errors"

	v1 "k8s.io/api/core/v1"
)

// errNotReady is returned until the feasibility check lands; it keeps the
// package compiling for the code written against api.go meanwhile.
var errNotReady = errors.New("feasibility check not implemented yet")

// Index is the incremental counterpart of Snapshot. It is being written.
type Index struct{}

// NewIndex returns an empty Index.
func NewIndex() *Index { return &Index{} }

// IndexFromSnapshot returns an Index holding s.
func IndexFromSnapshot(s Snapshot) *Index { return &Index{} }

// AddNode records a node.
func (ix *Index) AddNode(n *v1.Node) {}

// UpdateNode records a node change.
func (ix *Index) UpdateNode(old, n *v1.Node) {}

// DeleteNode forgets a node.
func (ix *Index) DeleteNode(n *v1.Node) {}

// AddPod records a pod.
func (ix *Index) AddPod(p *v1.Pod) {}

// UpdatePod records a pod change.
func (ix *Index) UpdatePod(old, p *v1.Pod) {}

// DeletePod forgets a pod.
func (ix *Index) DeletePod(p *v1.Pod) {}

// Check decides feasibility for pod.
func (ix *Index) Check(pod *v1.Pod, opts Options) (*Result, error) { return nil, errNotReady }

// Check decides feasibility for pod.
func (s Snapshot) Check(pod *v1.Pod, opts Options) (*Result, error) { return nil, errNotReady }
