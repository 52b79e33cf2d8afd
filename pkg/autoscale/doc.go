// Package autoscale derives the nodes an autoscaler can add, as
// spread.Templates, from three sources: NodeTemplate objects, Karpenter
// NodePools, and the node groups seen on existing nodes. Like pkg/spread it
// is pure: it takes plain inputs (nodes, NodePools, the declared templates)
// and never reads a cluster; the webhook and the kubectl plugin convert
// their objects and call Templates whenever NodePools or node labels
// change. ZoneCapacity says, from the same inputs plus Karpenter's
// NodeClaims and the autoscalers' events of failure, which sources can add
// a node in each zone, which one is trying, and whether every one failed.
package autoscale
