// Package cache is what spreadguard's webhook keeps of the cluster: the
// table of the kinds it reads (Kinds), informer caches cut down to the
// fields the algorithm reads, and the event handlers that keep a
// spread.Index counting and a ServiceIndex filing Services. The engine's
// lookups over these caches are pkg/lookup's.
//
// The cache is a speed-up, never a source of wrong answers: an object the
// cache has not seen yet (a ReplicaSet created a millisecond before its
// pods) is read from the API server directly.
package cache
