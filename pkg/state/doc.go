// Package state is the webhook's one view of the cluster: what the
// informers hold, what is derived from it, and one ordered stream of the
// changes to both.
//
// A Cluster owns the pod and node counts (spread.Index), the Services by
// the pods they may select (cache.ServiceIndex) and the facts derived
// from the autoscalers (the templates of the nodes one can add, the zones
// a node pool requires that its node class cannot serve). Informers feeds
// it from the informer cache: it is the one place that adds a handler to
// an informer.
//
// Every change, an informer event or newly derived facts, is applied to
// the Cluster first and then handed to each subscriber of its kind, one
// change at a time, in the order the Cluster applied them: what a subscriber reads of
// the Cluster when it hears of a change includes that change. A Change
// says which object changed and which of its parts (Aspect): each rule of
// "did this update change what spreadguard reads" is written once, here,
// and the controllers (the health controller, the template and policy
// watchers, the deletion cost keeper) pick the parts they read.
//
// The model is Karpenter's cluster state (pkg/controllers/state), which
// its informer controllers keep and its provisioner and disruption
// controllers read; here the state also tells its readers what changed.
package state
