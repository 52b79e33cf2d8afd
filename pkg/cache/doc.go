// Package cache is what spreadguard's webhook keeps of the cluster: informer
// caches cut down to the fields the algorithm reads, the event handlers that
// keep a spread.Index counting, and the lookups (spread.SelectorSources and
// policy.Lister) the engine asks.
//
// The cache is a speed-up, never a source of wrong answers: an object the
// cache has not seen yet (a ReplicaSet created a millisecond before its
// pods) is read from the API server directly.
package cache
