package autoscale_test

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	karpenterv1 "github.com/spreadguard/spreadguard/pkg/apis/karpenter/v1"
	nodeclassv1 "github.com/spreadguard/spreadguard/pkg/apis/nodeclass/v1"
	"github.com/spreadguard/spreadguard/pkg/autoscale"
	"github.com/spreadguard/spreadguard/pkg/spread/spreadtest"
)

// migURL is the status name of GKE's managed instance group mig in zone.
func migURL(zone, mig string) string {
	return "https://www.googleapis.com/compute/v1/projects/prod/zones/" + zone + "/instanceGroups/" + mig
}

// nodeClaimWrapper builds a *karpenterv1.NodeClaim. Start with
// makeNodeClaim.
type nodeClaimWrapper struct{ karpenterv1.NodeClaim }

// makeNodeClaim returns a builder for NodeClaim name of NodePool pool, with
// no condition yet (as Karpenter creates it).
func makeNodeClaim(name, pool string) *nodeClaimWrapper {
	w := &nodeClaimWrapper{}
	w.Name = name
	w.Labels = map[string]string{karpenterv1.NodePoolLabelKey: pool}
	return w
}

func (w *nodeClaimWrapper) Obj() *karpenterv1.NodeClaim { return w.NodeClaim.DeepCopy() }

// Label sets a label, as the cloud provider does once launched.
func (w *nodeClaimWrapper) Label(k, v string) *nodeClaimWrapper {
	w.Labels[k] = v
	return w
}

// Requirement adds one spec.requirements entry.
func (w *nodeClaimWrapper) Requirement(key string, op v1.NodeSelectorOperator, values ...string) *nodeClaimWrapper {
	w.Spec.Requirements = append(w.Spec.Requirements, karpenterv1.NodeSelectorRequirementWithMinValues{Key: key, Operator: op, Values: values})
	return w
}

// Condition sets condition t.
func (w *nodeClaimWrapper) Condition(t string, status metav1.ConditionStatus, reason, message string) *nodeClaimWrapper {
	w.Status.Conditions = append(w.Status.Conditions, metav1.Condition{Type: t, Status: status, Reason: reason, Message: message})
	return w
}

// Launched sets Launched True.
func (w *nodeClaimWrapper) Launched() *nodeClaimWrapper {
	return w.Condition(karpenterv1.ConditionTypeLaunched, metav1.ConditionTrue, "Launched", "")
}

// Up sets Launched, Registered and Initialized True.
func (w *nodeClaimWrapper) Up() *nodeClaimWrapper {
	return w.Launched().Condition(karpenterv1.ConditionTypeRegistered, metav1.ConditionTrue, "Registered", "").
		Condition(karpenterv1.ConditionTypeInitialized, metav1.ConditionTrue, "Initialized", "")
}

// Deleting sets metadata.deletionTimestamp.
func (w *nodeClaimWrapper) Deleting() *nodeClaimWrapper {
	w.DeletionTimestamp = ptr.To(metav1.Unix(1, 0))
	return w
}

func TestZoneCapacitySaysPerZoneWhichSourcesCanAddTryOrFailed(t *testing.T) {
	const (
		eksLabel = "eks.amazonaws.com/nodegroup"
		gkeLabel = "cloud.google.com/gke-nodepool"
	)
	node := func(name, zone string, kv ...string) *v1.Node {
		w := spreadtest.MakeNode().Name(name).Zone(zone)
		for i := 0; i+1 < len(kv); i += 2 {
			w = w.Label(kv[i], kv[i+1])
		}
		return w.Obj()
	}
	// Karpenter's NodePool general, over zones a, b and c.
	general := makeNodePool("general").Zones("a", "b", "c").Obj()
	abc := []*v1.Node{node("n-a", "a"), node("n-b", "b"), node("n-c", "c")}
	pool := func(name string, state autoscale.SourceState, reason, message string) autoscale.Source {
		return autoscale.Source{Kind: autoscale.SourceNodePool, Name: name, State: state, Reason: reason, Message: message}
	}
	canAdd := func(kind autoscale.SourceKind, name string) autoscale.Source {
		return autoscale.Source{Kind: kind, Name: name, State: autoscale.CanAdd}
	}
	zone := func(z string, sources ...autoscale.Source) autoscale.ZoneSources {
		return autoscale.ZoneSources{Zone: z, Sources: sources}
	}
	generalIn := func(c autoscale.ZoneSources) autoscale.Capacity {
		out := autoscale.Capacity{}
		for _, z := range []string{"a", "b", "c"} {
			out[z] = zone(z, canAdd(autoscale.SourceNodePool, "general"))
		}
		out[c.Zone] = c
		return out
	}

	eksStatus, err := autoscale.ParseClusterAutoscalerStatus(readStatus(t, "cluster-autoscaler-status.yaml"))
	if err != nil {
		t.Fatalf("parsing the EKS status: %v", err)
	}
	gkeStatus, err := autoscale.ParseClusterAutoscalerStatus(readStatus(t, "cluster-autoscaler-status-scaleup.yaml"))
	if err != nil {
		t.Fatalf("parsing the GKE status: %v", err)
	}
	gkeNodes := []*v1.Node{
		node("web-b", "europe-west1-b", gkeLabel, "web"),
		node("web-c", "europe-west1-c", gkeLabel, "web"),
		node("web-d", "europe-west1-d", gkeLabel, "web"),
	}
	// The EKS status has web at 6 of 6, batch in backoff at 1 of 10.
	eksNodes := []*v1.Node{
		node("web-a", "a", eksLabel, "web"), node("web-b", "b", eksLabel, "web"),
		node("batch-a", "a", eksLabel, "batch"),
	}

	tests := []struct {
		name string
		in   autoscale.CapacityInputs
		want autoscale.Capacity
		// zone's Trying, Failed and Wait.
		zone                 string
		trying, failed, wait bool
	}{
		{
			name: "a NodeClaim of general in zone c not yet launched -> general is trying in c, and can add in a and b",
			in: autoscale.CapacityInputs{Inputs: autoscale.Inputs{Nodes: abc, NodePools: []*karpenterv1.NodePool{general}},
				NodeClaims: []*karpenterv1.NodeClaim{makeNodeClaim("general-x1", "general").Requirement(v1.LabelTopologyZone, v1.NodeSelectorOpIn, "c").Obj()}},
			want: generalIn(zone("c", pool("general", autoscale.Trying, autoscale.ReasonLaunching, "NodeClaim general-x1 is launching"))),
			zone: "c", trying: true, wait: true,
		},
		{
			name: "a NodeClaim launched in c whose node has not registered -> trying, registering",
			in: autoscale.CapacityInputs{Inputs: autoscale.Inputs{Nodes: abc, NodePools: []*karpenterv1.NodePool{general}},
				NodeClaims: []*karpenterv1.NodeClaim{makeNodeClaim("general-x1", "general").Label(v1.LabelTopologyZone, "c").Launched().Obj()}},
			want: generalIn(zone("c", pool("general", autoscale.Trying, autoscale.ReasonRegistering, "NodeClaim general-x1 is registering"))),
			zone: "c", trying: true, wait: true,
		},
		{
			name: "a launch error Karpenter retries (Launched Unknown, LaunchFailed) -> still trying, with the error",
			in: autoscale.CapacityInputs{Inputs: autoscale.Inputs{Nodes: abc, NodePools: []*karpenterv1.NodePool{general}},
				NodeClaims: []*karpenterv1.NodeClaim{makeNodeClaim("general-x1", "general").Requirement(v1.LabelTopologyZone, v1.NodeSelectorOpIn, "c").
					Condition(karpenterv1.ConditionTypeLaunched, metav1.ConditionUnknown, "LaunchFailed", "creating instance: throttled").Obj()}},
			want: generalIn(zone("c", pool("general", autoscale.Trying, autoscale.ReasonLaunching, "NodeClaim general-x1 is launching: creating instance: throttled"))),
			zone: "c", trying: true, wait: true,
		},
		{
			name: "a NodeClaim in c whose node is up, and one launched being deleted (a disruption) -> general can add, no attempt",
			in: autoscale.CapacityInputs{Inputs: autoscale.Inputs{Nodes: abc, NodePools: []*karpenterv1.NodePool{general}},
				NodeClaims: []*karpenterv1.NodeClaim{
					makeNodeClaim("general-x1", "general").Label(v1.LabelTopologyZone, "c").Up().Obj(),
					makeNodeClaim("general-x2", "general").Label(v1.LabelTopologyZone, "c").Launched().Deleting().Obj(),
				}},
			want: generalIn(zone("c", canAdd(autoscale.SourceNodePool, "general"))),
			zone: "c", wait: true,
		},
		{
			name: "a NodeClaim in c with Launched False, InsufficientCapacity -> general failed in c, the only source there",
			in: autoscale.CapacityInputs{Inputs: autoscale.Inputs{Nodes: abc, NodePools: []*karpenterv1.NodePool{general}},
				NodeClaims: []*karpenterv1.NodeClaim{makeNodeClaim("general-x1", "general").Requirement(v1.LabelTopologyZone, v1.NodeSelectorOpIn, "c").
					Condition(karpenterv1.ConditionTypeLaunched, metav1.ConditionFalse, "InsufficientCapacity", "no m5.large in c").Obj()}},
			want: generalIn(zone("c", pool("general", autoscale.Failed, "InsufficientCapacity", "NodeClaim general-x1: no m5.large in c"))),
			zone: "c", failed: true,
		},
		{
			name: "a NodeClaim in c being deleted before it launched (Karpenter v1.15 on insufficient capacity) -> general failed in c",
			in: autoscale.CapacityInputs{Inputs: autoscale.Inputs{Nodes: abc, NodePools: []*karpenterv1.NodePool{general}},
				NodeClaims: []*karpenterv1.NodeClaim{makeNodeClaim("general-x1", "general").Requirement(v1.LabelTopologyZone, v1.NodeSelectorOpIn, "c").Deleting().Obj()}},
			want: generalIn(zone("c", pool("general", autoscale.Failed, autoscale.ReasonDeletedBeforeLaunch, "NodeClaim general-x1 is being deleted before it launched"))),
			zone: "c", failed: true,
		},
		{
			name: "Karpenter's InsufficientCapacityError event of general in c -> general failed in c only",
			in: autoscale.CapacityInputs{Inputs: autoscale.Inputs{Nodes: abc, NodePools: []*karpenterv1.NodePool{general}},
				Events: []autoscale.Event{{Reason: autoscale.EventInsufficientCapacityError, NodePool: "general", Zone: "c", Message: "NodeClaim general-x1 event: insufficient capacity"}}},
			want: generalIn(zone("c", pool("general", autoscale.Failed, autoscale.EventInsufficientCapacityError, "NodeClaim general-x1 event: insufficient capacity"))),
			zone: "c", failed: true,
		},
		{
			name: "a new NodeClaim in c after an InsufficientCapacityError there -> trying again: the attempt outranks the failure",
			in: autoscale.CapacityInputs{Inputs: autoscale.Inputs{Nodes: abc, NodePools: []*karpenterv1.NodePool{general}},
				NodeClaims: []*karpenterv1.NodeClaim{makeNodeClaim("general-x2", "general").Requirement(v1.LabelTopologyZone, v1.NodeSelectorOpIn, "c").Obj()},
				Events:     []autoscale.Event{{Reason: autoscale.EventInsufficientCapacityError, NodePool: "general", Zone: "c"}}},
			want: generalIn(zone("c", pool("general", autoscale.Trying, autoscale.ReasonLaunching, "NodeClaim general-x2 is launching"))),
			zone: "c", trying: true, wait: true,
		},
		{
			name: "Karpenter's FailedScheduling on the pod -> every NodePool failed in every zone",
			in: autoscale.CapacityInputs{Inputs: autoscale.Inputs{Nodes: abc, NodePools: []*karpenterv1.NodePool{general}},
				Events: []autoscale.Event{{Reason: autoscale.EventFailedScheduling, Message: "Failed to schedule pod, incompatible with nodepool \"general\""}}},
			want: autoscale.Capacity{
				"a": zone("a", pool("general", autoscale.Failed, autoscale.EventFailedScheduling, "Failed to schedule pod, incompatible with nodepool \"general\"")),
				"b": zone("b", pool("general", autoscale.Failed, autoscale.EventFailedScheduling, "Failed to schedule pod, incompatible with nodepool \"general\"")),
				"c": zone("c", pool("general", autoscale.Failed, autoscale.EventFailedScheduling, "Failed to schedule pod, incompatible with nodepool \"general\"")),
			},
			zone: "a", failed: true,
		},
		{
			name: "a GKE zonal group in backoff (ZONE_RESOURCE_POOL_EXHAUSTED) in c, one scaling up in b, one unhealthy in d -> failed in c and d, trying in b",
			in:   autoscale.CapacityInputs{Inputs: autoscale.Inputs{Nodes: gkeNodes, NodeGroupLabel: gkeLabel, ClusterAutoscaler: gkeStatus}},
			want: autoscale.Capacity{
				"europe-west1-b": zone("europe-west1-b", autoscale.Source{Kind: autoscale.SourceNodeGroup, Name: "web", State: autoscale.Trying, Reason: autoscale.ReasonScaleUpInProgress,
					Message: migURL("europe-west1-b", "gke-prod-web-1a2b3c4d-grp") + ": scale-up in progress (3 of max 5)"}),
				"europe-west1-c": zone("europe-west1-c", autoscale.Source{Kind: autoscale.SourceNodeGroup, Name: "web", State: autoscale.Failed, Reason: autoscale.ReasonBackoff,
					Message: migURL("europe-west1-c", "gke-prod-web-5e6f7a8b-grp") + ": in backoff after a failed scale-up: ZONE_RESOURCE_POOL_EXHAUSTED The zone 'projects/prod/zones/europe-west1-c' does not have enough resources available to fulfill the request."}),
				"europe-west1-d": zone("europe-west1-d", autoscale.Source{Kind: autoscale.SourceNodeGroup, Name: "web", State: autoscale.Failed, Reason: autoscale.ReasonUnhealthy,
					Message: migURL("europe-west1-d", "gke-prod-web-9c0d1e2f-grp") + ": unhealthy, so not scaled up"}),
			},
			zone: "europe-west1-c", failed: true,
		},
		{
			name: "an EKS group at its maximum (6 of 6), which yields no template -> still its zones' source, failed with MaxSize; batch in backoff fails in a too",
			in:   autoscale.CapacityInputs{Inputs: autoscale.Inputs{Nodes: eksNodes, NodeGroupLabel: eksLabel, ClusterAutoscaler: eksStatus}},
			want: autoscale.Capacity{
				"a": zone("a",
					autoscale.Source{Kind: autoscale.SourceNodeGroup, Name: "batch", State: autoscale.Failed, Reason: autoscale.ReasonBackoff,
						Message: "eks-batch-0b1c2d3e-4f50-6172-8394-a5b6c7d8e9f0: in backoff after a failed scale-up: InsufficientInstanceCapacity We currently do not have sufficient capacity in the Availability Zone you requested."},
					autoscale.Source{Kind: autoscale.SourceNodeGroup, Name: "web", State: autoscale.Failed, Reason: autoscale.ReasonMaxSize,
						Message: "eks-web-7ec2a5b4-1d5e-4d5a-b3b0-2c6a1b4c9f70: at its maximum size (6 of max 6)"}),
				"b": zone("b", autoscale.Source{Kind: autoscale.SourceNodeGroup, Name: "web", State: autoscale.Failed, Reason: autoscale.ReasonMaxSize,
					Message: "eks-web-7ec2a5b4-1d5e-4d5a-b3b0-2c6a1b4c9f70: at its maximum size (6 of max 6)"}),
			},
			zone: "b", failed: true,
		},
		{
			name: "a node group below its maximum with no status word, and cluster-autoscaler's NotTriggerScaleUp on the pod -> failed, while the NodeTemplate there can still add",
			in: autoscale.CapacityInputs{Inputs: autoscale.Inputs{Nodes: []*v1.Node{node("ng-a", "a", eksLabel, "spare")}, NodeGroupLabel: eksLabel,
				Declared: []autoscale.Declared{{Name: "gpu-a", Labels: map[string]string{v1.LabelTopologyZone: "a"}}}},
				Events: []autoscale.Event{{Reason: autoscale.EventNotTriggerScaleUp, Message: "pod didn't trigger scale-up: 1 max node group size reached"}}},
			want: autoscale.Capacity{"a": zone("a",
				autoscale.Source{Kind: autoscale.SourceNodeGroup, Name: "spare", State: autoscale.Failed, Reason: autoscale.EventNotTriggerScaleUp, Message: "pod didn't trigger scale-up: 1 max node group size reached"},
				canAdd(autoscale.SourceNodeTemplate, "gpu-a"))},
			zone: "a", wait: true,
		},
		{
			name: "zone d, listed by the operator, that no source serves -> in the result with no source: nothing to wait for, and not failed",
			in:   autoscale.CapacityInputs{Inputs: autoscale.Inputs{Nodes: abc, NodePools: []*karpenterv1.NodePool{general}, Zones: []string{"a", "b", "c", "d"}}},
			want: func() autoscale.Capacity {
				c := generalIn(zone("c", canAdd(autoscale.SourceNodePool, "general")))
				c["d"] = zone("d")
				return c
			}(),
			zone: "d",
		},
		{
			name: "two NodePools in c, spot's NodeClaim failed and general can still add -> c is not failed, and waits",
			in: autoscale.CapacityInputs{Inputs: autoscale.Inputs{Nodes: abc, NodePools: []*karpenterv1.NodePool{general, makeNodePool("spot").Zones("c").Obj()}},
				NodeClaims: []*karpenterv1.NodeClaim{makeNodeClaim("spot-x1", "spot").Requirement(v1.LabelTopologyZone, v1.NodeSelectorOpIn, "c").
					Condition(karpenterv1.ConditionTypeLaunched, metav1.ConditionFalse, "InsufficientCapacity", "").Obj()}},
			want: generalIn(zone("c", canAdd(autoscale.SourceNodePool, "general"),
				pool("spot", autoscale.Failed, "InsufficientCapacity", "NodeClaim spot-x1"))),
			zone: "c", wait: true,
		},
		{
			name: "zone IDs: a NodePool over an EC2NodeClass whose subnets say them, and a NodeClaim that requires usw2-az3 only -> trying in us-west-2c, found by its ID",
			in: autoscale.CapacityInputs{Inputs: autoscale.Inputs{
				NodePools: []*karpenterv1.NodePool{makeNodePool("general").EC2NodeClass("default").Obj()},
				NodeClasses: []autoscale.NodeClass{{Group: nodeclassv1.EC2GroupName, Kind: nodeclassv1.KindEC2NodeClass, Name: "default",
					Zones: []string{"us-west-2a", "us-west-2c"}, ZoneIDs: map[string]string{"us-west-2a": "usw2-az1", "us-west-2c": "usw2-az3"}}},
			}, NodeClaims: []*karpenterv1.NodeClaim{makeNodeClaim("general-x1", "general").Requirement(nodeclassv1.LabelTopologyZoneID, v1.NodeSelectorOpIn, "usw2-az3").Obj()}},
			want: autoscale.Capacity{
				"us-west-2a": {Zone: "us-west-2a", ZoneID: "usw2-az1", Sources: []autoscale.Source{canAdd(autoscale.SourceNodePool, "general")}},
				"us-west-2c": {Zone: "us-west-2c", ZoneID: "usw2-az3", Sources: []autoscale.Source{pool("general", autoscale.Trying, autoscale.ReasonLaunching, "NodeClaim general-x1 is launching")}},
			},
			zone: "us-west-2c", trying: true, wait: true,
		},
		{
			name: "zone IDs: a launched NodeClaim's labels say a zone and ID no node or template has -> that zone with its ID, general trying there",
			in: autoscale.CapacityInputs{Inputs: autoscale.Inputs{Nodes: abc, NodePools: []*karpenterv1.NodePool{general}},
				NodeClaims: []*karpenterv1.NodeClaim{makeNodeClaim("general-x1", "general").Label(v1.LabelTopologyZone, "e").Label(nodeclassv1.LabelTopologyZoneID, "use1-az5").Launched().Obj()}},
			want: func() autoscale.Capacity {
				c := generalIn(zone("c", canAdd(autoscale.SourceNodePool, "general")))
				c["e"] = autoscale.ZoneSources{Zone: "e", ZoneID: "use1-az5", Sources: []autoscale.Source{pool("general", autoscale.Trying, autoscale.ReasonRegistering, "NodeClaim general-x1 is registering")}}
				return c
			}(),
			zone: "e", trying: true, wait: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := autoscale.ZoneCapacity(tt.in)
			if err != nil {
				t.Fatalf("ZoneCapacity: %v", err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("capacity (-want +got):\n%s", diff)
			}
			z, ok := got[tt.zone]
			if !ok {
				t.Fatalf("no zone %s in the result", tt.zone)
			}
			want := [3]bool{tt.trying, tt.failed, tt.wait}
			if gotFlags := [3]bool{z.Trying(), z.Failed(), z.Wait()}; gotFlags != want {
				t.Errorf("zone %s: Trying, Failed, Wait = %v, want %v", tt.zone, gotFlags, want)
			}
			if z.ZoneID != "" {
				byID, ok := got.ZoneID(z.ZoneID)
				if diff := cmp.Diff(z, byID); !ok || diff != "" {
					t.Errorf("ZoneID(%s) = %v (-want +got):\n%s", z.ZoneID, ok, diff)
				}
			}
		})
	}
}

func TestZoneCapacityRefusesAnEventReasonItDoesNotRead(t *testing.T) {
	_, err := autoscale.ZoneCapacity(autoscale.CapacityInputs{Events: []autoscale.Event{{Reason: "FailedCreate"}}})
	if err == nil || !strings.Contains(err.Error(), `event reason "FailedCreate"`) {
		t.Errorf("error = %v, want one naming the reason FailedCreate", err)
	}
}
