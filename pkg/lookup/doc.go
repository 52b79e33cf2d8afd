// Package lookup answers the admission engine's lookups (engine.Sources:
// owners, Services, namespaces, policies) from any client.Reader, so that
// every caller reads a cluster through the same code:
//
//   - the webhook, from its informer cache, with the API server behind it for
//     what the cache has not seen yet;
//   - kubectl-spread check, from a Store decoded from a cluster file
//     (Decode, Load): multi-document YAML, a stream of JSON objects or a v1
//     List of the kinds in cache.InformedKinds, as `kubectl get -o yaml` writes them
//     or as a person writes them by hand;
//   - kubectl-spread explain, from a Store filled by listing a live cluster.
//
// A Store also gives the node and pod view that pkg/spread counts
// (Snapshot).
package lookup
