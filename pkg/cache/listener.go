package cache

// Listener hears of the pod and node changes the cluster state
// (pkg/state's Cluster.Listen) has applied, in the order it applied them,
// so that what it reads of the index then includes the change. Its
// methods run on the informers' goroutines and must return at once: a
// slow listener delays every later change.
type Listener interface {
	// PodChanged follows a pod change: old is nil for an add, new nil for
	// a delete.
	PodChanged(old, new *Pod)
	// NodesChanged follows a node change; most (status heartbeats) change
	// nothing the index counts (spread.Index.NodeGeneration tells).
	NodesChanged()
}
