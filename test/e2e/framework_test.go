//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"text/tabwriter"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// framework is one test's namespace and what it needs to explain a failure.
type framework struct {
	t  *testing.T
	ns string
	// started and logOffset bound the webhook logs a failure prints to
	// those written while the test ran.
	started   time.Time
	logOffset int64
}

// newFramework creates the test's namespace, shaped by opts, deleted when
// the test ends after the logs are collected if it failed.
func newFramework(t *testing.T, opts ...func(*v1.Namespace)) *framework {
	t.Helper()
	ns := &v1.Namespace{ObjectMeta: metav1.ObjectMeta{
		GenerateName: "e2e-",
		Labels:       map[string]string{e2eLabel: "true"},
	}}
	for _, o := range opts {
		o(ns)
	}
	if err := k8s.Create(t.Context(), ns); err != nil {
		t.Fatalf("create the test namespace: %v", err)
	}
	f := &framework{t: t, ns: ns.Name, started: time.Now(), logOffset: fileSize(os.Getenv(envWebhookLog))}
	t.Logf("namespace %s", f.ns)
	t.Cleanup(func() {
		// t.Context() is already cancelled when cleanups run.
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if t.Failed() {
			f.collectLogs(ctx)
		}
		if err := k8s.Delete(ctx, ns); err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("delete namespace %s: %v", f.ns, err)
		}
	})
	// The ServiceAccount admission plugin refuses pods until the
	// serviceaccount controller has created the namespace's default account.
	f.eventually(30*time.Second, "the namespace's default ServiceAccount exists", func(ctx context.Context) error {
		return k8s.Get(ctx, client.ObjectKey{Namespace: f.ns, Name: "default"}, &v1.ServiceAccount{})
	})
	return f
}

// eventually calls check every 250ms until it returns nil, and fails the
// test with check's last error when timeout passes first.
func (f *framework) eventually(timeout time.Duration, what string, check func(ctx context.Context) error) {
	f.t.Helper()
	eventually(f.t, timeout, what, check)
}

func eventually(t testing.TB, timeout time.Duration, what string, check func(ctx context.Context) error) {
	t.Helper()
	if err := poll(t.Context(), timeout, check); err != nil {
		t.Fatalf("%s: still not so after %v: %v", what, timeout, err)
	}
}

// poll is eventually without a test, for cleanups.
func poll(ctx context.Context, timeout time.Duration, check func(ctx context.Context) error) error {
	return pollEvery(ctx, 250*time.Millisecond, timeout, check)
}

// pollEvery is poll at another pace, for scenarios that run many checks
// side by side and would otherwise queue behind the client's rate limit.
func pollEvery(ctx context.Context, interval, timeout time.Duration, check func(ctx context.Context) error) error {
	deadline := time.Now().Add(timeout)
	for {
		cctx, cancel := context.WithTimeout(ctx, 15*time.Second)
		err := check(cctx)
		cancel()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (last error: %w)", ctx.Err(), err)
		case <-time.After(interval):
		}
	}
}

// create creates obj in the test's namespace or fails the test.
func (f *framework) create(obj client.Object) {
	f.t.Helper()
	obj.SetNamespace(f.ns)
	if err := k8s.Create(f.t.Context(), obj); err != nil {
		f.t.Fatalf("create %T %s: %v", obj, obj.GetName(), err)
	}
}

// dryRunCreate asks the apiserver, and so the webhooks, to create pod
// without storing it, and returns the pod as it would have been stored.
func (f *framework) dryRunCreate(ctx context.Context, c client.Client, pod *v1.Pod) (*v1.Pod, error) {
	p := pod.DeepCopy()
	p.Namespace = f.ns
	err := c.Create(ctx, p, client.DryRunAll)
	return p, err
}

// boundPods lists the pods selected by sel that the scheduler has bound
// and that are not being deleted.
func (f *framework) boundPods(ctx context.Context, sel labels.Selector) ([]v1.Pod, error) {
	var pods v1.PodList
	if err := k8s.List(ctx, &pods, client.InNamespace(f.ns), client.MatchingLabelsSelector{Selector: sel}); err != nil {
		return nil, fmt.Errorf("list pods: %w", err)
	}
	var out []v1.Pod
	for _, p := range pods.Items {
		if p.Spec.NodeName != "" && p.DeletionTimestamp == nil {
			out = append(out, p)
		}
	}
	return out, nil
}

// zoneCounts counts pods per zone of the node they are bound to, with a 0
// for every zone of the cluster that has none.
func zoneCounts(ctx context.Context, pods []v1.Pod) (map[string]int, error) {
	zoneOf, err := nodeZones(ctx)
	if err != nil {
		return nil, err
	}
	return countByZone(zoneOf, pods)
}

// countByZone is zoneCounts with the nodes' zones given: zoneOf maps a node
// to its zone.
func countByZone(zoneOf map[string]string, pods []v1.Pod) (map[string]int, error) {
	counts := map[string]int{}
	for _, z := range cluster.zones {
		counts[z] = 0
	}
	for _, p := range pods {
		z, ok := zoneOf[p.Spec.NodeName]
		if !ok {
			return nil, fmt.Errorf("pod %s is bound to node %q, which has no %s label", p.Name, p.Spec.NodeName, zoneKey)
		}
		counts[z]++
	}
	return counts, nil
}

func nodeZones(ctx context.Context) (map[string]string, error) {
	var nodes v1.NodeList
	if err := k8s.List(ctx, &nodes); err != nil {
		return nil, fmt.Errorf("list nodes: %w", err)
	}
	out := map[string]string{}
	for _, n := range nodes.Items {
		if z, ok := n.Labels[zoneKey]; ok {
			out[n.Name] = z
		}
	}
	return out, nil
}

// waitRunning waits until want pods selected by sel are bound and Running,
// and returns them.
func (f *framework) waitRunning(sel labels.Selector, want int, timeout time.Duration) []v1.Pod {
	f.t.Helper()
	var pods []v1.Pod
	f.eventually(timeout, fmt.Sprintf("%d pods %s are bound and Running", want, sel), func(ctx context.Context) error {
		bound, err := f.boundPods(ctx, sel)
		if err != nil {
			return err
		}
		running := 0
		for _, p := range bound {
			if p.Status.Phase == v1.PodRunning {
				running++
			}
		}
		if running != want || len(bound) != want {
			return fmt.Errorf("%d bound, %d of them Running", len(bound), running)
		}
		pods = bound
		return nil
	})
	return pods
}

// warningRecorder keeps the warnings the apiserver returns to one client.
type warningRecorder struct {
	mu   sync.Mutex
	msgs []string
}

func (w *warningRecorder) HandleWarningHeaderWithContext(_ context.Context, _ int, _ string, text string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.msgs = append(w.msgs, text)
}

// take returns the warnings recorded so far and forgets them.
func (w *warningRecorder) take() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := w.msgs
	w.msgs = nil
	return out
}

// warningClient returns a client whose warnings go to the recorder rather
// than the log.
func warningClient(t *testing.T) (client.Client, *warningRecorder) {
	t.Helper()
	rec := &warningRecorder{}
	cfg := rest.CopyConfig(restConfig)
	cfg.WarningHandler = nil
	cfg.WarningHandlerWithContext = rec
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatalf("client: %v", err)
	}
	return c, rec
}

// runHook runs one of the suite's shell hooks (envStopCmd, envStartCmd,
// ...) with args appended.
func runHook(ctx context.Context, t testing.TB, env string, args ...string) error {
	line := strings.TrimSpace(os.Getenv(env) + " " + strings.Join(args, " "))
	out, err := exec.CommandContext(ctx, "sh", "-c", line).CombinedOutput()
	t.Logf("%s: %s\n%s", env, line, bytes.TrimSpace(out))
	if err != nil {
		return fmt.Errorf("%s %q: %w", env, line, err)
	}
	return nil
}

// ---------------------------------------------------------------- failure logs

// collectLogs prints, and writes under the artifacts directory, what
// explains a failure: the namespace's events, its pods with their nodes and
// constraints, and the webhook's logs from the time the test ran.
func (f *framework) collectLogs(ctx context.Context) {
	dir := filepath.Join(artifactsDir(), sanitize(f.t.Name()))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		f.t.Logf("artifacts: %v", err)
	}
	write := func(name, content string) {
		f.t.Logf("----- %s -----\n%s", name, content)
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			f.t.Logf("artifacts: %v", err)
		}
	}
	write("events.txt", f.events(ctx))
	write("pods.txt", f.podTable(ctx))
	if logs := f.webhookLogs(ctx); logs != "" {
		write("webhook.log", logs)
	}
	f.t.Logf("logs written to %s", dir)
}

func (f *framework) events(ctx context.Context) string {
	var events v1.EventList
	if err := k8s.List(ctx, &events, client.InNamespace(f.ns)); err != nil {
		return fmt.Sprintf("list events: %v", err)
	}
	sort.SliceStable(events.Items, func(i, j int) bool {
		return eventTime(events.Items[i]).Before(eventTime(events.Items[j]))
	})
	var b strings.Builder
	w := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, "TIME\tTYPE\tREASON\tOBJECT\tMESSAGE")
	for _, e := range events.Items {
		fmt.Fprintf(w, "%s\t%s\t%s\t%s/%s\t%s\n", eventTime(e).Format("15:04:05.000"), e.Type, e.Reason,
			e.InvolvedObject.Kind, e.InvolvedObject.Name, e.Message)
	}
	_ = w.Flush()
	return b.String()
}

func eventTime(e v1.Event) time.Time {
	switch {
	case !e.EventTime.IsZero():
		return e.EventTime.Time
	case !e.LastTimestamp.IsZero():
		return e.LastTimestamp.Time
	}
	return e.CreationTimestamp.Time
}

func (f *framework) podTable(ctx context.Context) string {
	var pods v1.PodList
	if err := k8s.List(ctx, &pods, client.InNamespace(f.ns)); err != nil {
		return fmt.Sprintf("list pods: %v", err)
	}
	zoneOf, _ := nodeZones(ctx)
	var b strings.Builder
	w := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, "POD\tPHASE\tNODE\tZONE\tPOLICY\tCONSTRAINTS\tSCHEDULING")
	for _, p := range pods.Items {
		var cs []string
		for _, c := range p.Spec.TopologySpreadConstraints {
			cs = append(cs, fmt.Sprintf("%s/%d/%s", c.TopologyKey, c.MaxSkew, c.WhenUnsatisfiable))
		}
		sched := ""
		for _, c := range p.Status.Conditions {
			if c.Type == v1.PodScheduled && c.Status != v1.ConditionTrue {
				sched = c.Reason + ": " + c.Message
			}
		}
		phase := string(p.Status.Phase)
		if p.DeletionTimestamp != nil {
			phase += ",Terminating"
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", p.Name, phase, p.Spec.NodeName, zoneOf[p.Spec.NodeName],
			p.Annotations[policyAnnotation], strings.Join(cs, ","), sched)
	}
	_ = w.Flush()
	return b.String()
}

// webhookLogs returns what the webhook logged since the test started: from
// the file named by envWebhookLog, or from the pods behind the webhook
// Services.
func (f *framework) webhookLogs(ctx context.Context) string {
	if path := os.Getenv(envWebhookLog); path != "" {
		file, err := os.Open(path)
		if err != nil {
			return fmt.Sprintf("open %s: %v", path, err)
		}
		defer file.Close()
		if _, err := file.Seek(f.logOffset, io.SeekStart); err != nil {
			return fmt.Sprintf("seek %s: %v", path, err)
		}
		data, err := io.ReadAll(file)
		if err != nil {
			return fmt.Sprintf("read %s: %v", path, err)
		}
		return string(data)
	}
	var b strings.Builder
	seen := map[string]bool{}
	for _, w := range append(cluster.mutating, cluster.validating...) {
		svc := w.clientConfig.Service
		if svc == nil || seen[svc.Namespace+"/"+svc.Name] {
			continue
		}
		seen[svc.Namespace+"/"+svc.Name] = true
		var s v1.Service
		if err := k8s.Get(ctx, client.ObjectKey{Namespace: svc.Namespace, Name: svc.Name}, &s); err != nil {
			fmt.Fprintf(&b, "service %s/%s: %v\n", svc.Namespace, svc.Name, err)
			continue
		}
		var pods v1.PodList
		if err := k8s.List(ctx, &pods, client.InNamespace(svc.Namespace), client.MatchingLabels(s.Spec.Selector)); err != nil {
			fmt.Fprintf(&b, "pods of service %s/%s: %v\n", svc.Namespace, svc.Name, err)
			continue
		}
		since := metav1.NewTime(f.started)
		for _, p := range pods.Items {
			data, err := clientset.CoreV1().Pods(p.Namespace).GetLogs(p.Name, &v1.PodLogOptions{SinceTime: &since}).DoRaw(ctx)
			fmt.Fprintf(&b, "===== %s/%s =====\n", p.Namespace, p.Name)
			if err != nil {
				fmt.Fprintf(&b, "logs: %v\n", err)
				continue
			}
			b.Write(data)
		}
	}
	return b.String()
}

func artifactsDir() string {
	if d := os.Getenv(envArtifacts); d != "" {
		return d
	}
	return "_artifacts"
}

func fileSize(path string) int64 {
	if path == "" {
		return 0
	}
	st, err := os.Stat(path)
	if err != nil {
		return 0
	}
	return st.Size()
}
