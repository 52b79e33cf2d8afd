package health_test

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"

	"github.com/spreadguard/spreadguard/pkg/health"
	"github.com/spreadguard/spreadguard/pkg/spread"
)

// namespaceOf returns the results of n Deployments of one namespace, each
// with 30 pods under a hard zone constraint and a soft hostname one over
// 30 nodes of 5,000, the hostname counts named node by node.
func namespaceOf(n int) []health.Result {
	out := make([]health.Result, n)
	for i := range out {
		hosts := map[string]int{}
		for h := range 30 {
			hosts[fmt.Sprintf("ip-10-0-%d-%d.eu-west-1.compute.internal", (i+h)/250%250, (i+h)%250)] = 1
		}
		out[i] = health.Result{Kind: "Deployment", Namespace: ns, Name: fmt.Sprintf("checkout-api-%04d", i),
			Policy: "platform-defaults", PolicyKind: "ClusterSpreadPolicy", State: health.StateSpread, Pods: 30,
			Constraints: []spread.Spread{
				{TopologyKey: v1.LabelTopologyZone, MaxSkew: 1, WhenUnsatisfiable: v1.DoNotSchedule,
					Domains: map[string]int{"eu-west-1a": 10, "eu-west-1b": 10, "eu-west-1c": 10}, DomainCount: 3, Min: 10, Max: 10},
				{Index: 1, TopologyKey: v1.LabelHostname, MaxSkew: 1, WhenUnsatisfiable: v1.ScheduleAnyway,
					Domains: hosts, DomainCount: 5000, Max: 1, Skew: 1},
			}}
	}
	return out
}

func TestShards(t *testing.T) {
	tests := []struct {
		name      string
		workloads int
		detail    spread.MessageDetail
		// shards is how many Reports the namespace gets.
		shards int
	}{
		{name: "50 Deployments fit one Report, named spreadguard", workloads: 50, detail: spread.DetailNodes, shards: 1},
		{name: "3,000 Deployments of 2 constraints, hostnames named: split in 16", workloads: 3000, detail: spread.DetailNodes, shards: 16},
		{name: "3,000 Deployments of 2 constraints, hostnames counted (2.2 MiB whole): split in 8", workloads: 3000, detail: spread.DetailDomains, shards: 8},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rep := health.Reports(namespaceOf(tt.workloads), tt.detail)[ns]
			whole, err := json.Marshal(rep)
			if err != nil {
				t.Fatal(err)
			}
			shards, err := health.Shards(rep, health.ReportLimit)
			if err != nil {
				t.Fatalf("Shards() error = %v", err)
			}
			t.Logf("%d results, %d KiB of JSON whole, in %d Reports", len(rep.Results), len(whole)>>10, len(shards))
			if len(shards) != tt.shards {
				t.Errorf("%d Reports (%v), want %d", len(shards), slices.Sorted(maps.Keys(shards)), tt.shards)
			}
			if tt.shards == 1 && shards[health.ReportName] != rep {
				t.Errorf("the one Report is %v, want the namespace's, named %s", slices.Collect(maps.Keys(shards)), health.ReportName)
			}
			// Every result in one shard, a workload's results together,
			// each shard under the limit and its summary its own.
			var all []health.ReportResult
			home := map[string]string{}
			for name, s := range shards {
				data, err := json.Marshal(s)
				if err != nil {
					t.Fatal(err)
				}
				if len(data) > health.ReportLimit+1024 {
					t.Errorf("Report %s takes %d bytes, over the limit of %d", name, len(data), health.ReportLimit)
				}
				want := health.ReportSummary{}
				for _, r := range s.Results {
					switch r.Result {
					case health.ResultPass:
						want.Pass++
					case health.ResultWarn:
						want.Warn++
					}
					w := r.Resources[0].Name
					if h, ok := home[w]; ok && h != name {
						t.Errorf("the results of %s are in %s and %s", w, h, name)
					}
					home[w] = name
				}
				if diff := cmp.Diff(want, s.Summary); diff != "" {
					t.Errorf("summary of %s (-want +got):\n%s", name, diff)
				}
				all = append(all, s.Results...)
			}
			key := func(r health.ReportResult) string { return r.Resources[0].Name + " " + r.Rule }
			if diff := cmp.Diff(slices.Sorted(keys(rep.Results, key)), slices.Sorted(keys(all, key))); diff != "" {
				t.Errorf("results of the shards (-whole +shards):\n%s", diff)
			}
		})
	}
}

func keys(rs []health.ReportResult, key func(health.ReportResult) string) func(func(string) bool) {
	return func(yield func(string) bool) {
		for _, r := range rs {
			if !yield(key(r)) {
				return
			}
		}
	}
}

func TestAWorkloadKeepsItsShardAsOthersComeAndGo(t *testing.T) {
	before, err := health.Shards(health.Reports(namespaceOf(3000), spread.DetailNodes)[ns], health.ReportLimit)
	if err != nil {
		t.Fatal(err)
	}
	// One Deployment fewer: its shard changes, the others not at all.
	after, err := health.Shards(health.Reports(namespaceOf(3000)[1:], spread.DetailNodes)[ns], health.ReportLimit)
	if err != nil {
		t.Fatal(err)
	}
	var changed []string
	for name, s := range before {
		if !cmp.Equal(s, after[name]) {
			changed = append(changed, name)
		}
	}
	if len(changed) != 1 || len(after) != len(before) {
		t.Errorf("Reports changed by removing one workload: %v of %d (now %d), want 1", changed, len(before), len(after))
	}
}

func TestShardsRefusesAWorkloadNoSplitBounds(t *testing.T) {
	tests := []struct {
		name    string
		limit   int
		wantErr string
	}{
		{name: "2 Deployments, each within the limit: split, no error", limit: 2 << 10},
		{name: "2 Deployments, the results of each over the limit: an error naming the first", limit: 256,
			wantErr: "the results of Deployment/checkout-api-0000 take"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rep := health.Reports(namespaceOf(2), spread.DetailNodes)[ns]
			shards, err := health.Shards(rep, tt.limit)
			if tt.wantErr == "" {
				if err != nil || len(shards) < 2 {
					t.Errorf("Shards() = %d Reports, %v; want a split and no error", len(shards), err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("Shards() = %d Reports, %v; want an error containing %q", len(shards), err, tt.wantErr)
			}
		})
	}
}

func TestAResultNamesAtMostAFewThousandDomains(t *testing.T) {
	hosts := map[string]int{}
	for h := range 5000 {
		hosts[fmt.Sprintf("node-%04d", h)] = 1
	}
	r := health.Result{Kind: "Deployment", Namespace: ns, Name: "web", State: health.StateSpread, Constraints: []spread.Spread{
		{TopologyKey: v1.LabelHostname, MaxSkew: 1, WhenUnsatisfiable: v1.DoNotSchedule, Domains: hosts, DomainCount: 5000, Min: 1, Max: 1}}}
	got := health.Reports([]health.Result{r}, spread.DetailNodes)[ns].Results[0].Properties["domains"]
	if len(got) > 4096 || !strings.HasPrefix(got, "node-0000=1,node-0001=1,") || !strings.HasSuffix(got, " more") {
		t.Errorf("domains of 5,000 nodes = %d bytes, %q...%q; want at most 4 KiB, the first nodes, and how many more", len(got), got[:40], got[len(got)-20:])
	}
	before, rest, _ := strings.Cut(got, " and ")
	if listed := strings.Count(before, ",") + 1; !strings.HasPrefix(rest, fmt.Sprint(5000-listed)+" more") {
		t.Errorf("%d domains listed, then %q; want %d more", listed, rest, 5000-listed)
	}
}
