// Command perfload fills a cluster with the benchmark cluster of
// test/perf/fixture through the API, and measures bursts of pod creations.
// hack/bench-scale.sh runs it; it is not part of the webhook.
//
//	perfload fill  --nodes 5000 --pods-per-node 30 [--workers 32] [--qps 2000]
//	perfload burst --pods 1000 --parallel 8 [--dry-run] [--tag webhook=noop]
//	               [--metrics-url URL --handshakes-metric NAME] [--expect-constraints PATCH]
//	perfload mutate-patch --webhook-url URL --ca-file CA --out PATCH
//	perfload wait-running [--timeout 30m]
//	perfload sample --tag TAG [--phase P] [--out samples.jsonl] [--process NAME=PID]...
//	               [--metrics NAME=URL]... [--cgroup NAME=DIR]... [--apiserver-watches [--settle]] [--ready-nodes]
//	perfload metric --url URL NAME
//	perfload watches
//	perfload summarize [--samples samples.jsonl] bursts.jsonl
//
// fill creates the namespaces, the ClusterSpreadPolicy, the nodes (managed by
// kwok), one Service and one ReplicationController per workload, and every
// pod already bound to its node, with bounded parallelism and a raised
// client QPS. The pods are owned by ReplicationControllers because the local
// cluster runs no controller for them, while its ReplicaSet controller would
// fight pods created directly. Objects that exist already are left as they
// are, so an interrupted fill can be resumed.
//
// burst creates new replicas of the workloads (spread over the namespaces
// the way the in-process benchmark spreads them) from several clients at
// once and prints one JSON line: count, errors, p50/p90/p99/p99.9/max
// latency of a create call in milliseconds, every latency, the creates per
// second and, with --metrics-url, how many TLS handshakes the webhook under
// test began meanwhile; with --expect-constraints it fails unless every pod
// came back with the topology spread constraints of that JSON Patch.
//
// mutate-patch sends the webhook at --webhook-url the review of burst's
// first pod as the API server would send it to a mutating webhook, and
// writes the JSON Patch of the answer to --out: the patch noopwebhook
// --mutate-patch answers with.
//
// sample reads, at one moment of a run, what the summary reports besides the
// bursts: the CPU time and memory of processes (/proc/PID/stat and status),
// the CFS throttling of their cgroups, counters of their /metrics,
// kube-apiserver's watches, the Ready nodes and the load average, as one
// JSON line. metric prints one counter of a /metrics page, summed over its
// series, for the script's checks; watches prints kube-apiserver's watches
// by resource.
//
// summarize reads burst's lines and prints, per tag, the median of each
// figure over the rounds with its range; then, over all
// rounds pooled, the p50/p99/p99.9 of every tag, what each webhook adds to
// webhook=none, and the ratio of spreadguard's addition to that of
// webhook=noop and of webhook=noop-patch. With --samples it first prints
// the machine and what the samples say (memory, the control plane, the load
// after each round, each replica's share, CPU and throttling), and after
// the bursts the webhook's own decision time.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"os/signal"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/spreadguard/spreadguard/pkg/apis/spreadguard/v1alpha1"
	"github.com/spreadguard/spreadguard/test/perf/fixture"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "perfload:", err)
		os.Exit(1)
	}
}

// options are the flags every command shares.
type options struct {
	kubeconfig  string
	nodes       int
	podsPerNode int
	workers     int
	qps         float64
}

func (o *options) bind(fs *flag.FlagSet) {
	fs.StringVar(&o.kubeconfig, "kubeconfig", os.Getenv("KUBECONFIG"), "kubeconfig of the cluster")
	fs.IntVar(&o.nodes, "nodes", 5000, "nodes of the benchmark cluster (in 3 zones)")
	fs.IntVar(&o.podsPerNode, "pods-per-node", 30, "bound pods per node")
	fs.IntVar(&o.workers, "workers", 32, "requests in flight at once")
	fs.Float64Var(&o.qps, "qps", 2000, "client-side rate limit, requests per second")
}

func (o *options) cluster() (fixture.Cluster, error) {
	c := fixture.New(o.nodes)
	c.PodsPerNode = o.podsPerNode
	c.Owner = fixture.OwnerReplicationController
	switch {
	case o.nodes < 1:
		return c, fmt.Errorf("--nodes %d: at least 1", o.nodes)
	case o.podsPerNode < 1 || o.nodes*o.podsPerNode%c.Replicas != 0:
		return c, fmt.Errorf("--nodes %d --pods-per-node %d: the pods must make whole workloads of %d replicas",
			o.nodes, o.podsPerNode, c.Replicas)
	}
	return c, nil
}

func (o *options) client() (client.Client, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", o.kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("loading --kubeconfig %q: %w", o.kubeconfig, err)
	}
	cfg.QPS = float32(o.qps)
	cfg.Burst = int(o.qps)
	return newClient(cfg)
}

// connect returns the benchmark cluster of the flags and a client of the
// cluster under test.
func (o *options) connect() (fixture.Cluster, client.Client, error) {
	c, err := o.cluster()
	if err != nil {
		return c, nil, err
	}
	cl, err := o.client()
	return c, cl, err
}

func newClient(cfg *rest.Config) (client.Client, error) {
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return nil, err
	}
	if err := v1alpha1.AddToScheme(scheme); err != nil {
		return nil, err
	}
	return client.New(cfg, client.Options{Scheme: scheme})
}

func run(ctx context.Context, args []string) error {
	if len(args) == 0 {
		return errors.New("usage: perfload fill|burst|mutate-patch|wait-running|sample|metric|watches|summarize [flags]")
	}
	var o options
	fs := flag.NewFlagSet("perfload "+args[0], flag.ContinueOnError)
	o.bind(fs)
	switch args[0] {
	case "fill":
		podSize := fs.String("pod-size", podSizeFull, `"full" (about 9 KiB of JSON, as real pods are) or "lean" (what the scheduler and spreadguard read)`)
		if err := fs.Parse(args[1:]); err != nil {
			return err
		}
		if *podSize != podSizeFull && *podSize != podSizeLean {
			return fmt.Errorf("--pod-size %q: want %q or %q", *podSize, podSizeFull, podSizeLean)
		}
		return fill(ctx, &o, *podSize == podSizeLean)
	case "burst":
		var b burstOptions
		fs.IntVar(&b.pods, "pods", 1000, "pods to create")
		fs.IntVar(&b.parallel, "parallel", 8, "clients creating at once")
		fs.Float64Var(&b.rate, "rate", 0, "creates started per second, each without waiting for the others (an open loop); when set, --parallel is not used")
		fs.BoolVar(&b.dryRun, "dry-run", false, "create with dryRun=All: admitted, not stored")
		fs.StringVar(&b.label, "label", "spreadguard.io/perf-burst=1", "key=value label on every burst pod, to delete them later")
		fs.StringVar(&b.tag, "tag", "", "copied into the result line, to tell runs apart")
		fs.StringVar(&b.expectMutated, "expect-mutated", "", `"all" or "none": fail unless every pod, or none, came back with injected constraints`)
		fs.StringVar(&b.metricsURL, "metrics-url", "", "a webhook's /metrics in the Prometheus text format, read before and after the burst")
		fs.StringVar(&b.handshakesMetric, "handshakes-metric", "", "the counter of TLS handshakes at --metrics-url; its increase is the burst's handshakes")
		fs.StringVar(&b.expectConstraints, "expect-constraints", "", "a JSON Patch file: fail unless every pod came back with the topology spread constraints it adds")
		fs.BoolVar(&b.apiserverCalls, "apiserver-webhook-calls", false, "report kube-apiserver's mean webhook call time, its CPU time and its garbage collections during the burst (its /metrics)")
		if err := fs.Parse(args[1:]); err != nil {
			return err
		}
		if b.rate < 0 || math.IsNaN(b.rate) || math.IsInf(b.rate, 0) {
			return fmt.Errorf("--rate %v: want creates per second, or 0 for --parallel clients", b.rate)
		}
		return burst(ctx, &o, &b)
	case "mutate-patch":
		var m mutatePatchOptions
		fs.StringVar(&m.url, "webhook-url", "", "the mutating webhook's URL (https)")
		fs.StringVar(&m.caFile, "ca-file", "", "PEM file of the CA of the webhook's serving certificate")
		fs.StringVar(&m.out, "out", "", "file to write the answer's JSON Patch to")
		fs.StringVar(&m.label, "label", "spreadguard.io/perf-burst=1", "the label of burst, which the pod carries too")
		if err := fs.Parse(args[1:]); err != nil {
			return err
		}
		return mutatePatch(ctx, &o, &m)
	case "summarize":
		samples := fs.String("samples", "", "the JSON lines of perfload sample taken during the run, whose figures the summary adds")
		if err := fs.Parse(args[1:]); err != nil {
			return err
		}
		if fs.NArg() != 1 {
			return errors.New("usage: perfload summarize [--samples SAMPLES] BURSTS")
		}
		return summarizeRun(os.Stdout, fs.Arg(0), *samples)
	case "sample":
		var s sampleOptions
		s.bind(fs)
		if err := fs.Parse(args[1:]); err != nil {
			return err
		}
		return runSample(ctx, &o, &s)
	case "metric":
		url := fs.String("url", "", "a Prometheus /metrics URL")
		if err := fs.Parse(args[1:]); err != nil {
			return err
		}
		if fs.NArg() != 1 || *url == "" {
			return errors.New("usage: perfload metric --url URL NAME")
		}
		return runMetric(ctx, *url, fs.Arg(0))
	case "watches":
		if err := fs.Parse(args[1:]); err != nil {
			return err
		}
		return runWatches(ctx, &o)
	case "wait-running":
		timeout := fs.Duration("timeout", 30*time.Minute, "how long to wait")
		if err := fs.Parse(args[1:]); err != nil {
			return err
		}
		return waitRunning(ctx, &o, *timeout)
	}
	return fmt.Errorf("unknown command %q (want fill, burst, mutate-patch, wait-running, sample, metric, watches or summarize)", args[0])
}

// forEach runs fn(i) for i in [0, n) from o.workers goroutines, stopping at
// the first error.
func forEach(ctx context.Context, workers, n int, fn func(ctx context.Context, i int) error) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var next atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for ctx.Err() == nil {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				if err := fn(ctx, i); err != nil {
					cancel(err)
					return
				}
			}
		})
	}
	wg.Wait()
	return context.Cause(ctx)
}

// paced runs fn(i) for i in [0, n), starting the i-th at i/rate seconds
// after the first whatever the others' progress, and waits for all of them.
// It is an open loop, as users' creates are: with a fixed number of clients
// a slow answer holds back the next request, so the latency measured at
// saturation is mostly the queue that the clients themselves keep full.
func paced(ctx context.Context, rate float64, n int, fn func(ctx context.Context, i int) error) {
	var wg sync.WaitGroup
	defer wg.Wait()
	start := time.Now()
	timer := time.NewTimer(0)
	defer timer.Stop()
	for i := range n {
		timer.Reset(time.Until(start.Add(time.Duration(float64(i) / rate * float64(time.Second)))))
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
		}
		wg.Go(func() { _ = fn(ctx, i) })
	}
}

// create creates obj, leaving an existing one alone; it returns the stored
// object's uid.
func create(ctx context.Context, c client.Client, obj client.Object) (types.UID, error) {
	err := c.Create(ctx, obj)
	if apierrors.IsAlreadyExists(err) {
		err = c.Get(ctx, client.ObjectKeyFromObject(obj), obj)
	}
	if err != nil {
		return "", fmt.Errorf("creating %T %s: %w", obj, client.ObjectKeyFromObject(obj), err)
	}
	return obj.GetUID(), nil
}

// forCreate clears what the apiserver sets itself.
func forCreate(obj client.Object) client.Object {
	obj.SetUID("")
	obj.SetResourceVersion("")
	obj.SetCreationTimestamp(metav1.Time{})
	obj.SetManagedFields(nil)
	obj.SetGeneration(0)
	return obj
}

// progress prints a line every few seconds while a phase runs.
func progress(what string, total int, done *atomic.Int64) func() {
	start := time.Now()
	stop := make(chan struct{})
	go func() {
		t := time.NewTicker(10 * time.Second)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
				n := done.Load()
				fmt.Fprintf(os.Stderr, "[perfload] %s: %d/%d (%.0f/s)\n", what, n, total, float64(n)/time.Since(start).Seconds())
			}
		}
	}()
	return func() {
		close(stop)
		fmt.Fprintf(os.Stderr, "[perfload] %s: %d in %s\n", what, done.Load(), time.Since(start).Round(time.Second))
	}
}

// The sizes of the pods fill creates.
const (
	podSizeFull = "full"
	podSizeLean = "lean"
)

// leanPod drops what neither the scheduler nor spreadguard reads, nor the
// API server needs to create a pod: annotations, volumes, and of each
// container all but its name, image and resources. 150,000 full-sized pods
// take more memory than 24 GiB hold, in the API server's watch cache and
// the informers of the scheduler, the controller-manager and kwok.
func leanPod(p *v1.Pod) {
	p.Annotations = nil
	p.Spec.Volumes = nil
	p.Spec.InitContainers = nil
	for i, c := range p.Spec.Containers {
		p.Spec.Containers[i] = v1.Container{Name: c.Name, Image: c.Image, Resources: c.Resources,
			TerminationMessagePath: c.TerminationMessagePath, TerminationMessagePolicy: c.TerminationMessagePolicy,
			ImagePullPolicy: c.ImagePullPolicy}
	}
}

// fillPod is replica r of workload w as fill creates it, its owner's UID
// set.
func fillPod(c fixture.Cluster, w, r int, owner types.UID, lean bool) *v1.Pod {
	p := forCreate(c.Pod(w, r)).(*v1.Pod)
	p.GenerateName = ""
	p.OwnerReferences[0].UID = owner
	// The apiserver resets the status of a created pod; kwok writes it
	// again. Priority is resolved by the Priority admission plugin.
	p.Status = v1.PodStatus{}
	p.Spec.Priority, p.Spec.PreemptionPolicy = nil, nil
	if lean {
		leanPod(p)
	}
	return p
}

func fill(ctx context.Context, o *options, lean bool) error {
	c, cl, err := o.connect()
	if err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "[perfload] filling %s: %d workloads of %d replicas\n", c, c.Workloads(), c.Replicas)

	for i, name := range c.NamespaceNames() {
		if _, err := create(ctx, cl, forCreate(fixture.NamespaceObject(name, i))); err != nil {
			return err
		}
	}
	if _, err := create(ctx, cl, forCreate(fixture.Policy())); err != nil {
		return err
	}
	// Pods need their namespace's default ServiceAccount, which the
	// controller-manager creates a moment after the namespace.
	for _, ns := range c.NamespaceNames() {
		if err := waitFor(ctx, time.Minute, func() error {
			return cl.Get(ctx, client.ObjectKey{Namespace: ns, Name: "default"}, &v1.ServiceAccount{})
		}); err != nil {
			return fmt.Errorf("waiting for the default ServiceAccount of %s: %w", ns, err)
		}
	}

	var done atomic.Int64
	end := progress("nodes", c.Nodes, &done)
	err = forEach(ctx, o.workers, c.Nodes, func(ctx context.Context, i int) error {
		n := forCreate(c.Node(i)).(*v1.Node)
		// kwok keeps it Ready and renews its lease, as a kubelet would.
		n.Annotations["kwok.x-k8s.io/node"] = "fake"
		_, err := create(ctx, cl, n)
		done.Add(1)
		return err
	})
	end()
	if err != nil {
		return err
	}

	owners := make([]types.UID, c.Workloads())
	done.Store(0)
	end = progress("services and replication controllers", 2*c.Workloads(), &done)
	err = forEach(ctx, o.workers, c.Workloads(), func(ctx context.Context, w int) error {
		svc := forCreate(c.Service(w)).(*v1.Service)
		svc.Spec.ClusterIP, svc.Spec.ClusterIPs = "", nil
		if _, err := create(ctx, cl, svc); err != nil {
			return err
		}
		uid, err := create(ctx, cl, forCreate(c.ReplicationController(w)))
		owners[w] = uid
		done.Add(2)
		return err
	})
	end()
	if err != nil {
		return err
	}

	done.Store(0)
	end = progress("pods", c.Pods(), &done)
	err = forEach(ctx, o.workers, c.Pods(), func(ctx context.Context, i int) error {
		w, r := i/c.Replicas, i%c.Replicas
		_, err := create(ctx, cl, fillPod(c, w, r, owners[w], lean))
		done.Add(1)
		return err
	})
	end()
	return err
}

// waitRunning waits until no pod of the cluster is still to be marked
// Running by kwok, so that the measurement does not race the status writes.
func waitRunning(ctx context.Context, o *options, timeout time.Duration) error {
	cl, err := o.client()
	if err != nil {
		return err
	}
	start := time.Now()
	return waitFor(ctx, timeout, func() error {
		var pods v1.PodList
		// A field selector on the watch cache: no full list crosses the wire.
		if err := cl.List(ctx, &pods, client.MatchingFields{"status.phase": string(v1.PodPending)}, client.Limit(1)); err != nil {
			return err
		}
		if len(pods.Items) > 0 || pods.Continue != "" {
			fmt.Fprintf(os.Stderr, "[perfload] pods still Pending after %s, e.g. %s/%s\n",
				time.Since(start).Round(time.Second), pods.Items[0].Namespace, pods.Items[0].Name)
			return errors.New("pods are still Pending")
		}
		return nil
	})
}

func waitFor(ctx context.Context, timeout time.Duration, cond func() error) error {
	deadline := time.Now().Add(timeout)
	for {
		err := cond()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("after %s: %w", timeout, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(10 * time.Second):
		}
	}
}

type burstOptions struct {
	pods     int
	parallel int
	// rate, when above 0, paces the creates instead of parallel.
	rate   float64
	dryRun bool
	label  string
	tag    string
	// expectMutated is "all", "none" or "" (no check).
	expectMutated string
	// metricsURL and handshakesMetric name the counter of TLS handshakes of
	// the webhook under test; none when empty.
	metricsURL, handshakesMetric string
	// expectConstraints is a JSON Patch file: every pod must come back with
	// the topology spread constraints it adds. None when empty.
	expectConstraints string
	// apiserverCalls reads kube-apiserver's webhook call durations before and
	// after the burst.
	apiserverCalls bool
}

// burstResult is what burst prints.
type burstResult struct {
	Tag      string `json:"tag,omitempty"`
	Pods     int    `json:"pods"`
	Parallel int    `json:"parallel"`
	// Rate is the creates started per second, for a burst paced by --rate;
	// Parallel is then 0.
	Rate       float64 `json:"ratePerSecond,omitempty"`
	DryRun     bool    `json:"dryRun"`
	Errors     int     `json:"errors"`
	FirstError string  `json:"firstError,omitempty"`
	Mutated    int     `json:"mutated"`
	P50        float64 `json:"p50Ms"`
	P90        float64 `json:"p90Ms"`
	P99        float64 `json:"p99Ms"`
	P999       float64 `json:"p999Ms"`
	Max        float64 `json:"maxMs"`
	PerSecond  float64 `json:"createsPerSecond"`
	// Handshakes is how many TLS handshakes the webhook under test began
	// during the burst: about as many as its connections when the API server
	// keeps them alive, one per review when it does not.
	Handshakes *int64 `json:"handshakes,omitempty"`
	// WebhookCPUSeconds and WebhookGCCycles are the CPU time the webhook
	// under test used and the garbage collections it completed during the
	// burst, when its /metrics has them (metricCPUSeconds, metricGCCycles):
	// the webhook shares the API server's cores, and a collection of a large
	// heap takes one of them for a while.
	WebhookCPUSeconds *float64 `json:"webhookCPUSeconds,omitempty"`
	WebhookGCCycles   *int64   `json:"webhookGCCycles,omitempty"`
	// MutatingCallMs and ValidatingCallMs are the mean time kube-apiserver
	// spent in a call of a mutating and of a validating webhook during the
	// burst, as it measures them
	// (apiserver_admission_webhook_admission_duration_seconds), with
	// --apiserver-webhook-calls: from sending the review to reading the
	// answer, so what a webhook costs apart from the API server's own work.
	MutatingCallMs   *float64 `json:"mutatingCallMs,omitempty"`
	ValidatingCallMs *float64 `json:"validatingCallMs,omitempty"`
	// APIServerGCCycles are the garbage collections kube-apiserver completed
	// during the burst, with --apiserver-webhook-calls: at 1,000 nodes and
	// more its heap is several GiB, and a collection of it takes CPU from
	// every mode's creates alike.
	APIServerGCCycles *int64 `json:"apiserverGCCycles,omitempty"`
	// APIServerCPUSeconds is the CPU time kube-apiserver used during the
	// burst, with --apiserver-webhook-calls.
	APIServerCPUSeconds *float64 `json:"apiserverCPUSeconds,omitempty"`
	// LatenciesMs are every create's latency, in milliseconds, sorted: what
	// summarize pools over the rounds.
	LatenciesMs []float64 `json:"latenciesMs,omitempty"`
}

func burst(ctx context.Context, o *options, b *burstOptions) error {
	key, value, ok := strings.Cut(b.label, "=")
	if !ok {
		return fmt.Errorf("--label %q: want key=value", b.label)
	}
	o.qps = math.Max(o.qps, 10000) // the clients, not a rate limiter, set the pace
	c, cl, err := o.connect()
	if err != nil {
		return err
	}
	var opts []client.CreateOption
	if b.dryRun {
		opts = append(opts, client.DryRunAll)
	}
	// The pods, built before the clock starts.
	pods := make([]*v1.Pod, b.pods)
	if err := forEach(ctx, o.workers, b.pods, func(ctx context.Context, k int) (err error) {
		pods[k], err = burstPod(ctx, cl, c, k, key, value)
		return err
	}); err != nil {
		return err
	}
	var wantConstraints []v1.TopologySpreadConstraint
	if b.expectConstraints != "" {
		patch, err := os.ReadFile(b.expectConstraints)
		if err != nil {
			return err
		}
		if wantConstraints, err = patchConstraints(patch); err != nil {
			return fmt.Errorf("--expect-constraints %s: %w", b.expectConstraints, err)
		}
	}
	var metrics *apiserverMetrics
	var calls *apiserverCalls
	if b.apiserverCalls {
		if metrics, err = o.apiserverMetrics(); err != nil {
			return err
		}
		if calls, err = metrics.readCalls(ctx); err != nil {
			return err
		}
	}
	var before *webhookCounters
	if b.metricsURL != "" {
		if before, err = readWebhookCounters(ctx, b.metricsURL, b.handshakesMetric); err != nil {
			return err
		}
	}
	latencies := make([]time.Duration, b.pods)
	var errs, mutated, otherConstraints atomic.Int64
	var firstErr atomic.Value
	start := time.Now()
	createOne := func(ctx context.Context, k int) error {
		p := pods[k]
		t0 := time.Now()
		err := cl.Create(ctx, p, opts...)
		latencies[k] = time.Since(t0)
		if err != nil {
			errs.Add(1)
			firstErr.CompareAndSwap(nil, err.Error())
			return nil
		}
		if len(p.Spec.TopologySpreadConstraints) > 0 {
			mutated.Add(1)
		}
		if wantConstraints != nil && !equality.Semantic.DeepEqual(p.Spec.TopologySpreadConstraints, wantConstraints) {
			otherConstraints.Add(1)
		}
		return nil
	}
	parallel := b.parallel
	if b.rate > 0 {
		parallel = 0
		paced(ctx, b.rate, b.pods, createOne)
	} else {
		_ = forEach(ctx, b.parallel, b.pods, createOne)
	}
	elapsed := time.Since(start)
	ms := make([]float64, len(latencies))
	for i, l := range latencies {
		// Microseconds are enough, and keep the line short.
		ms[i] = math.Round(float64(l)/float64(time.Microsecond)) / 1000
	}
	slices.Sort(ms)
	res := burstResult{Tag: b.tag, Pods: b.pods, Parallel: parallel, Rate: b.rate, DryRun: b.dryRun, Errors: int(errs.Load()), Mutated: int(mutated.Load()),
		P50: percentile(ms, 0.5), P90: percentile(ms, 0.9), P99: percentile(ms, 0.99), P999: percentile(ms, 0.999), Max: percentile(ms, 1),
		PerSecond: float64(b.pods) / elapsed.Seconds(), LatenciesMs: ms}
	if calls != nil {
		after, err := metrics.readCalls(ctx)
		if err != nil {
			return err
		}
		res.MutatingCallMs, res.ValidatingCallMs = after.meanSince(calls, "admit"), after.meanSince(calls, "validating")
		res.APIServerCPUSeconds, res.APIServerGCCycles = after.process.since(calls.process)
	}
	if before != nil {
		after, err := readWebhookCounters(ctx, b.metricsURL, b.handshakesMetric)
		if err != nil {
			return err
		}
		after.since(before, &res)
	}
	if e, ok := firstErr.Load().(string); ok {
		res.FirstError = e
	}
	if err := json.NewEncoder(os.Stdout).Encode(res); err != nil {
		return err
	}
	switch {
	case res.Errors > 0:
		return fmt.Errorf("%d of %d creates failed; the first: %s", res.Errors, res.Pods, res.FirstError)
	case b.expectMutated == "all" && res.Mutated != res.Pods:
		return fmt.Errorf("only %d of %d pods came back with injected constraints: the webhook was not called for every create", res.Mutated, res.Pods)
	case b.expectMutated == "none" && res.Mutated != 0:
		return fmt.Errorf("%d of %d pods came back with injected constraints: the webhook is still registered", res.Mutated, res.Pods)
	case otherConstraints.Load() > 0:
		return fmt.Errorf("%d of %d pods came back with other topology spread constraints than those of %s: another webhook patched them, or none",
			otherConstraints.Load(), res.Pods, b.expectConstraints)
	}
	return nil
}

// burstPod is the k-th pod of a burst: a new replica of one of the
// workloads, labelled key=value, owned by its ReplicationController (with
// the uid read from the cluster, a controller reference the garbage
// collector accepts).
func burstPod(ctx context.Context, cl client.Client, c fixture.Cluster, k int, key, value string) (*v1.Pod, error) {
	p := c.IncomingPod(k * 7919 % c.Workloads())
	p.Status = v1.PodStatus{}
	p.ManagedFields = nil
	p.Spec.Priority, p.Spec.PreemptionPolicy = nil, nil
	p.Labels[key] = value
	var rc v1.ReplicationController
	if err := cl.Get(ctx, client.ObjectKey{Namespace: p.Namespace, Name: p.OwnerReferences[0].Name}, &rc); err != nil {
		return nil, fmt.Errorf("reading the owner of the burst's pods: %w", err)
	}
	p.OwnerReferences[0].UID = rc.UID
	return p, nil
}

// apiserverCalls are kube-apiserver's sums and counts of webhook call
// durations, by the type label of
// apiserver_admission_webhook_admission_duration_seconds ("admit" for
// mutating webhooks, "validating"), summed over the webhooks' names.
type apiserverCalls struct {
	seconds, calls map[string]float64
	// process are kube-apiserver's CPU and collections.
	process processCounters
}

const webhookCallMetric = "apiserver_admission_webhook_admission_duration_seconds"

// apiserverMetrics reads the /metrics of the kube-apiserver of
// --kubeconfig.
type apiserverMetrics struct {
	client *http.Client
	url    string
}

func (o *options) apiserverMetrics() (*apiserverMetrics, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", o.kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("loading --kubeconfig %q: %w", o.kubeconfig, err)
	}
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return nil, fmt.Errorf("a client of kube-apiserver's /metrics: %w", err)
	}
	return &apiserverMetrics{client: hc, url: strings.TrimSuffix(cfg.Host, "/") + "/metrics"}, nil
}

// text reads kube-apiserver's /metrics.
func (m *apiserverMetrics) text(ctx context.Context) (string, error) {
	text, err := getText(ctx, m.client, m.url)
	if err != nil {
		return "", fmt.Errorf("kube-apiserver's /metrics: %w", err)
	}
	return text, nil
}

// readCalls reads the webhook call durations.
func (m *apiserverMetrics) readCalls(ctx context.Context) (*apiserverCalls, error) {
	text, err := m.text(ctx)
	if err != nil {
		return nil, err
	}
	return parseAPIServerCalls(text)
}

// parseAPIServerCalls reads the _sum and _count samples of
// webhookCallMetric from Prometheus text.
func parseAPIServerCalls(text string) (*apiserverCalls, error) {
	c := &apiserverCalls{seconds: map[string]float64{}, calls: map[string]float64{}}
	err := eachSeries(text, func(s series) {
		into := c.seconds
		switch s.name {
		case webhookCallMetric + "_sum":
		case webhookCallMetric + "_count":
			into = c.calls
		default:
			return
		}
		if typ := label(s.labels, "type"); typ != "" {
			into[typ] += s.value
		}
	})
	if err != nil {
		return nil, err
	}
	c.process = parseProcessCounters(text)
	return c, nil
}

// meanSince is the mean duration, in milliseconds, of the calls of type typ
// made since before; nil when there were none.
func (c *apiserverCalls) meanSince(before *apiserverCalls, typ string) *float64 {
	n := c.calls[typ] - before.calls[typ]
	if n <= 0 {
		return nil
	}
	ms := (c.seconds[typ] - before.seconds[typ]) / n * 1000
	return &ms
}

// A process's counters, as Prometheus' process and Go collectors name them
// (controller-runtime and kube-apiserver register both; noopwebhook prints
// the same names).
const (
	metricCPUSeconds = "process_cpu_seconds_total"
	metricGCCycles   = "go_gc_duration_seconds_count"
)

// processCounters are a process's CPU seconds and completed garbage
// collections, each nil when its /metrics lacks it.
type processCounters struct {
	cpu, gc *float64
}

func parseProcessCounters(text string) processCounters {
	var c processCounters
	if v, err := counterValue(text, metricCPUSeconds); err == nil {
		c.cpu = &v
	}
	if v, err := counterValue(text, metricGCCycles); err == nil {
		c.gc = &v
	}
	return c
}

// since is what the counters grew by since before, each nil unless both
// readings have it.
func (c processCounters) since(before processCounters) (cpuSeconds *float64, gcCycles *int64) {
	if c.cpu != nil && before.cpu != nil {
		cpu := *c.cpu - *before.cpu
		cpuSeconds = &cpu
	}
	if c.gc != nil && before.gc != nil {
		gc := int64(*c.gc - *before.gc)
		gcCycles = &gc
	}
	return cpuSeconds, gcCycles
}

// webhookCounters are the counters of the webhook under test that a burst
// reports the increase of.
type webhookCounters struct {
	handshakes float64
	process    processCounters
}

// readWebhookCounters reads the counter handshakesMetric, which must be
// there, and the process counters, which may not, from the Prometheus text
// at url.
func readWebhookCounters(ctx context.Context, url, handshakesMetric string) (*webhookCounters, error) {
	text, err := getText(ctx, http.DefaultClient, url)
	if err != nil {
		return nil, err
	}
	var c webhookCounters
	if c.handshakes, err = counterValue(text, handshakesMetric); err != nil {
		return nil, fmt.Errorf("reading %s: %w", url, err)
	}
	c.process = parseProcessCounters(text)
	return &c, nil
}

// since records in res what the counters grew by since before.
func (c *webhookCounters) since(before *webhookCounters, res *burstResult) {
	n := int64(c.handshakes - before.handshakes)
	res.Handshakes = &n
	res.WebhookCPUSeconds, res.WebhookGCCycles = c.process.since(before.process)
}

// do sends req with hc and returns the body of the answer, which must be
// 200 OK.
func do(hc *http.Client, req *http.Request) ([]byte, error) {
	resp, err := hc.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s: %s", resp.Status, bytes.TrimSpace(body))
	}
	return body, nil
}

// counterValue finds the sample of name, without labels, in Prometheus text.
func counterValue(text, name string) (float64, error) {
	var v float64
	found := false
	if err := eachSeries(text, func(s series) {
		if s.name == name && s.labels == "" {
			v, found = s.value, true
		}
	}); err != nil {
		return 0, err
	}
	if !found {
		return 0, fmt.Errorf("no sample of %s", name)
	}
	return v, nil
}
