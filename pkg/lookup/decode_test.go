package lookup_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/spreadguard/spreadguard/pkg/apis/spreadguard/v1alpha1"
	"github.com/spreadguard/spreadguard/pkg/lookup"
)

// The admission engine reads a cluster file through the Sources it reads
// the informer cache through.
var _ client.Reader = (*lookup.Store)(nil)

// everyKind holds one object of each kind a cluster file accepts.
const everyKind = `
apiVersion: v1
kind: Node
metadata:
  name: node-a1
  labels:
    topology.kubernetes.io/zone: a
---
# a comment-only document is not a document
---
apiVersion: v1
kind: Namespace
metadata:
  name: shop
---
apiVersion: v1
kind: Pod
metadata:
  name: web-1
  namespace: shop
  labels: {app: web}
spec:
  nodeName: node-a1
  containers: [{name: web, image: nginx}]
---
apiVersion: v1
kind: Pod
metadata:
  name: loose
spec:
  containers: [{name: c, image: busybox}]
---
apiVersion: v1
kind: Service
metadata: {name: web, namespace: shop}
spec:
  selector: {app: web}
---
apiVersion: v1
kind: ReplicationController
metadata: {name: old, namespace: shop}
spec:
  selector: {app: old}
---
apiVersion: apps/v1
kind: ReplicaSet
metadata: {name: web-abc, namespace: shop}
spec:
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec: {containers: [{name: web, image: nginx}]}
---
apiVersion: apps/v1
kind: StatefulSet
metadata: {name: db, namespace: shop}
spec:
  selector: {matchLabels: {app: db}}
  serviceName: db
  template:
    metadata: {labels: {app: db}}
    spec: {containers: [{name: db, image: postgres}]}
---
apiVersion: spreadguard.io/v1alpha1
kind: SpreadPolicy
metadata: {name: zones, namespace: shop}
spec:
  constraints:
  - {maxSkew: 1, topologyKey: topology.kubernetes.io/zone, whenUnsatisfiable: DoNotSchedule}
---
apiVersion: spreadguard.io/v1alpha1
kind: ClusterSpreadPolicy
metadata: {name: everywhere}
spec:
  constraints:
  - {maxSkew: 2, topologyKey: kubernetes.io/hostname, whenUnsatisfiable: ScheduleAnyway}
`

// contents is what a test compares: the names the lookups return.
type contents struct {
	Nodes, Pods, Services, SpreadPolicies, ClusterSpreadPolicies []string
}

// summarize looks everything up in namespaces, as the engine would.
func summarize(t *testing.T, c *lookup.Store, namespaces ...string) contents {
	t.Helper()
	var got contents
	snap := c.Snapshot()
	for _, n := range snap.Nodes {
		got.Nodes = append(got.Nodes, n.Name)
	}
	for _, p := range snap.Pods {
		got.Pods = append(got.Pods, p.Namespace+"/"+p.Name)
	}
	for _, ns := range namespaces {
		svcs, err := lookup.NewSources(c).Services(ns)
		mustNot(t, err)
		for _, s := range svcs {
			got.Services = append(got.Services, s.Namespace+"/"+s.Name)
		}
		sps, err := lookup.NewSources(c).SpreadPolicies(ns)
		mustNot(t, err)
		for _, p := range sps {
			got.SpreadPolicies = append(got.SpreadPolicies, p.Namespace+"/"+p.Name)
		}
	}
	csps, err := lookup.NewSources(c).ClusterSpreadPolicies()
	mustNot(t, err)
	for _, p := range csps {
		got.ClusterSpreadPolicies = append(got.ClusterSpreadPolicies, p.Name)
	}
	return got
}

func mustNot(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatalf("unexpected error: %v", err)
	}
}

func TestDecode(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want contents
	}{
		{
			name: "one object of every kind, a comment-only document and a pod without namespace -> all stored, the pod in default",
			in:   everyKind,
			want: contents{
				Nodes:                 []string{"node-a1"},
				Pods:                  []string{"shop/web-1", "default/loose"},
				Services:              []string{"shop/web"},
				SpreadPolicies:        []string{"shop/zones"},
				ClusterSpreadPolicies: []string{"everywhere"},
			},
		},
		{
			name: "a v1 List as kubectl get -o yaml writes it -> its items stored",
			in: `
apiVersion: v1
kind: List
metadata: {resourceVersion: ""}
items:
- apiVersion: v1
  kind: Node
  metadata: {name: n1}
- apiVersion: v1
  kind: Pod
  metadata: {name: p1, namespace: shop}
  spec: {containers: [{name: c, image: i}]}
`,
			want: contents{Nodes: []string{"n1"}, Pods: []string{"shop/p1"}},
		},
		{
			name: "a stream of two JSON objects -> both stored",
			in: `{"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"}}
{"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s", "namespace": "shop"}}`,
			want: contents{Nodes: []string{"n1"}, Services: []string{"shop/s"}},
		},
		{
			name: "a leading separator and an empty document -> not counted",
			in:   "---\n---\napiVersion: v1\nkind: Node\nmetadata: {name: n1}\n---\n",
			want: contents{Nodes: []string{"n1"}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := lookup.Decode("cluster.yaml", strings.NewReader(tt.in))
			mustNot(t, err)
			if diff := cmp.Diff(tt.want, summarize(t, c, "shop", "default")); diff != "" {
				t.Errorf("Decode() contents (-want +got):\n%s", diff)
			}
		})
	}
}

func TestDecodeErrors(t *testing.T) {
	node := "apiVersion: v1\nkind: Node\nmetadata: {name: n1}\n"
	tests := []struct {
		name string
		in   string
		want string
	}{
		{
			name: "a DaemonSet in document 3 -> unknown kind with the list of kinds",
			in:   node + "---\napiVersion: v1\nkind: Namespace\nmetadata: {name: shop}\n---\napiVersion: apps/v1\nkind: DaemonSet\nmetadata: {name: web}\n",
			want: `cluster.yaml: document 3: unknown kind "DaemonSet" (want one of Node, Pod, Service, ReplicationController, ReplicaSet, StatefulSet, Namespace, SpreadPolicy, ClusterSpreadPolicy, NodeTemplate, NodePool, EC2NodeClass, NodeClass, ConfigMap, Deployment, or a v1 List)`,
		},
		{
			name: "a missing colon on line 4 of document 2 -> the YAML error with its line",
			in:   node + "---\napiVersion: v1\nkind: Node\nmetadata:\n  name n2\n  labels: {a: b}\n",
			want: `cluster.yaml: document 2: error converting YAML to JSON: yaml: line 5: mapping values are not allowed in this context`,
		},
		{
			name: "a misspelt field in a pod's container -> the field's path",
			in:   "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  containers: [{name: c, imag: nginx}]\n",
			want: `cluster.yaml: document 1: Pod: unknown field "spec.containers[0].imag"`,
		},
		{
			name: "a key given twice in one mapping -> refused, not resolved to the last",
			in:   "apiVersion: v1\nkind: Node\nmetadata:\n  name: n1\n  name: n2\n",
			want: `cluster.yaml: document 1: error converting YAML to JSON: yaml: unmarshal errors: line 5: key "name" already set in map`,
		},
		{
			name: "the same pod twice -> duplicate named in the second document",
			in: "apiVersion: v1\nkind: Pod\nmetadata: {name: web-1}\n---\n" + node +
				"---\napiVersion: v1\nkind: Pod\nmetadata: {name: web-1, namespace: default}\n",
			want: `cluster.yaml: document 3: duplicate Pod default/web-1`,
		},
		{
			name: "no kind -> missing kind",
			in:   "apiVersion: v1\nmetadata: {name: n1}\n",
			want: `cluster.yaml: document 1: missing kind`,
		},
		{
			name: "a Node without apiVersion -> missing apiVersion with the one wanted",
			in:   "kind: Node\nmetadata: {name: n1}\n",
			want: `cluster.yaml: document 1: kind "Node": missing apiVersion (want v1)`,
		},
		{
			name: "a ReplicaSet in extensions/v1beta1 -> unsupported apiVersion",
			in:   "apiVersion: extensions/v1beta1\nkind: ReplicaSet\nmetadata: {name: rs}\n",
			want: `cluster.yaml: document 1: kind "ReplicaSet": unsupported apiVersion "extensions/v1beta1" (want apps/v1)`,
		},
		{
			name: "a SpreadPolicy in a version that does not exist -> unsupported apiVersion",
			in:   "apiVersion: spreadguard.io/v1\nkind: SpreadPolicy\nmetadata: {name: p}\n",
			want: `cluster.yaml: document 1: kind "SpreadPolicy": unsupported apiVersion "spreadguard.io/v1" (want spreadguard.io/v1alpha1)`,
		},
		{
			name: "a node without a name -> missing name",
			in:   "apiVersion: v1\nkind: Node\nmetadata: {labels: {a: b}}\n",
			want: `cluster.yaml: document 1: Node has no metadata.name`,
		},
		{
			name: "a node with a namespace -> cluster-scoped objects have none",
			in:   "apiVersion: v1\nkind: Node\nmetadata: {name: n1, namespace: shop}\n",
			want: `cluster.yaml: document 1: Node n1 is cluster-scoped but sets metadata.namespace "shop"`,
		},
		{
			name: "a kind that is not a string -> refused",
			in:   "apiVersion: v1\nkind: [Node]\n",
			want: `cluster.yaml: document 1: kind must be a string, got a list`,
		},
		{
			name: "a document that is a plain string -> not an object",
			in:   node + "---\nhello\n",
			want: `cluster.yaml: document 2: want an object with apiVersion and kind, got a string "hello"`,
		},
		{
			name: "a DaemonSet as the second item of a List -> the item named",
			in:   "apiVersion: v1\nkind: List\nitems:\n- {apiVersion: v1, kind: Node, metadata: {name: n1}}\n- {apiVersion: apps/v1, kind: DaemonSet, metadata: {name: d}}\n",
			want: `cluster.yaml: document 1: items[1]: unknown kind "DaemonSet" (want one of Node, Pod, Service, ReplicationController, ReplicaSet, StatefulSet, Namespace, SpreadPolicy, ClusterSpreadPolicy, NodeTemplate, NodePool, EC2NodeClass, NodeClass, ConfigMap, Deployment, or a v1 List)`,
		},
		{
			name: "a List inside a List -> refused",
			in:   "apiVersion: v1\nkind: List\nitems:\n- {apiVersion: v1, kind: List, items: []}\n",
			want: `cluster.yaml: document 1: items[0]: a List inside a List is not supported (0 items)`,
		},
		{
			name: "a List with an unknown field -> the field named",
			in:   "apiVersion: v1\nkind: List\nitem: []\n",
			want: `cluster.yaml: document 1: unknown field "item"`,
		},
		{
			name: "a second JSON object cut short -> invalid JSON with its line",
			in:   "{\"apiVersion\": \"v1\", \"kind\": \"Node\", \"metadata\": {\"name\": \"n1\"}}\n{\"apiVersion\": \"v1\",\n \"kind\" \"Node\"}\n",
			want: `cluster.yaml: document 2: invalid JSON at line 3: invalid character '"' after object key`,
		},
		{
			name: "a file with only comments -> no objects",
			in:   "# nothing here\n---\n",
			want: `cluster.yaml: no objects found`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := lookup.Decode("cluster.yaml", strings.NewReader(tt.in))
			if err == nil {
				t.Fatalf("Decode() = %d objects, want error %q", c.Len(), tt.want)
			}
			if diff := cmp.Diff(tt.want, err.Error()); diff != "" {
				t.Errorf("Decode() error (-want +got):\n%s", diff)
			}
			if strings.Contains(err.Error(), "\n") {
				t.Errorf("Decode() error spans lines: %q", err)
			}
		})
	}
}

func TestLoad(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "cluster.yaml")
	if err := os.WriteFile(good, []byte(everyKind), 0o600); err != nil {
		t.Fatal(err)
	}
	bad := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(bad, []byte("apiVersion: apps/v1\nkind: DaemonSet\n"), 0o600); err != nil {
		t.Fatal(err)
	}

	t.Run("an existing file -> its objects", func(t *testing.T) {
		c, err := lookup.Load(good)
		mustNot(t, err)
		if got, want := c.Len(), 10; got != want {
			t.Errorf("Load() holds %d objects, want %d", got, want)
		}
	})
	t.Run("a bad file -> the error names the path and document", func(t *testing.T) {
		_, err := lookup.Load(bad)
		var docErr *lookup.Error
		if !errors.As(err, &docErr) {
			t.Fatalf("Load() error = %v, want a *lookup.Error", err)
		}
		if diff := cmp.Diff(lookup.Error{File: bad, Document: 1, Item: -1}, *docErr,
			cmp.FilterPath(func(p cmp.Path) bool { return p.Last().String() == ".Err" }, cmp.Ignore())); diff != "" {
			t.Errorf("Load() error (-want +got):\n%s", diff)
		}
	})
	t.Run("a missing file -> the open error", func(t *testing.T) {
		_, err := lookup.Load(filepath.Join(dir, "missing.yaml"))
		want := "open " + filepath.Join(dir, "missing.yaml") + ": no such file or directory"
		if err == nil || err.Error() != want {
			t.Errorf("Load() error = %v, want %q", err, want)
		}
	})
}

func TestLookups(t *testing.T) {
	c, err := lookup.Decode("cluster.yaml", strings.NewReader(everyKind))
	mustNot(t, err)

	rc, err := lookup.NewSources(c).ReplicationController("shop", "old")
	mustNot(t, err)
	rs, err := lookup.NewSources(c).ReplicaSet("shop", "web-abc")
	mustNot(t, err)
	ss, err := lookup.NewSources(c).StatefulSet("shop", "db")
	mustNot(t, err)
	ns, err := lookup.NewSources(c).Namespace("shop")
	mustNot(t, err)
	if rc == nil || rs == nil || ss == nil || ns == nil {
		t.Fatalf("lookups of present objects: rc=%v rs=%v ss=%v ns=%v, want all set", rc, rs, ss, ns)
	}
	if got := ns.Labels[v1.LabelMetadataName]; got != "shop" {
		t.Errorf("namespace shop label %s = %q, want it set to the name as the apiserver does", v1.LabelMetadataName, got)
	}

	// Absent objects are (nil, nil): DefaultSelector then builds the
	// selector without them, as the scheduler does.
	absent := []struct {
		name string
		get  func() (any, error)
	}{
		{"a ReplicationController in another namespace", func() (any, error) { return lookup.NewSources(c).ReplicationController("default", "old") }},
		{"an unknown ReplicaSet", func() (any, error) { return lookup.NewSources(c).ReplicaSet("shop", "web-zzz") }},
		{"an unknown StatefulSet", func() (any, error) { return lookup.NewSources(c).StatefulSet("shop", "web") }},
		{"an undeclared Namespace", func() (any, error) { return lookup.NewSources(c).Namespace("default") }},
	}
	for _, a := range absent {
		t.Run(a.name+" -> nil, nil", func(t *testing.T) {
			got, err := a.get()
			mustNot(t, err)
			switch o := got.(type) {
			case *v1.ReplicationController:
				if o != nil {
					t.Errorf("got %s, want nil", o.Name)
				}
			case *appsv1.ReplicaSet:
				if o != nil {
					t.Errorf("got %s, want nil", o.Name)
				}
			case *appsv1.StatefulSet:
				if o != nil {
					t.Errorf("got %s, want nil", o.Name)
				}
			case *v1.Namespace:
				if o != nil {
					t.Errorf("got %s, want nil", o.Name)
				}
			default:
				t.Errorf("unexpected type %T", got)
			}
		})
	}
	if svcs, _ := lookup.NewSources(c).Services("default"); len(svcs) != 0 {
		t.Errorf("Services(default) = %d, want none", len(svcs))
	}
}

func TestNew(t *testing.T) {
	node := &v1.Node{}
	node.Name = "n1"
	pod := &v1.Pod{}
	pod.Name = "p"
	policy := &v1alpha1.SpreadPolicy{}
	policy.Name, policy.Namespace = "zones", "shop"

	t.Run("live objects of three kinds -> stored, the pod in default", func(t *testing.T) {
		c, err := lookup.NewStore(node, pod, policy)
		mustNot(t, err)
		want := contents{Nodes: []string{"n1"}, Pods: []string{"default/p"}, SpreadPolicies: []string{"shop/zones"}}
		if diff := cmp.Diff(want, summarize(t, c, "shop")); diff != "" {
			t.Errorf("New() contents (-want +got):\n%s", diff)
		}
		if got := c.Objects(); len(got) != 3 || got[0] != node || got[1] != pod || got[2] != policy {
			t.Errorf("Objects() = %v, want node, pod, policy in the order added", got)
		}
	})
	t.Run("the same node twice -> duplicate", func(t *testing.T) {
		_, err := lookup.NewStore(node, node)
		if want := "object 2: duplicate Node n1"; err == nil || err.Error() != want {
			t.Errorf("New() error = %v, want %q", err, want)
		}
	})
	t.Run("a DaemonSet -> unsupported type", func(t *testing.T) {
		_, err := lookup.NewStore(&appsv1.DaemonSet{})
		want := "object 1: unsupported object type *v1.DaemonSet (want one of Node, Pod, Service, ReplicationController, ReplicaSet, StatefulSet, Namespace, SpreadPolicy, ClusterSpreadPolicy, NodeTemplate, NodePool, EC2NodeClass, NodeClass, ConfigMap, Deployment, or a v1 List)"
		if err == nil || err.Error() != want {
			t.Errorf("New() error = %v, want %q", err, want)
		}
	})
}

func TestDecodePod(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    string // namespace/name of the pod
		wantErr string
	}{
		{
			name: "one pod without namespace -> the pod, in default",
			in:   "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec: {containers: [{name: c, image: i}]}\n",
			want: "default/p",
		},
		{
			name: "one pod with only generateName -> accepted, as the apiserver names it later",
			in:   "apiVersion: v1\nkind: Pod\nmetadata: {generateName: web-, namespace: shop}\n",
			want: "shop/",
		},
		{
			name:    "two pods -> exactly one wanted",
			in:      "apiVersion: v1\nkind: Pod\nmetadata: {name: a}\n---\napiVersion: v1\nkind: Pod\nmetadata: {name: b}\n",
			wantErr: "pod.yaml: want exactly one Pod, found 2 objects",
		},
		{
			name:    "a Service -> not a pod",
			in:      "apiVersion: v1\nkind: Service\nmetadata: {name: s}\n",
			wantErr: "pod.yaml: want exactly one Pod, found a Service",
		},
		{
			name:    "a pod without any name -> refused",
			in:      "apiVersion: v1\nkind: Pod\nmetadata: {namespace: shop}\n",
			wantErr: "pod.yaml: document 1: pod has neither metadata.name nor metadata.generateName",
		},
		{
			name:    "a pod with an unknown field -> the field named",
			in:      "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec: {topologySpreadConstraint: []}\n",
			wantErr: `pod.yaml: document 1: Pod: unknown field "spec.topologySpreadConstraint"`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pod, err := lookup.DecodePod("pod.yaml", strings.NewReader(tt.in))
			if tt.wantErr != "" {
				if err == nil || err.Error() != tt.wantErr {
					t.Fatalf("DecodePod() error = %v, want %q", err, tt.wantErr)
				}
				return
			}
			mustNot(t, err)
			if got := pod.Namespace + "/" + pod.Name; got != tt.want {
				t.Errorf("DecodePod() = %s, want %s", got, tt.want)
			}
		})
	}
}
