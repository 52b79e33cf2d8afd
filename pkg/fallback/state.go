package fallback

import (
	"cmp"
	"slices"
	"time"
)

// Workload is the bookkeeping of one workload's fallback: the domains of
// one topology key its new pods may skip, each since when, and when each
// was last seen able to take pods again. The zero value is a workload with
// no domain in fallback. It is not safe for concurrent use; its owner (the
// leader's controller) serializes the calls.
type Workload struct {
	domains []Domain
}

// Domain is one domain of a workload in fallback.
type Domain struct {
	// Value is the domain: the value of the constraint's topology key.
	Value string
	// Since is when the fallback over it started.
	Since time.Time
	// CapacitySince is when the domain was first seen able to take the
	// workload's pods again, in the run of observations that ends the
	// fallback after the hysteresis; zero while it cannot.
	CapacitySince time.Time
}

// Start outcomes.
const (
	// Started: the domain is now in fallback.
	Started = "Started"
	// AlreadyActive: the domain was in fallback already.
	AlreadyActive = "AlreadyActive"
	// AtMaxDomains: maxDomains domains of the workload are in fallback; the
	// spread stays strict over this one, and its stranded replicas wait.
	AtMaxDomains = "AtMaxDomains"
)

// Start puts domain in fallback at now unless maxDomains of the workload's
// domains are in fallback already: a wider outage keeps the spread strict.
// It returns one of Started, AlreadyActive, AtMaxDomains.
func (w *Workload) Start(domain string, now time.Time, maxDomains int) string {
	if i := w.index(domain); i >= 0 {
		// Stranded again: whatever capacity was seen did not last.
		w.domains[i].CapacitySince = time.Time{}
		return AlreadyActive
	}
	if len(w.domains) >= maxDomains {
		return AtMaxDomains
	}
	w.domains = append(w.domains, Domain{Value: domain, Since: now})
	slices.SortFunc(w.domains, func(a, b Domain) int { return cmp.Compare(a.Value, b.Value) })
	return Started
}

// Observe records whether domain can take the workload's pods at now
// (a Ready, schedulable node there fits them, or an autoscaler added one)
// and ends its fallback once it has been able to for hysteresis without a
// break. It returns true when the fallback over domain ended.
//
//	ends  <=>  capacity at every observation in [CapacitySince, now] and now - CapacitySince >= hysteresis
func (w *Workload) Observe(domain string, capacity bool, now time.Time, hysteresis time.Duration) bool {
	i := w.index(domain)
	if i < 0 {
		return false
	}
	d := &w.domains[i]
	if !capacity {
		d.CapacitySince = time.Time{}
		return false
	}
	if d.CapacitySince.IsZero() {
		d.CapacitySince = now
	}
	if now.Sub(d.CapacitySince) < hysteresis {
		return false
	}
	w.domains = slices.Delete(w.domains, i, i+1)
	return true
}

// Domains returns the domains in fallback, sorted by value. The slice is
// the workload's own: read it, do not keep it across calls.
func (w *Workload) Domains() []Domain { return w.domains }

// Values returns the values of the domains in fallback, sorted.
func (w *Workload) Values() []string {
	out := make([]string, len(w.domains))
	for i, d := range w.domains {
		out[i] = d.Value
	}
	return out
}

// Active says whether any domain is in fallback.
func (w *Workload) Active() bool { return len(w.domains) > 0 }

func (w *Workload) index(domain string) int {
	for i := range w.domains {
		if w.domains[i].Value == domain {
			return i
		}
	}
	return -1
}
