//go:build integration

package integration

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	v1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	crcache "sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/spreadguard/spreadguard/pkg/autoscale"
	"github.com/spreadguard/spreadguard/pkg/cache"
	"github.com/spreadguard/spreadguard/pkg/spread/spreadtest"
)

// nodeGroupLabel is the suite webhook's --node-group-label: the nodes of
// a test that carry it are a node group cluster-autoscaler can grow.
const nodeGroupLabel = "integration.spreadguard.io/nodegroup"

// caStatus is cluster-autoscaler's status ConfigMap key in namespace ns,
// its YAML status naming node group group at target size of max.
func caStatus(key types.NamespacedName, group string, target, max int) *v1.ConfigMap {
	return &v1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name},
		Data: map[string]string{autoscale.ClusterAutoscalerStatusKey: fmt.Sprintf(`time: "%s"
autoscalerStatus: Running
nodeGroups:
- name: %s
  health: {status: Healthy, cloudProviderTarget: %d, minSize: 1, maxSize: %d}
`, time.Now().UTC(), group, target, max)},
	}
}

// TestANodeGroupAtItsMaximumTurnsAWarningIntoADenial runs the suite's
// webhook, which reads cluster-autoscaler's status at its default place,
// kube-system/cluster-autoscaler-status. The test's node group has a node
// in zone a, cordoned during an upgrade, and one in zone b holding a pod;
// a pod spreading over zones and counting the cordoned node
// (nodeTaintsPolicy Ignore) fits only a new node of the group in zone a.
// It is admitted with a warning while cluster-autoscaler can grow the
// group, denied once its status says the group is at its maximum, and
// admitted again once it has room. The group's nodes, and so its
// templates, carry a taint only the test's pod tolerates: no other test's
// pod fits them.
func TestANodeGroupAtItsMaximumTurnsAWarningIntoADenial(t *testing.T) {
	ns := newNamespace(t, "nodegroup")
	for _, zone := range []string{"a", "b"} {
		n := spreadtest.MakeNode().Name(ns+"-"+zone).Zone(ns+"-"+zone).Label(nodeGroupLabel, ns).
			Taint(nodeGroupLabel, ns, v1.TaintEffectNoSchedule)
		if zone == "a" {
			n = n.Cordoned()
		}
		createNode(t, n.Obj())
		cleanup(t, n.Obj())
	}
	create(t, podObj(spreadtest.MakePod().Namespace(ns).Name("web-b").Label("app", "web").Node(ns+"-b")))
	incoming := podObj(spreadtest.MakePod().Namespace(ns).Name("web-new").Label("app", "web").NodeSelector(nodeGroupLabel, ns).
		Toleration(nodeGroupLabel, v1.TolerationOpEqual, ns, v1.TaintEffectNoSchedule).
		SpreadConstraint(spreadtest.Constraint(1, v1.LabelTopologyZone).MatchLabel("app", "web").NodeTaintsPolicy(v1.NodeInclusionPolicyIgnore).Obj()))

	c, warnings := clientWithWarnings(t)
	admitted := func(ctx context.Context) (bool, error) {
		err := c.Create(ctx, incoming.DeepCopy(), client.DryRunAll)
		return err == nil && warnings.contains("a new node that an autoscaler can add in zone "+ns+"-a would"), err
	}
	eventually(t, "with no status, the pod is admitted: a new node of the group in zone a would take it", admitted)

	key := types.NamespacedName{Namespace: "kube-system", Name: autoscale.ClusterAutoscalerStatusName}
	status := caStatus(key, ns, 3, 3)
	create(t, status)
	cleanup(t, status)
	eventually(t, "once cluster-autoscaler's status says the group is at its maximum, the pod is denied", func(ctx context.Context) (bool, error) {
		err := suite.client.Create(ctx, incoming.DeepCopy(), client.DryRunAll)
		return apierrors.IsForbidden(err), err
	})

	if err := suite.client.Update(t.Context(), caStatus(key, ns, 3, 5)); err != nil {
		t.Fatalf("updating cluster-autoscaler's status: %v", err)
	}
	eventually(t, "once the status gives the group room, the pod is admitted again", admitted)
}

// TestClusterAutoscalersStatusIsWatchedByNameWithItsRoleAlone holds the
// chart's Role for cluster-autoscaler's status (cache.NamedReadRule: get,
// list and watch on that one name) to what the webhook's informer of it
// (cache.WatchNamed) asks a real API server: with that Role alone, the
// informer syncs, holds that ConfigMap and no other of its namespace, and
// hears of its updates; a list without the field selector is forbidden.
func TestClusterAutoscalersStatusIsWatchedByNameWithItsRoleAlone(t *testing.T) {
	ns := newNamespace(t, "castatus")
	key := types.NamespacedName{Namespace: ns, Name: "cluster-autoscaler-status"}
	create(t, caStatus(key, "web", 3, 6))
	create(t, &v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "other"}, Data: map[string]string{"secret": "not for spreadguard"}})

	configMaps, _ := cache.KindFor(v1.SchemeGroupVersion.WithKind("ConfigMap"))
	create(t, &v1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "webhook"}})
	create(t, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "status"},
		Rules: []rbacv1.PolicyRule{cache.NamedReadRule(configMaps, key)}})
	create(t, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "status"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "status"},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: "webhook"}}})
	cs, err := kubernetes.NewForConfig(suite.restConfig)
	if err != nil {
		t.Fatal(err)
	}
	tr, err := cs.CoreV1().ServiceAccounts(ns).CreateToken(t.Context(), "webhook", &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("requesting a token: %v", err)
	}
	restricted := rest.AnonymousClientConfig(suite.restConfig)
	restricted.BearerToken = tr.Status.Token

	direct, err := client.New(restricted, client.Options{Scheme: suite.scheme})
	if err != nil {
		t.Fatal(err)
	}
	if err := direct.List(t.Context(), &v1.ConfigMapList{}, client.InNamespace(ns)); !apierrors.IsForbidden(err) {
		t.Errorf("listing the namespace's ConfigMaps without the field selector: %v, want forbidden", err)
	}

	opts := crcache.Options{Scheme: suite.scheme, ReaderFailOnMissingInformer: true}
	cache.WatchNamed(&opts, &v1.ConfigMap{}, key)
	informers, err := crcache.New(restricted, opts)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := informers.GetInformer(t.Context(), &v1.ConfigMap{}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	go func() { _ = informers.Start(ctx) }()
	syncCtx, cancelSync := context.WithTimeout(ctx, propagation)
	defer cancelSync()
	if !informers.WaitForCacheSync(syncCtx) {
		t.Fatal("the informer of cluster-autoscaler's status did not sync with the Role alone")
	}
	var held v1.ConfigMapList
	if err := informers.List(ctx, &held); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, cm := range held.Items {
		names = append(names, cm.Namespace+"/"+cm.Name)
	}
	if want := key.String(); len(names) != 1 || names[0] != want {
		t.Errorf("the informer holds %q, want only %s", names, want)
	}

	if err := suite.client.Update(t.Context(), caStatus(key, "web", 6, 6)); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the informer hears of the status's update", func(ctx context.Context) (bool, error) {
		var cm v1.ConfigMap
		if err := informers.Get(ctx, key, &cm); err != nil {
			return false, err
		}
		return strings.Contains(cm.Data[autoscale.ClusterAutoscalerStatusKey], "cloudProviderTarget: 6"), nil
	})
}
