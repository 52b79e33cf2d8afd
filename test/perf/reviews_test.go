package perf

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"

	jsonpatch "github.com/evanphx/json-patch/v5"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/spreadguard/spreadguard/pkg/apis/spreadguard/v1alpha1"
	webhookserver "github.com/spreadguard/spreadguard/pkg/server"
	"github.com/spreadguard/spreadguard/test/perf/fixture"
)

// distinctReviews is how many different pods the client cycles through per
// webhook: enough to spread over namespaces and workloads, few enough to
// build in a moment.
const distinctReviews = 512

// expectation is what every answer of a run must be.
type expectation string

const (
	// expectPatched: allowed, with a JSONPatch (the constraints injected).
	expectPatched expectation = "patched"
	// expectChecked: allowed without a message, so counted and feasible
	// (a pod the validator skipped is allowed with the reason).
	expectChecked expectation = "checked"
	// expectAllowed: allowed; the canned baseline's answer.
	expectAllowed expectation = "allowed"
)

// reviewResponse is the part of an AdmissionReview response the client
// checks.
type reviewResponse struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Response   *struct {
		UID       string         `json:"uid"`
		Allowed   bool           `json:"allowed"`
		Patch     []byte         `json:"patch"`
		PatchType *string        `json:"patchType"`
		Result    *metav1.Status `json:"status"`
		Warnings  []string       `json:"warnings"`
	} `json:"response"`
}

// check returns why resp (to a request with uid) is not what want says, or
// nil.
func (want expectation) check(status int, body []byte, uid string) (*reviewResponse, error) {
	if status != http.StatusOK {
		return nil, fmt.Errorf("HTTP %d: %s", status, strings.TrimSpace(string(body)))
	}
	var r reviewResponse
	if err := json.Unmarshal(body, &r); err != nil {
		return nil, fmt.Errorf("decoding the response: %w", err)
	}
	resp := r.Response
	switch {
	case r.APIVersion != "admission.k8s.io/v1" || r.Kind != "AdmissionReview" || resp == nil:
		return nil, fmt.Errorf("not an AdmissionReview v1 response: %.200s", body)
	case want != expectAllowed && resp.UID != uid:
		return nil, fmt.Errorf("response uid %q, want %q", resp.UID, uid)
	case !resp.Allowed:
		return nil, fmt.Errorf("denied: %.300s", body)
	case want == expectPatched && (resp.PatchType == nil || *resp.PatchType != "JSONPatch" || len(resp.Patch) == 0):
		return nil, fmt.Errorf("allowed without a JSONPatch: %.300s", body)
	case want == expectChecked && (resp.Patch != nil || resp.Result != nil && resp.Result.Message != ""):
		return nil, fmt.Errorf("not checked, or with a patch: %.300s", body)
	}
	return &r, nil
}

// reviews are the request bodies for one server.
type reviews struct {
	// mutate are CREATEs of new replicas as the mutating webhook gets them.
	mutate [][]byte
	// validate are the same pods after the mutation, as the validating
	// webhook gets them.
	validate [][]byte
}

// uidOf returns the request uid of an AdmissionReview body.
func uidOf(body []byte) (string, error) {
	var r struct {
		Request struct {
			UID string `json:"uid"`
		} `json:"request"`
	}
	if err := json.Unmarshal(body, &r); err != nil {
		return "", err
	}
	return r.Request.UID, nil
}

// post sends one review to the server and returns the HTTP status and body.
func post(client *http.Client, url string, body []byte) (int, []byte, error) {
	req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, */*")
	resp, err := client.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	return resp.StatusCode, out, err
}

// newClient is an HTTPS client with the apiserver's TLS settings and one
// keep-alive connection per worker.
func newClient(caFile string, workers int) (*http.Client, error) {
	tlsCfg, err := clientTLS(caFile)
	if err != nil {
		return nil, err
	}
	return &http.Client{Transport: &http.Transport{
		TLSClientConfig:     tlsCfg,
		MaxIdleConnsPerHost: workers,
		MaxConnsPerHost:     workers,
		DisableCompression:  true,
		// A custom TLS configuration already keeps the transport on
		// HTTP/1.1; the server offers nothing else either.
		ForceAttemptHTTP2: false,
	}}, nil
}

// buildReviews builds the bodies for s: each mutate review is sent once to
// the server and its patch applied, which gives the validate review of the
// same pod exactly as the validating webhook would see it. Every answer is
// checked, so a server that injects nothing or counts nothing fails here.
func buildReviews(s *server) (*reviews, error) {
	client, err := newClient(s.caFile, 1)
	if err != nil {
		return nil, err
	}
	defer client.CloseIdleConnections()
	c := s.cluster
	out := &reviews{}
	for k := range distinctReviews {
		w := k * 7919 % c.Workloads()
		pod := c.IncomingPod(w)
		raw, err := json.Marshal(pod)
		if err != nil {
			return nil, err
		}
		body, err := fixture.AdmissionReviewOf(raw, pod.Namespace, "", 2*k)
		if err != nil {
			return nil, err
		}
		uid, _ := uidOf(body)
		status, answer, err := post(client, s.url+webhookserver.PathMutatePod, body)
		if err != nil {
			return nil, fmt.Errorf("mutating %s: %w", pod.GenerateName, err)
		}
		r, err := expectPatched.check(status, answer, uid)
		if err != nil {
			return nil, fmt.Errorf("mutating %s: %w", pod.GenerateName, err)
		}
		patch, err := jsonpatch.DecodePatch(r.Response.Patch)
		if err != nil {
			return nil, fmt.Errorf("decoding the patch for %s: %w", pod.GenerateName, err)
		}
		mutatedRaw, err := patch.Apply(raw)
		if err != nil {
			return nil, fmt.Errorf("applying the patch for %s: %w", pod.GenerateName, err)
		}
		var mutated v1.Pod
		if err := json.Unmarshal(mutatedRaw, &mutated); err != nil {
			return nil, err
		}
		if n := len(mutated.Spec.TopologySpreadConstraints); n != 2 || mutated.Annotations[v1alpha1.AnnotationPolicy] != fixture.PolicyName {
			return nil, fmt.Errorf("mutated %s has %d constraints and policy %q, want 2 and %q",
				pod.GenerateName, n, mutated.Annotations[v1alpha1.AnnotationPolicy], fixture.PolicyName)
		}
		vbody, err := fixture.AdmissionReviewOf(mutatedRaw, pod.Namespace, "", 2*k+1)
		if err != nil {
			return nil, err
		}
		vuid, _ := uidOf(vbody)
		status, answer, err = post(client, s.url+webhookserver.PathValidatePod, vbody)
		if err != nil {
			return nil, fmt.Errorf("validating %s: %w", pod.GenerateName, err)
		}
		if _, err := expectChecked.check(status, answer, vuid); err != nil {
			return nil, fmt.Errorf("validating %s: %w", pod.GenerateName, err)
		}
		out.mutate = append(out.mutate, body)
		out.validate = append(out.validate, vbody)
	}
	if err := checkCounted(client, s); err != nil {
		return nil, err
	}
	return out, nil
}

// checkCounted proves the index counted the pods of the last workload
// streamed: refusedPod is refused only if it did.
func checkCounted(client *http.Client, s *server) error {
	c := s.cluster
	body, err := fixture.AdmissionReview(refusedPod(c), 1<<40)
	if err != nil {
		return err
	}
	status, answer, err := post(client, s.url+webhookserver.PathValidatePod, body)
	if err != nil {
		return fmt.Errorf("validating the pod that must be refused: %w", err)
	}
	_, err = expectAllowed.check(status, answer, "")
	if err == nil {
		return fmt.Errorf("a pod of %s limited to its %d nodes, which each run a replica, was allowed: "+
			"the index did not count that workload's pods", c.App(c.Workloads()-1), c.Replicas)
	}
	if !strings.HasPrefix(err.Error(), "denied") {
		return fmt.Errorf("validating the pod that must be refused: %w", err)
	}
	return nil
}

// refusedPod is a new replica of the last workload that must land on one of
// that workload's own nodes, with maxSkew 1 per node: every such node
// counts a replica already while the global minimum (some other node's) is
// 0, so it is unsatisfiable exactly when those replicas were counted.
func refusedPod(c fixture.Cluster) *v1.Pod {
	w := c.Workloads() - 1
	pod := c.IncomingPod(w)
	var hosts []string
	for r := range c.Replicas {
		hosts = append(hosts, c.NodeName(c.NodeOf(w, r)))
	}
	pod.Spec.Affinity = &v1.Affinity{NodeAffinity: &v1.NodeAffinity{
		RequiredDuringSchedulingIgnoredDuringExecution: &v1.NodeSelector{NodeSelectorTerms: []v1.NodeSelectorTerm{{
			MatchExpressions: []v1.NodeSelectorRequirement{{Key: v1.LabelHostname, Operator: v1.NodeSelectorOpIn, Values: hosts}},
		}}},
	}}
	ignore := v1.NodeInclusionPolicyIgnore
	pod.Spec.TopologySpreadConstraints = []v1.TopologySpreadConstraint{{
		MaxSkew: 1, TopologyKey: v1.LabelHostname, WhenUnsatisfiable: v1.DoNotSchedule,
		LabelSelector:      &metav1.LabelSelector{MatchLabels: map[string]string{"app": c.App(w)}},
		NodeAffinityPolicy: &ignore,
	}}
	return pod
}

// writeBodies writes bodies one per line (JSON has no raw newline) for the
// load generator.
func writeBodies(dir, name string, bodies [][]byte) (string, error) {
	path := filepath.Join(dir, name)
	var buf bytes.Buffer
	for _, b := range bodies {
		if bytes.IndexByte(b, '\n') >= 0 {
			return "", errors.New("a review body contains a newline")
		}
		buf.Write(b)
		buf.WriteByte('\n')
	}
	return path, os.WriteFile(path, buf.Bytes(), 0o600)
}
