package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/spf13/cobra"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/spreadguard/spreadguard/pkg/apis/spreadguard/v1alpha1"
	"github.com/spreadguard/spreadguard/pkg/cache"
	"github.com/spreadguard/spreadguard/pkg/engine"
	"github.com/spreadguard/spreadguard/pkg/lookup"
	"github.com/spreadguard/spreadguard/pkg/spread"
)

// release is the ConfigMap the chart renders for release sg in
// spreadguard-system, holding file.
func release(file string) *v1.ConfigMap {
	return &v1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: "spreadguard-system", Name: "sg-spreadguard-config", Labels: map[string]string{
			"app.kubernetes.io/name": "spreadguard", "app.kubernetes.io/instance": "sg",
			"app.kubernetes.io/part-of": "spreadguard", "app.kubernetes.io/component": "webhook",
		}},
		Data: map[string]string{"config.yaml": file},
	}
}

// strictRelease runs its webhook with Warn, domains only and no NodePools.
const strictRelease = `apiVersion: config.spreadguard.io/v1alpha1
kind: WebhookConfiguration
defaultAction: Warn
excludedNamespaces: [kube-system, spreadguard-system]
messageDetail: domains
autoscalerKarpenter: "false"
nodeGroupLabel: eks.amazonaws.com/nodegroup
`

// inNamespace is fakeCluster whose kubeconfig context names namespace.
func inNamespace(t *testing.T, namespace string, objs ...runtime.Object) connectFunc {
	t.Helper()
	scheme, err := cache.NewScheme()
	if err != nil {
		t.Fatal(err)
	}
	c := &clients{reader: fake.NewClientBuilder().WithScheme(scheme).WithRuntimeObjects(objs...).Build(), namespace: namespace}
	return func(string, string) (*clients, error) { return c, nil }
}

// TestEngineSettingsComeFromTheFlagsOrTheRelease parses a command line as
// every command does, with a run function that records the settings, so
// that no file is read and no engine runs; the release is read through a
// fake client.
func TestEngineSettingsComeFromTheFlagsOrTheRelease(t *testing.T) {
	caStatus := types.NamespacedName{Namespace: "kube-system", Name: "cluster-autoscaler-status"}
	everything := engine.Config{DefaultAction: v1alpha1.ActionDeny, ExcludedNamespaces: []string{"kube-system"}, MessageDetail: spread.DetailNodes}
	fromFile := lookup.TemplateOptions{NodeTemplates: true, Karpenter: true, ClusterAutoscalerStatus: caStatus}
	strict := engine.Config{DefaultAction: v1alpha1.ActionWarn, ExcludedNamespaces: []string{"kube-system", "spreadguard-system"},
		MessageDetail: spread.DetailDomains}
	strictTemplates := lookup.TemplateOptions{NodeTemplates: true, NodeGroupLabel: "eks.amazonaws.com/nodegroup", ClusterAutoscalerStatus: caStatus}
	tests := []struct {
		name          string
		args          []string
		connect       connectFunc
		want          engine.Config
		wantTemplates lookup.TemplateOptions
		wantErr       string
	}{
		{
			name:          "no flags -> the webhook's defaults, but messages that name nodes, and every NodePool read",
			want:          everything,
			wantTemplates: fromFile,
		},
		{
			name: "--message-detail domains --autoscaler-karpenter=false --node-group-label pool --excluded-namespaces tools -> each in the settings",
			args: []string{"--message-detail", "domains", "--autoscaler-karpenter=false", "--node-group-label", "pool", "--excluded-namespaces", "tools"},
			want: engine.Config{DefaultAction: v1alpha1.ActionDeny, ExcludedNamespaces: []string{"kube-system", "tools"},
				MessageDetail: spread.DetailDomains},
			wantTemplates: lookup.TemplateOptions{NodeTemplates: true, NodeGroupLabel: "pool", ClusterAutoscalerStatus: caStatus},
		},
		{
			name:          "--from-release sg --release-namespace spreadguard-system -> the release's settings",
			args:          []string{"--from-release", "sg", "--release-namespace", "spreadguard-system"},
			connect:       fakeCluster(t, release(strictRelease)),
			want:          strict,
			wantTemplates: strictTemplates,
		},
		{
			name:          "--from-release sg, the kubeconfig context's namespace spreadguard-system -> found there",
			args:          []string{"--from-release", "sg"},
			connect:       inNamespace(t, "spreadguard-system", release(strictRelease)),
			want:          strict,
			wantTemplates: strictTemplates,
		},
		{
			name:    "--from-release sg --autoscaler-karpenter auto --default-action Deny -> those two from the flags, the rest from the release",
			args:    []string{"--from-release", "sg", "--release-namespace", "spreadguard-system", "--autoscaler-karpenter", "auto", "--default-action", "Deny"},
			connect: fakeCluster(t, release(strictRelease)),
			want: engine.Config{DefaultAction: v1alpha1.ActionDeny, ExcludedNamespaces: []string{"kube-system", "spreadguard-system"},
				MessageDetail: spread.DetailDomains},
			wantTemplates: lookup.TemplateOptions{NodeTemplates: true, Karpenter: true, NodeGroupLabel: "eks.amazonaws.com/nodegroup", ClusterAutoscalerStatus: caStatus},
		},
		{
			name:    "--from-release sg in the context's namespace default, where it is not -> the error says where it looked",
			args:    []string{"--from-release", "sg"},
			connect: fakeCluster(t, release(strictRelease)),
			wantErr: "release sg in namespace default has no ConfigMap labelled app.kubernetes.io/instance=sg",
		},
		{
			name:    "a release whose messageDetail is all, no --message-detail -> the field and the ConfigMap named",
			args:    []string{"--from-release", "sg", "--release-namespace", "spreadguard-system"},
			connect: fakeCluster(t, release(strings.Replace(strictRelease, "messageDetail: domains", "messageDetail: all", 1))),
			wantErr: `invalid messageDetail in ConfigMap spreadguard-system/sg-spreadguard-config key config.yaml: Unsupported value: "all"`,
		},
		{
			name:          "a release whose messageDetail is all, --message-detail nodes given -> the flag wins, valid",
			args:          []string{"--from-release", "sg", "--release-namespace", "spreadguard-system", "--message-detail", "nodes"},
			connect:       fakeCluster(t, release(strings.Replace(strictRelease, "messageDetail: domains", "messageDetail: all", 1))),
			want:          engine.Config{DefaultAction: v1alpha1.ActionWarn, ExcludedNamespaces: []string{"kube-system", "spreadguard-system"}, MessageDetail: spread.DetailNodes},
			wantTemplates: strictTemplates,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, kube := newEngineFlags(), kubeFlags{}
			var got engine.Config
			var gotTemplates lookup.TemplateOptions
			cmd := &cobra.Command{
				Use: "test", SilenceErrors: true, SilenceUsage: true,
				RunE: func(cmd *cobra.Command, _ []string) (err error) {
					got, gotTemplates, err = f.settings(cmd, kube, tt.connect)
					return err
				},
			}
			f.register(cmd)
			kube.register(cmd)
			cmd.SetArgs(tt.args)
			cmd.SetOut(&bytes.Buffer{})
			err := cmd.Execute()
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error = %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("engine settings (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.wantTemplates, gotTemplates); diff != "" {
				t.Errorf("template sources (-want +got):\n%s", diff)
			}
		})
	}
}

// TestCheckDecidesAsTheReleasesWebhook runs check on the example files as
// a webhook run with --autoscaler-karpenter=false and messageDetail:
// domains decides, given by flags or read from its release.
func TestCheckDecidesAsTheReleasesWebhook(t *testing.T) {
	const karpenterCluster, minDomainsPod = "../../examples/cluster-karpenter.yaml", "../../examples/pod-mindomains.yaml"
	denyRelease := strings.Replace(strictRelease, "defaultAction: Warn", "defaultAction: Deny", 1)
	tests := []struct {
		name          string
		args          []string
		wantCode      int
		wantInMessage string
		// domains: the release's or the flag's messageDetail is domains,
		// and -o json is reduced to what it may name.
		domains bool
	}{
		{
			name:     "pod-mindomains on cluster-karpenter, defaults -> allowed: a NodePool's node in zone-c would take it",
			args:     []string{"--cluster", karpenterCluster, "--pod", minDomainsPod},
			wantCode: exitAllowed,
		},
		{
			name:          "pod-mindomains on cluster-karpenter, --autoscaler-karpenter=false -> denied: no NodePool read",
			args:          []string{"--cluster", karpenterCluster, "--pod", minDomainsPod, "--autoscaler-karpenter=false"},
			wantCode:      exitDenied,
			wantInMessage: "cannot be satisfied on any node",
		},
		{
			name:          "pod-mindomains on cluster-karpenter, from a release without Karpenter -> denied, and the message names no node",
			args:          []string{"--cluster", karpenterCluster, "--pod", minDomainsPod, "--from-release", "sg", "--release-namespace", "spreadguard-system"},
			wantCode:      exitDenied,
			wantInMessage: "cannot be satisfied on any node",
			domains:       true,
		},
		{
			name:     "pod-mindomains on cluster-karpenter, from that release with --autoscaler-karpenter=auto -> allowed: the flag wins",
			args:     []string{"--cluster", karpenterCluster, "--pod", minDomainsPod, "--from-release", "sg", "--release-namespace", "spreadguard-system", "--autoscaler-karpenter=auto"},
			wantCode: exitAllowed,
			domains:  true,
		},
		{
			name:          "pod-pinned on cluster, --message-detail domains -> denied, the cordoned nodes not named",
			args:          []string{"--cluster", exampleCluster, "--pod", examplePinned, "--message-detail", "domains"},
			wantCode:      exitDenied,
			wantInMessage: "zone zone-c",
			domains:       true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := runWith(append([]string{"check", "-o", "json"}, tt.args...), &stdout, &stderr, fakeCluster(t, release(denyRelease)))
			if code != tt.wantCode {
				t.Fatalf("exit %d, want %d; stderr %q", code, tt.wantCode, stderr.String())
			}
			if !tt.domains {
				if r := decodeReport(t, stdout.String()); !strings.Contains(r.Message, tt.wantInMessage) {
					t.Errorf("message %q does not say %q", r.Message, tt.wantInMessage)
				}
				return
			}
			if r := decodeDomainsReport(t, stdout.String()); !strings.Contains(r.Message, tt.wantInMessage) {
				t.Errorf("message %q does not say %q", r.Message, tt.wantInMessage)
			}
			if strings.Contains(stdout.String(), "node-") {
				t.Errorf("-o json names a node under messageDetail domains:\n%s", stdout.String())
			}
		})
	}
}

// TestCheckResolvesAZonelessNodePoolWithTheListedZones runs check on
// examples/cluster-karpenter.yaml with its NodePool's zone requirement
// removed, as the NodePools of Karpenter's getting-started guide have none,
// and its KWOKNodeClass naming no zone: the zones come from
// --autoscaler-zones, or the release's autoscalerZones, else from the
// nodes (zone-a and zone-b).
func TestCheckResolvesAZonelessNodePoolWithTheListedZones(t *testing.T) {
	data, err := os.ReadFile("../../examples/cluster-karpenter.yaml")
	if err != nil {
		t.Fatal(err)
	}
	const zoneRequirement = "      - key: topology.kubernetes.io/zone\n        operator: In\n        values: [zone-a, zone-b, zone-c]\n"
	if !strings.Contains(string(data), zoneRequirement) {
		t.Fatalf("examples/cluster-karpenter.yaml no longer has the NodePool requirement %q", zoneRequirement)
	}
	cluster := filepath.Join(t.TempDir(), "cluster.yaml")
	if err := os.WriteFile(cluster, []byte(strings.Replace(string(data), zoneRequirement, "", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	zonesRelease := strings.NewReplacer("defaultAction: Warn", "defaultAction: Deny",
		`autoscalerKarpenter: "false"`, "autoscalerKarpenter: \"true\"\nautoscalerZones: [zone-a, zone-b, zone-c]").Replace(strictRelease)
	zoneC := []string{"nodepool/default/zone-c,on-demand"}
	tests := []struct {
		name          string
		args          []string
		wantCode      int
		wantTemplates []string
	}{
		{
			name:     "no zones listed -> denied: the NodePool's zones are the nodes', zone-a and zone-b, fewer than minDomains 3",
			wantCode: exitDenied,
		},
		{
			name:          "--autoscaler-zones zone-a,zone-b,zone-c -> allowed: a NodePool's node in zone-c would take it",
			args:          []string{"--autoscaler-zones", "zone-a,zone-b,zone-c"},
			wantCode:      exitAllowed,
			wantTemplates: zoneC,
		},
		{
			name:          "from a release listing zone-a, zone-b, zone-c -> allowed",
			args:          []string{"--from-release", "sg", "--release-namespace", "spreadguard-system"},
			wantCode:      exitAllowed,
			wantTemplates: zoneC,
		},
		{
			name:     "from that release with --autoscaler-zones= -> denied: the flag clears the release's list",
			args:     []string{"--from-release", "sg", "--release-namespace", "spreadguard-system", "--autoscaler-zones="},
			wantCode: exitDenied,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			// The release says messageDetail domains, under which -o json
			// counts the templates; the flag, which wins, names them.
			args := append([]string{"check", "-o", "json", "--message-detail", "nodes", "--cluster", cluster, "--pod", "../../examples/pod-mindomains.yaml"}, tt.args...)
			code := runWith(args, &stdout, &stderr, fakeCluster(t, release(zonesRelease)))
			if code != tt.wantCode {
				t.Fatalf("exit %d, want %d; stderr %q", code, tt.wantCode, stderr.String())
			}
			if diff := cmp.Diff(tt.wantTemplates, decodeReport(t, stdout.String()).FeasibleTemplates, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("feasibleTemplates (-want +got):\n%s", diff)
			}
		})
	}
}
