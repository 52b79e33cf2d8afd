package admission

import (
	"fmt"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	sigsjson "sigs.k8s.io/json"

	"github.com/spreadguard/spreadguard/pkg/spread"
	"github.com/spreadguard/spreadguard/pkg/spread/spreadtest"
)

// benchPod is a Deployment's pod of about 8 KiB once encoded, the size the
// apiserver sends for a typical workload: two containers with environment,
// probes and mounts, projected and ConfigMap volumes, and the managedFields
// the apiserver has added by the time the webhook sees the pod.
func benchPod(tb testing.TB) *v1.Pod {
	tb.Helper()
	pod := webPod().Label("pod-template-hash", "7d9f8c6b5").Label("app.kubernetes.io/version", "1.42.0").
		Annotation("kubectl.kubernetes.io/restartedAt", "2026-01-02T03:04:05Z").
		Annotation("prometheus.io/scrape", "true").Obj()
	pod.GenerateName = "web-7d-"
	var env []v1.EnvVar
	for i := range 24 {
		env = append(env, v1.EnvVar{Name: fmt.Sprintf("WEB_SETTING_%02d", i), Value: fmt.Sprintf("value-of-setting-%02d", i)})
	}
	env = append(env, v1.EnvVar{Name: "POD_IP", ValueFrom: &v1.EnvVarSource{FieldRef: &v1.ObjectFieldSelector{FieldPath: "status.podIP"}}})
	probe := &v1.Probe{ProbeHandler: v1.ProbeHandler{HTTPGet: &v1.HTTPGetAction{Path: "/healthz", Port: intstr.FromString("http")}},
		PeriodSeconds: 10, TimeoutSeconds: 1, SuccessThreshold: 1, FailureThreshold: 3}
	container := func(name, image string) v1.Container {
		return v1.Container{
			Name: name, Image: image, Args: []string{"--port=8080", "--log-format=json"},
			Ports: []v1.ContainerPort{{Name: "http", ContainerPort: 8080, Protocol: v1.ProtocolTCP}},
			Env:   env,
			Resources: v1.ResourceRequirements{
				Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse("250m"), v1.ResourceMemory: resource.MustParse("256Mi")},
				Limits:   v1.ResourceList{v1.ResourceMemory: resource.MustParse("512Mi")},
			},
			VolumeMounts: []v1.VolumeMount{
				{Name: "config", MountPath: "/etc/web", ReadOnly: true},
				{Name: "kube-api-access-x7k2p", MountPath: "/var/run/secrets/kubernetes.io/serviceaccount", ReadOnly: true},
			},
			LivenessProbe: probe, ReadinessProbe: probe,
			TerminationMessagePath: v1.TerminationMessagePathDefault, TerminationMessagePolicy: v1.TerminationMessageReadFile,
			ImagePullPolicy: v1.PullIfNotPresent,
		}
	}
	pod.Spec.InitContainers = []v1.Container{container("migrate", "registry.example.com/shop/migrate:1.42.0")}
	pod.Spec.InitContainers[0].LivenessProbe, pod.Spec.InitContainers[0].ReadinessProbe = nil, nil
	pod.Spec.Containers = []v1.Container{container("web", "registry.example.com/shop/web:1.42.0"),
		container("sidecar", "registry.example.com/shop/sidecar:3.1.4")}
	expiry := int64(3607)
	pod.Spec.Volumes = []v1.Volume{
		{Name: "config", VolumeSource: v1.VolumeSource{ConfigMap: &v1.ConfigMapVolumeSource{
			LocalObjectReference: v1.LocalObjectReference{Name: "web-config"}}}},
		{Name: "kube-api-access-x7k2p", VolumeSource: v1.VolumeSource{Projected: &v1.ProjectedVolumeSource{Sources: []v1.VolumeProjection{
			{ServiceAccountToken: &v1.ServiceAccountTokenProjection{Path: "token", ExpirationSeconds: &expiry}},
			{ConfigMap: &v1.ConfigMapProjection{LocalObjectReference: v1.LocalObjectReference{Name: "kube-root-ca.crt"},
				Items: []v1.KeyToPath{{Key: "ca.crt", Path: "ca.crt"}}}},
			{DownwardAPI: &v1.DownwardAPIProjection{Items: []v1.DownwardAPIVolumeFile{
				{Path: "namespace", FieldRef: &v1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "metadata.namespace"}}}}},
		}}}},
	}
	pod.Spec.ServiceAccountName = "web"
	pod.Spec.Tolerations = []v1.Toleration{
		{Key: v1.TaintNodeNotReady, Operator: v1.TolerationOpExists, Effect: v1.TaintEffectNoExecute},
		{Key: v1.TaintNodeUnreachable, Operator: v1.TolerationOpExists, Effect: v1.TaintEffectNoExecute},
	}
	pod.ManagedFields = []metav1.ManagedFieldsEntry{{
		Manager: "kube-controller-manager", Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "v1",
		FieldsType: "FieldsV1", FieldsV1: metav1.NewFieldsV1(`{"f:metadata":{"f:generateName":{},"f:labels":{".":{},` +
			`"f:app":{},"f:pod-template-hash":{}},"f:ownerReferences":{".":{},"k:{\"uid\":\"\"}":{}}},"f:spec":{"f:containers":` +
			`{"k:{\"name\":\"web\"}":{".":{},"f:args":{},"f:env":{".":{}},"f:image":{},"f:imagePullPolicy":{},"f:livenessProbe":{},` +
			`"f:name":{},"f:ports":{},"f:readinessProbe":{},"f:resources":{},"f:volumeMounts":{}},"k:{\"name\":\"sidecar\"}":{".":{},` +
			`"f:image":{},"f:name":{}}},"f:serviceAccountName":{},"f:volumes":{".":{},"k:{\"name\":\"config\"}":{}}}}`),
	}}
	if size := len(mustJSON(pod)); size < 7<<10 || size > 9<<10 {
		tb.Fatalf("test setup: the pod is %d bytes, want about 8 KiB", size)
	}
	return pod
}

func BenchmarkPodMutatorHandle(b *testing.B) {
	b.Run("pod=8KiB", func(b *testing.B) {
		req := makeRequest().Pod(benchPod(b)).Obj()
		h := &PodMutator{
			PodWebhook: PodWebhook{Sources: staticSources(shopSources()), Config: testEngineConfig},
		}
		b.ReportAllocs()
		for b.Loop() {
			resp := h.Handle(b.Context(), req)
			if err := resp.Complete(req); err != nil || len(resp.Patch) == 0 {
				b.Fatalf("want a patch, got allowed=%v result=%v err=%v", resp.Allowed, resp.Result, err)
			}
		}
	})
}

func BenchmarkPodValidatorHandle(b *testing.B) {
	b.Run("pod=8KiB", func(b *testing.B) {
		hard := spreadtest.Constraint(1, v1.LabelTopologyZone).DoNotSchedule().MatchLabel("app", "web").Obj()
		pod := benchPod(b)
		pod.Spec.TopologySpreadConstraints = []v1.TopologySpreadConstraint{hard}
		req := makeRequest().Pod(pod).Obj()
		// The check itself is measured by pkg/spread's benchmarks; a fixed
		// answer leaves the handler's own cost.
		h := &PodValidator{
			PodWebhook: PodWebhook{Sources: staticSources(shopSources()), Config: testEngineConfig},
			Checker:    &fakeChecker{result: &spread.Result{Verdict: spread.VerdictFeasible, FeasibleCount: 1}},
			Synced:     func() bool { return true },
		}
		b.ReportAllocs()
		for b.Loop() {
			resp := h.Handle(b.Context(), req)
			if err := resp.Complete(req); err != nil || !resp.Allowed {
				b.Fatalf("want an allowance, got allowed=%v result=%v err=%v", resp.Allowed, resp.Result, err)
			}
		}
	})
}

// BenchmarkUnmarshalPodBaseline is the floor for both handlers: one decode
// of the same pod into its Go type, nothing else.
func BenchmarkUnmarshalPodBaseline(b *testing.B) {
	b.Run("pod=8KiB", func(b *testing.B) {
		req := makeRequest().Pod(benchPod(b)).Obj()
		b.ReportAllocs()
		for b.Loop() {
			pod := &v1.Pod{}
			if err := sigsjson.UnmarshalCaseSensitivePreserveInts(req.Object.Raw, pod); err != nil {
				b.Fatal(err)
			}
		}
	})
}
