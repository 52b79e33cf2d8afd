package app

import (
	"errors"
	"fmt"

	"github.com/go-logr/logr"

	"github.com/spreadguard/spreadguard/pkg/controller/leader"
)

// leaseNamespace returns the namespace of the Lease of the leader-only
// controller what names ("the audit", "the deletion cost keeper"). ok is
// false, and logged, for a server run outside a cluster without
// --leader-election-namespace: it leaves that controller to the replicas
// in the cluster rather than compete for another Lease.
func leaseNamespace(cfg *Config, what string, log logr.Logger) (ns string, ok bool, err error) {
	ns, err = leader.Namespace(cfg.LeaderElectionNamespace)
	if errors.Is(err, leader.ErrNoNamespace) {
		log.Info(what + " is off: outside a cluster, it needs --leader-election-namespace")
		return "", false, nil
	}
	if err != nil {
		return "", false, fmt.Errorf("finding the namespace of %s's Lease: %w", what, err)
	}
	return ns, true, nil
}
