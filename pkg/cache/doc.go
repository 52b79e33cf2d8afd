// Package cache is what spreadguard's webhook keeps of the cluster: the
// table of the kinds it reads (InformedKinds), informer caches cut down to the
// fields the algorithm reads, the compact Pod and the ServiceIndex that files
// Services. pkg/state feeds the informers' events to the index and the
// ServiceIndex; the engine's lookups over these caches are pkg/lookup's.
//
// The cache is a speed-up, never a source of wrong answers: an object the
// cache has not seen yet (a ReplicaSet created a millisecond before its
// pods) is read from the API server directly.
package cache
