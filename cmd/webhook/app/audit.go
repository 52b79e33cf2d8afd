package app

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"strings"
	"time"

	"github.com/go-logr/logr"
	"golang.org/x/time/rate"
	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	crcache "sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/spreadguard/spreadguard/pkg/apis/spreadguard/v1alpha1"
	"github.com/spreadguard/spreadguard/pkg/autoscale"
	"github.com/spreadguard/spreadguard/pkg/cache"
	"github.com/spreadguard/spreadguard/pkg/engine"
	"github.com/spreadguard/spreadguard/pkg/health"
	"github.com/spreadguard/spreadguard/pkg/policy"
	"github.com/spreadguard/spreadguard/pkg/spread"
)

// LeaderElectionID names the Lease the replicas compete for: every replica
// serves admission requests, the holder alone audits and writes status.
const LeaderElectionID = "spreadguard-audit"

// The audit's timing. A pod event starts a pass after the configuration's
// auditCoalesceDelay, so that a rollout of a hundred pods costs one pass,
// not a hundred; a full pass runs every fullPassPeriod whatever happens,
// and re-reads which constraints the pods carry.
const (
	defaultFullPassPeriod = 5 * time.Minute
	// statusWritesPerSecond bounds the leader's writes (status patches and
	// Reports), so that a pass over thousands of policies and namespaces
	// does not crowd the API server.
	statusWritesPerSecond = 10
)

// inClusterNamespaceFile is where a pod reads its own namespace: the
// audit's Lease's when none is configured.
const inClusterNamespaceFile = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"

// auditOn reports whether this replica takes part in the audit: asked to,
// and with a namespace for the Lease, configured or its own. A server run
// outside a cluster without --leader-election-namespace leaves the audit
// to the replicas in the cluster rather than compete for another Lease.
func auditOn(cfg *Config, log logr.Logger) bool {
	if !cfg.Audit || cfg.LeaderElectionNamespace != "" {
		return cfg.Audit
	}
	if _, err := os.Stat(inClusterNamespaceFile); err != nil {
		log.Info("the audit is off: outside a cluster, it needs --leader-election-namespace")
		return false
	}
	return true
}

// AuditPass is what one audit pass did, for WithAuditObserver.
type AuditPass struct {
	// Workloads is the number of workloads audited.
	Workloads int
	// Writes names the policies whose status the pass patched.
	Writes []string
	// Reports names the namespaces whose Report the pass wrote or deleted.
	Reports []string
}

// WithAuditObserver calls observe after every audit pass of this replica.
func WithAuditObserver(observe func(AuditPass)) Option {
	return func(o *options) { o.auditObserver = observe }
}

// WithAuditPeriods sets how often a full pass runs and how long pod events
// are gathered before a pass, so that a test need not wait minutes.
func WithAuditPeriods(fullPass, coalesce time.Duration) Option {
	return func(o *options) { o.auditFullPass, o.auditCoalesce = fullPass, coalesce }
}

// auditController runs the audit (pkg/health) on the leader and writes what
// it finds into the status of the policies and, when the API server serves
// them, into openreports Reports (reports.go). It counts from the index the
// webhook keeps, and reads policies, Services and the workloads' owners
// (whose transforms keep what places their pods) from the webhook's cache.
type auditController struct {
	log        logr.Logger
	leaseNS    string
	restConfig *rest.Config
	// cache is the webhook's informer cache; client reads through it and
	// writes to the API server; live reads past it.
	cache  crcache.Cache
	client client.Client
	live   client.Reader
	ix     *spread.Index
	src    engine.Sources
	cfg    engine.Config
	synced func() bool

	fullPass, coalesce time.Duration
	writes             *rate.Limiter
	observe            func(AuditPass)
	trigger            chan struct{}
	// carried is what one pod of a workload whose template declares no
	// constraint carries (nil: none), by its owner; emptied by every full
	// pass.
	carried map[carriedKey][]v1.TopologySpreadConstraint
	reports *reportWriter
	metrics *auditMetrics
}

type carriedKey struct{ namespace, kind, name string }

var _ manager.LeaderElectionRunnable = (*auditController)(nil)

// The audit's Lease timing: client-go's and controller-runtime's defaults.
const (
	leaseDuration = 15 * time.Second
	renewDeadline = 10 * time.Second
	retryPeriod   = 2 * time.Second
)

// addAudit adds the audit controller to mgr; its Lease is in leaseNS, or
// the pod's own namespace when leaseNS is empty. A pass follows a change
// after coalesce.
func addAudit(mgr manager.Manager, o *options, leaseNS string, coalesce time.Duration, ix *spread.Index, src engine.Sources, cfg engine.Config, synced func() bool, log logr.Logger) error {
	if leaseNS == "" {
		data, err := os.ReadFile(inClusterNamespaceFile)
		if err != nil {
			return fmt.Errorf("finding the namespace of the audit's Lease: %w", err)
		}
		leaseNS = strings.TrimSpace(string(data))
	}
	c := &auditController{
		leaseNS: leaseNS,
		log:     log, restConfig: mgr.GetConfig(),
		cache: mgr.GetCache(), client: mgr.GetClient(), live: mgr.GetAPIReader(),
		ix: ix, src: src, cfg: cfg, synced: synced,
		fullPass: defaultFullPassPeriod, coalesce: coalesce,
		writes:  rate.NewLimiter(statusWritesPerSecond, statusWritesPerSecond),
		observe: o.auditObserver,
		trigger: make(chan struct{}, 1),
		carried: map[carriedKey][]v1.TopologySpreadConstraint{},
		reports: &reportWriter{client: mgr.GetClient(), mapper: mgr.GetRESTMapper()},
	}
	if o.auditFullPass > 0 {
		c.fullPass, c.coalesce = o.auditFullPass, o.auditCoalesce
	}
	var err error
	if c.metrics, err = newAuditMetrics(o.registry); err != nil {
		return err
	}
	if err := mgr.Add(c); err != nil {
		return fmt.Errorf("adding the audit: %w", err)
	}
	return nil
}

// NeedLeaderElection is false: the manager runs the audit on every
// replica, and the audit elects its leader itself. The manager's own
// election would stop the whole process, admission included, when the
// Lease cannot be renewed (an API server restarting): losing the Lease must
// stop the audit, never admission.
func (c *auditController) NeedLeaderElection() bool { return false }

// Start competes for the Lease until ctx is done, and audits while it
// holds it.
func (c *auditController) Start(ctx context.Context) error {
	host, err := os.Hostname()
	if err != nil {
		return fmt.Errorf("naming this replica for the audit's Lease: %w", err)
	}
	lock, err := resourcelock.NewFromKubeconfig(resourcelock.LeasesResourceLock, c.leaseNS, LeaderElectionID,
		resourcelock.ResourceLockConfig{Identity: host + "_" + string(uuid.NewUUID())}, c.restConfig, renewDeadline)
	if err != nil {
		return fmt.Errorf("creating the audit's Lease lock: %w", err)
	}
	for ctx.Err() == nil {
		elector, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
			Lock: lock, Name: LeaderElectionID, ReleaseOnCancel: true,
			LeaseDuration: leaseDuration, RenewDeadline: renewDeadline, RetryPeriod: retryPeriod,
			Callbacks: leaderelection.LeaderCallbacks{
				// The leader keeps the Lease while it fails to audit (its
				// informers cannot start, say): it tries again, rather
				// than hold the Lease doing nothing.
				OnStartedLeading: func(ctx context.Context) {
					for {
						err := c.lead(ctx)
						if err == nil || ctx.Err() != nil {
							return
						}
						c.log.Error(err, "the audit stopped; it starts again in 30s")
						select {
						case <-ctx.Done():
							return
						case <-time.After(30 * time.Second):
						}
					}
				},
				OnStoppedLeading: func() { c.log.Info("not leading: the audit waits for the Lease") },
			},
		})
		if err != nil {
			return fmt.Errorf("creating the audit's leader election: %w", err)
		}
		elector.Run(ctx) // returns once leadership is lost, or ctx is done
	}
	return nil
}

// lead runs passes until ctx is done (the Lease is lost, or the server
// stops): one at once, one after each burst of changes, one every full
// pass period.
func (c *auditController) lead(ctx context.Context) error {
	c.log.Info("leading: auditing the workloads the policies select")
	// Another replica may have led in between: nothing known is kept, and
	// a replica that no longer leads exports no gauges of the audit.
	c.reports.written = nil
	defer func() {
		c.metrics.set(nil)
		c.metrics.setReady(nil)
	}()
	for !c.synced() {
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(time.Second):
		}
	}
	// Pods, nodes, owners and policies changing can all change a count or
	// a condition.
	for _, inf := range []struct {
		cache crcache.Cache
		obj   client.Object
	}{
		{c.cache, &v1.Pod{}}, {c.cache, &v1.Node{}},
		{c.cache, &v1alpha1.SpreadPolicy{}}, {c.cache, &v1alpha1.ClusterSpreadPolicy{}},
		{c.cache, &appsv1.ReplicaSet{}}, {c.cache, &appsv1.StatefulSet{}}, {c.cache, &v1.ReplicationController{}},
	} {
		i, err := inf.cache.GetInformer(ctx, inf.obj)
		if err != nil {
			return fmt.Errorf("getting the informer for %T: %w", inf.obj, err)
		}
		reg, err := i.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
			AddFunc: func(any) { c.poke() },
			UpdateFunc: func(old, obj any) {
				if mayChangeTheAudit(old, obj) {
					c.poke()
				}
			},
			DeleteFunc: func(any) { c.poke() },
		})
		if err != nil {
			return fmt.Errorf("watching %T for the audit: %w", inf.obj, err)
		}
		defer func() { _ = i.RemoveEventHandler(reg) }()
	}

	full := time.NewTicker(c.fullPass)
	defer full.Stop()
	c.pass(ctx, true)
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-full.C:
			c.pass(ctx, true)
		case <-c.trigger:
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(c.coalesce):
			}
			// The events of the delay are in this pass.
			select {
			case <-c.trigger:
			default:
			}
			c.pass(ctx, false)
		}
	}
}

// mayChangeTheAudit reports whether an update may change what a pass
// finds. Most updates cannot: a pod's status conditions, a node's
// heartbeat, a policy's status (the audit's own write); passing over them
// keeps a quiet cluster from being audited every few seconds.
func mayChangeTheAudit(old, obj any) bool {
	switch o := old.(type) {
	case *cache.Pod:
		n, ok := obj.(*cache.Pod)
		return !ok || o.Record() != n.Record()
	case *v1.Node:
		n, ok := obj.(*v1.Node)
		return !ok || o.Spec.Unschedulable != n.Spec.Unschedulable || !maps.Equal(o.Labels, n.Labels) ||
			!equality.Semantic.DeepEqual(o.Spec.Taints, n.Spec.Taints)
	case *v1alpha1.SpreadPolicy:
		n, ok := obj.(*v1alpha1.SpreadPolicy)
		return !ok || o.Generation != n.Generation
	case *v1alpha1.ClusterSpreadPolicy:
		n, ok := obj.(*v1alpha1.ClusterSpreadPolicy)
		return !ok || o.Generation != n.Generation
	}
	return true
}

// poke asks for a pass; requests made while one is pending are one.
func (c *auditController) poke() {
	select {
	case c.trigger <- struct{}{}:
	default:
	}
}

func (c *auditController) pass(ctx context.Context, full bool) {
	if full {
		clear(c.carried)
	}
	report := AuditPass{}
	if err := c.run(ctx, &report); err != nil && ctx.Err() == nil {
		c.log.Error(err, "audit pass failed")
	}
	if c.observe != nil {
		c.observe(report)
	}
}

func (c *auditController) run(ctx context.Context, report *AuditPass) error {
	var o health.Owners
	var (
		replicaSets  appsv1.ReplicaSetList
		statefulSets appsv1.StatefulSetList
		rcs          v1.ReplicationControllerList
		services     v1.ServiceList
	)
	for _, list := range []client.ObjectList{&replicaSets, &statefulSets, &rcs, &services} {
		if err := c.cache.List(ctx, list); err != nil {
			return fmt.Errorf("listing %T: %w", list, err)
		}
	}
	o.ReplicaSets = pointers(replicaSets.Items)
	o.StatefulSets = pointers(statefulSets.Items)
	o.ReplicationControllers = pointers(rcs.Items)
	o.Services = pointers(services.Items)

	ws := health.Workloads(o, c.ix)
	for i := range ws {
		if len(ws[i].Pod.Spec.TopologySpreadConstraints) > 0 {
			continue
		}
		carried, err := c.carriedBy(ctx, &ws[i])
		if err != nil {
			return err
		}
		if len(carried) > 0 {
			ws[i] = ws[i].Carrying(carried)
		}
	}
	results, err := health.Run(c.ix, c.src, c.cfg, ws)
	if err != nil {
		return err
	}
	report.Workloads = len(results)
	c.metrics.set(results)
	reports := health.Reports(results, c.cfg.MessageDetail)
	if err := c.writeStatus(ctx, health.Tally(results), reports, report); err != nil {
		return err
	}
	return c.reports.write(ctx, reports, c.writes.Wait, report)
}

// carriedBy returns the constraints the pods of w carry (health.Carried),
// reading one of them from the API server: the webhook's cache keeps none
// of a pod's spec.
func (c *auditController) carriedBy(ctx context.Context, w *health.Workload) ([]v1.TopologySpreadConstraint, error) {
	key := carriedKey{w.Namespace, w.Kind, w.Name}
	if len(w.Pod.OwnerReferences) > 0 {
		// A Deployment's revisions differ: key by the ReplicaSet.
		key.kind, key.name = w.Pod.OwnerReferences[0].Kind, w.Pod.OwnerReferences[0].Name
	}
	if cs, ok := c.carried[key]; ok {
		return cs, nil
	}
	var pods v1.PodList
	// A Service's pods may be mixed with controllers' pods: look past a few.
	limit := int64(1)
	if w.Kind == health.KindService {
		limit = 20
	}
	if err := c.live.List(ctx, &pods, client.InNamespace(w.Namespace), client.MatchingLabelsSelector{Selector: w.Selector}, client.Limit(limit)); err != nil {
		return nil, fmt.Errorf("reading a pod of %s %s/%s: %w", w.Kind, w.Namespace, w.Name, err)
	}
	cs := health.Carried(w, pointers(pods.Items))
	c.carried[key] = cs
	return cs, nil
}

// writeStatus patches the status of each policy whose status the tally
// and the reach of its constraints change, and adds the results of the
// constraints out of reach to reports.
func (c *auditController) writeStatus(ctx context.Context, tally map[health.PolicyKey]health.Counts, reports map[string]*health.Report, report *AuditPass) error {
	namespaces := c.ix.Namespaces()
	var conds []policyCondition
	defer func() { c.metrics.setReady(conds) }()
	// Read only, labels alone: the cache's objects, not copies of 5,000
	// nodes per pass.
	var nodes v1.NodeList
	if err := c.cache.List(ctx, &nodes, client.UnsafeDisableDeepCopy); err != nil {
		return fmt.Errorf("listing the nodes: %w", err)
	}
	reach := reachInputs{nodes: pointers(nodes.Items), templates: c.ix.Templates(), reports: reports}
	var sps v1alpha1.SpreadPolicyList
	if err := c.client.List(ctx, &sps); err != nil {
		return fmt.Errorf("listing SpreadPolicies: %w", err)
	}
	for i := range sps.Items {
		p := &sps.Items[i]
		counts := tally[health.PolicyKey{Kind: v1alpha1.KindSpreadPolicy, Name: p.Namespace + "/" + p.Name}]
		ready := health.Ready(&p.Spec, policy.ValidateSpreadPolicy(p), []string{p.Namespace}, counts, c.ix)
		ready = c.reach(ready, &p.Spec, p.Namespace+"/"+p.Name, policyRef(v1alpha1.KindSpreadPolicy, p.Namespace, p.Name), []string{p.Namespace}, reach)
		conds = append(conds, policyCondition{v1alpha1.KindSpreadPolicy, p.Namespace, p.Name, ready})
		if err := c.patchStatus(ctx, p, &p.Status, p.Generation, ready, counts, report); err != nil {
			return err
		}
	}
	var csps v1alpha1.ClusterSpreadPolicyList
	if err := c.client.List(ctx, &csps); err != nil {
		return fmt.Errorf("listing ClusterSpreadPolicies: %w", err)
	}
	for i := range csps.Items {
		p := &csps.Items[i]
		scope, err := health.ClusterScope(p, namespaces, c.src)
		if err != nil {
			return fmt.Errorf("ClusterSpreadPolicy %s: %w", p.Name, err)
		}
		counts := tally[health.PolicyKey{Kind: v1alpha1.KindClusterSpreadPolicy, Name: p.Name}]
		ready := health.Ready(&p.Spec.PolicySpec, policy.ValidateClusterSpreadPolicy(p), scope, counts, c.ix)
		ready = c.reach(ready, &p.Spec.PolicySpec, p.Name, policyRef(v1alpha1.KindClusterSpreadPolicy, "", p.Name), scope, reach)
		conds = append(conds, policyCondition{v1alpha1.KindClusterSpreadPolicy, "", p.Name, ready})
		if err := c.patchStatus(ctx, p, &p.Status, p.Generation, ready, counts, report); err != nil {
			return err
		}
	}
	return nil
}

// reachInputs are what reach reads, the same for every policy of a pass.
type reachInputs struct {
	nodes     []*v1.Node
	templates []spread.Template
	reports   map[string]*health.Report
}

// reach returns ready as health.Reach words the constraints of spec that
// the nodes and the templates cannot reach, and adds their results to the
// Reports of namespaces, the policy's scope, that have one: a namespace
// without an audited workload has no pod Pending for it.
func (c *auditController) reach(ready metav1.Condition, spec *v1alpha1.PolicySpec, name string, ref v1.ObjectReference, namespaces []string, in reachInputs) metav1.Condition {
	out := autoscale.ConstraintsOutOfReach(spec.Constraints, in.nodes, in.templates)
	ready, results := health.Reach(ready, name, ref, out, c.cfg.MessageDetail)
	for _, ns := range namespaces {
		if rep := in.reports[ns]; rep != nil && len(results) > 0 {
			rep.Results = append(rep.Results, results...)
			rep.Summary.Fail += len(results)
		}
	}
	return ready
}

func policyRef(kind, namespace, name string) v1.ObjectReference {
	return v1.ObjectReference{APIVersion: v1alpha1.GroupVersion.String(), Kind: kind, Namespace: namespace, Name: name}
}

// patchStatus patches obj's status (st, a field of obj, which the cache
// shares: neither is modified) when it changes.
func (c *auditController) patchStatus(ctx context.Context, obj client.Object, st *v1alpha1.PolicyStatus, generation int64,
	ready metav1.Condition, counts health.Counts, report *AuditPass) error {
	next := st.DeepCopy()
	if !health.SetStatus(next, generation, ready, counts) {
		return nil
	}
	// The whole status, as a merge patch: a diff against the cached object
	// would leave out the counts that are 0 in both, and a count the API
	// server never stored shows as an empty column.
	data, err := json.Marshal(map[string]any{"status": next})
	if err != nil {
		return fmt.Errorf("encoding the status of %s: %w", client.ObjectKeyFromObject(obj), err)
	}
	patched := obj.DeepCopyObject().(client.Object)
	if err := c.writes.Wait(ctx); err != nil {
		return err
	}
	if err := c.client.Status().Patch(ctx, patched, client.RawPatch(types.MergePatchType, data)); err != nil {
		return fmt.Errorf("patching the status of %T %s: %w", obj, client.ObjectKeyFromObject(obj), err)
	}
	report.Writes = append(report.Writes, client.ObjectKeyFromObject(obj).String())
	return nil
}

func pointers[T any](items []T) []*T {
	out := make([]*T, len(items))
	for i := range items {
		out[i] = &items[i]
	}
	return out
}
