//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/client"
	sigsyaml "sigs.k8s.io/yaml"

	"github.com/spreadguard/spreadguard/pkg/forecast"
	"github.com/spreadguard/spreadguard/pkg/policy/policytest"
)

// TestE2EForecast runs after TestE2E, on its own: it cordons a zone.
func TestE2EForecast(t *testing.T) {
	t.Run("with a zone cordoned, a Deployment of 2 scaled to 3 and applied at 5: kubectl scale and apply print the forecast, "+
		"and kubectl describe deployment shows one counted SpreadUnsatisfiable event", forecastOnApply)
}

func forecastOnApply(t *testing.T) {
	f := newFramework(t)
	zone := cordonZone(t)
	// Counted with nodeTaintsPolicy Ignore, the cordoned zone is a domain
	// with 0 pods that no pod can reach: the global minimum stays 0.
	f.create(policytest.MakeSpreadPolicy().Name("zones").Constraint(
		policytest.MakeConstraint().MaxSkew(1).TopologyKey(zoneKey).DoNotSchedule().NodeTaintsPolicy(v1.NodeInclusionPolicyIgnore).Obj()).Obj())
	// The pod webhook counts bound pods only: replicas created in one burst
	// are all admitted before any is bound. So the Deployment starts at 2,
	// which zones a and b take, and is then scaled to 3.
	manifest := func(replicas int32) []byte {
		t.Helper()
		web := makeDeployment("web").Replicas(replicas).Obj()
		web.Namespace = f.ns
		web.APIVersion, web.Kind = "apps/v1", "Deployment"
		b, err := sigsyaml.Marshal(web)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	// The policy must have reached the webhook's cache: a server-side dry
	// run goes through the webhooks and stores nothing.
	f.eventually(policyChangeTimeout, "a dry-run apply of 3 replicas prints the forecast", func(ctx context.Context) error {
		_, stderr, err := kubectl(ctx, manifest(3), "apply", "--dry-run=server", "-f", "-")
		if want := "spreadguard: replica 3 of 3 would be refused: " + zone + " has no schedulable node"; err != nil || !strings.Contains(stderr, want) {
			return fmt.Errorf("apply --dry-run=server: %v, stderr %q", err, stderr)
		}
		return nil
	})
	_, stderr, err := kubectl(t.Context(), manifest(2), "apply", "-f", "-")
	if err != nil {
		t.Fatalf("kubectl apply: %v\n%s", err, stderr)
	}
	if strings.Contains(stderr, "spreadguard") {
		t.Errorf("kubectl apply of 2 replicas, which fit, printed %q", stderr)
	}
	f.waitRunning(labels.SelectorFromSet(labels.Set{"app": "web"}), 2, placeTimeout)

	_, stderr, err = kubectl(t.Context(), nil, "scale", "deployment", "web", "-n", f.ns, "--replicas=3")
	if err != nil {
		t.Fatalf("kubectl scale: %v\n%s", err, stderr)
	}
	t.Logf("kubectl scale printed: %s", stderr)
	if want := "Warning: spreadguard: replica 3 of 3 would be refused: " + zone + " has no schedulable node"; !strings.Contains(stderr, want) {
		t.Errorf("kubectl scale printed %q, want %q", stderr, want)
	}

	// The ReplicaSet controller creates replica 3, the webhook refuses it,
	// and the controller retries: one event on the Deployment, a series.
	f.eventually(placeTimeout, "one SpreadUnsatisfiable event on the Deployment, with a count", func(ctx context.Context) error {
		var list eventsv1.EventList
		if err := k8s.List(ctx, &list, client.InNamespace(f.ns)); err != nil {
			return err
		}
		var on []eventsv1.Event
		for _, e := range list.Items {
			if e.Reason == "SpreadUnsatisfiable" && e.Regarding.Kind == "Deployment" && e.Regarding.Name == "web" {
				on = append(on, e)
			}
		}
		if len(on) != 1 || on[0].Series == nil || on[0].Series.Count < 2 {
			return fmt.Errorf("SpreadUnsatisfiable events on deployment/web: %+v", on)
		}
		return nil
	})
	out, stderr, err := kubectl(t.Context(), nil, "describe", "deployment", "web", "-n", f.ns)
	if err != nil {
		t.Fatalf("kubectl describe: %v\n%s", err, stderr)
	}
	if !strings.Contains(out, "SpreadUnsatisfiable") || !strings.Contains(out, zone) {
		t.Errorf("kubectl describe deployment web does not show the event naming %s:\n%s", zone, out)
	}
	t.Logf("kubectl describe deployment web:\n%s", out[strings.LastIndex(out, "Events:"):])

	// An apply to 5: the forecast starts from the 3 replicas of the same
	// template the Deployment asked for.
	_, stderr, err = kubectl(t.Context(), manifest(5), "apply", "-f", "-")
	if err != nil {
		t.Fatalf("kubectl apply: %v\n%s", err, stderr)
	}
	t.Logf("kubectl apply of 5 printed: %s", stderr)
	if want := "of 5 would be refused: " + zone + " has no schedulable node"; !strings.Contains(stderr, want) {
		t.Errorf("kubectl apply of 5 printed %q, want the forecast (%q)", stderr, want)
	}

	// kubectl spread plan against the live cluster gives the same answer:
	// with 2 replicas running in zones a and b, the third is refused.
	plan := func(want int, args ...string) *forecast.Forecast {
		t.Helper()
		cmd := exec.CommandContext(t.Context(), kubectlSpread(t), append([]string{"plan", "-n", f.ns, "-o", "json"}, args...)...)
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		code := 0
		if exit, ok := err.(*exec.ExitError); ok {
			code = exit.ExitCode()
		} else if err != nil {
			t.Fatalf("kubectl-spread plan %v: %v", args, err)
		}
		if code != want {
			t.Fatalf("kubectl-spread plan %v exited %d, want %d; stderr %q", args, code, want, stderr.String())
		}
		var got forecast.Forecast
		if err := json.Unmarshal(stdout.Bytes(), &got); err != nil {
			t.Fatalf("kubectl-spread plan %v -o json: %v\n%s", args, err, stdout.String())
		}
		return &got
	}
	if got := plan(1, "deployment/web", "--replicas", "4"); got.Refused == nil || got.Refused.Replica != 3 {
		t.Errorf("kubectl-spread plan deployment/web --replicas 4: refused %+v, want replica 3", got.Refused)
	} else {
		t.Logf("kubectl-spread plan deployment/web --replicas 4 (live): %s", got.Warning())
	}
	file := filepath.Join(t.TempDir(), "api.yaml")
	api := makeDeployment("api").Replicas(2).Obj()
	api.Namespace = f.ns
	api.APIVersion, api.Kind = "apps/v1", "Deployment"
	data, err := sigsyaml.Marshal(api)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(file, data, 0o644); err != nil {
		t.Fatal(err)
	}
	if got := plan(0, "-f", file); got.Refused != nil || len(got.Placements) != 2 {
		t.Errorf("kubectl-spread plan -f api.yaml (2 replicas, zones a and b free): refused %+v, %d placements; want none refused, 2 placed",
			got.Refused, len(got.Placements))
	}
}

// cordonZone cordons every node of the cluster's last zone until the test
// ends, and returns the zone.
func cordonZone(t *testing.T) string {
	t.Helper()
	zone := cluster.zones[len(cluster.zones)-1]
	for _, node := range cluster.nodesByZone[zone] {
		// Registered before the cordon, so that a failure halfway through
		// still leaves every node schedulable for the next scenario.
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			if err := setCordon(ctx, node, false); err != nil {
				t.Errorf("uncordon %s: %v", node, err)
			}
		})
		if err := setCordon(t.Context(), node, true); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("cordoned zone %s: %s", zone, strings.Join(cluster.nodesByZone[zone], ", "))
	return zone
}

// kubectl runs kubectl (from PATH, else ../../bin) on the suite's
// kubeconfig with stdin, and returns what it printed.
func kubectl(ctx context.Context, stdin []byte, args ...string) (stdout, stderr string, err error) {
	path, lookErr := exec.LookPath("kubectl")
	if lookErr != nil {
		path = filepath.Join("..", "..", "bin", "kubectl")
	}
	cmd := exec.CommandContext(ctx, path, args...)
	cmd.Env = os.Environ()
	var out, errOut bytes.Buffer
	cmd.Stdin, cmd.Stdout, cmd.Stderr = bytes.NewReader(stdin), &out, &errOut
	err = cmd.Run()
	return out.String(), errOut.String(), err
}
