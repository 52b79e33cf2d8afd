package perf

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/webhook"
	ctrladmission "sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/spreadguard/spreadguard/pkg/admission"
	webhookserver "github.com/spreadguard/spreadguard/pkg/server"
	"github.com/spreadguard/spreadguard/test/perf/fixture"
)

// workers is how many requests are in flight at once: one keep-alive
// connection each, as kube-apiserver keeps to a webhook it calls for
// several pod creations at a time.
const workers = 4

// BenchmarkAdmissionHTTPS measures the webhook server end to end: the
// composition root of cmd/webhook with its informer caches and index
// filled, TLS with the production settings, and AdmissionReview v1 bodies
// of new Deployment replicas (about 9.5 KiB each) sent by a client process.
// The mutating webhook injects the cluster policy's zone and hostname
// constraints; the validating one counts them over every node. Each op is
// one review. Two baselines, each the same client against controller-
// runtime's webhook server with the production TLS settings: one answers
// every review with a canned response without reading it, the cost of
// HTTPS and HTTP alone on this machine; the other (decode-and-answer)
// serves the mutating endpoint's admission.Endpoint, which decodes the
// review with its pod, and answers a fixed patch: the floor of any webhook
// that reads the pod it patches.
func BenchmarkAdmissionHTTPS(b *testing.B) {
	for _, nodes := range benchSizes {
		c := fixture.New(nodes)
		for _, hook := range []struct {
			name, path string
			expect     expectation
			bodies     func(*prepared) string
		}{
			{"mutate", webhookserver.PathMutatePod, expectPatched, func(p *prepared) string { return p.mutateBodies }},
			{"validate", webhookserver.PathValidatePod, expectChecked, func(p *prepared) string { return p.validateBodies }},
		} {
			b.Run(fmt.Sprintf("%s/webhook=%s/workers=%d", c, hook.name, workers), func(b *testing.B) {
				p := prepare(b, nodes)
				runLoad(b, loadConfig{URL: p.srv.url + hook.path, CAFile: p.srv.caFile, Bodies: hook.bodies(p),
					Workers: workers, Expect: hook.expect})
			})
		}
	}
	b.Run(fmt.Sprintf("baseline=canned-response/workers=%d", workers), func(b *testing.B) {
		p := prepare(b, benchSizes[0])
		url := baselineServer(b, p.dir) + pathCanned
		runLoad(b, loadConfig{URL: url, CAFile: p.srv.caFile, Bodies: p.mutateBodies, Workers: workers, Expect: expectAllowed})
	})
	b.Run(fmt.Sprintf("baseline=decode-and-answer/workers=%d", workers), func(b *testing.B) {
		p := prepare(b, benchSizes[0])
		url := baselineServer(b, p.dir) + pathDecodeAndAnswer
		runLoad(b, loadConfig{URL: url, CAFile: p.srv.caFile, Bodies: p.mutateBodies, Workers: workers, Expect: expectPatched})
	})
}

// The baseline server's paths.
const (
	pathCanned          = "/canned"
	pathDecodeAndAnswer = "/decode-and-answer"
)

// cannedResponse allows everything, without reading what it allows.
const cannedResponse = `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","response":{"uid":"canned","allowed":true}}` + "\n"

// fixedPatch is the decode-and-answer baseline's answer: the policy
// annotation and two constraints like the fixture policy's, the size of the
// mutating webhook's patch of a fixture pod.
var fixedPatch = []byte(`[{"op":"add","path":"/metadata/annotations/spreadguard.io~1policy","value":"default"},` +
	`{"op":"add","path":"/spec/topologySpreadConstraints","value":[` +
	`{"maxSkew":1,"topologyKey":"topology.kubernetes.io/zone","whenUnsatisfiable":"DoNotSchedule",` +
	`"labelSelector":{"matchLabels":{"app":"web"}},"matchLabelKeys":["pod-template-hash"]},` +
	`{"maxSkew":1,"topologyKey":"kubernetes.io/hostname","whenUnsatisfiable":"DoNotSchedule",` +
	`"labelSelector":{"matchLabels":{"app":"web"}},"matchLabelKeys":["pod-template-hash"]}]}]`)

// decodeAndAnswer is the handler of the decode-and-answer baseline: behind
// the pod endpoints' admission.Endpoint, which has decoded the review with
// its pod, it answers fixedPatch.
type decodeAndAnswer struct{}

func (decodeAndAnswer) Handle(_ context.Context, req ctrladmission.Request) ctrladmission.Response {
	if req.Object.Object == nil {
		return ctrladmission.Errored(http.StatusBadRequest, errors.New("the pod was not decoded with the review"))
	}
	patchType := admissionv1.PatchTypeJSONPatch
	return ctrladmission.Response{AdmissionResponse: admissionv1.AdmissionResponse{
		Allowed: true, Patch: fixedPatch, PatchType: &patchType}}
}

var baseline struct {
	sync.Once
	url string
	err error
}

// baselineServer starts, once, controller-runtime's webhook server with the
// production TLS settings and the certificates in dir, serving the canned
// response and the decode-and-answer endpoint; it returns its URL.
func baselineServer(b *testing.B, dir string) string {
	b.Helper()
	baseline.Do(func() {
		port, err := freePort()
		if err != nil {
			baseline.err = err
			return
		}
		srv := webhook.NewServer(webhook.Options{
			Host: "127.0.0.1", Port: port, CertDir: dir,
			TLSOpts: []func(*tls.Config){func(c *tls.Config) {
				c.MinVersion = tls.VersionTLS12
				c.NextProtos = []string{"http/1.1"}
			}},
		})
		srv.Register(pathCanned, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.Copy(io.Discard, r.Body)
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, cannedResponse)
		}))
		// As the server's mutating endpoint is served (server.Endpoints).
		srv.Register(pathDecodeAndAnswer, admission.NewEndpoint(decodeAndAnswer{}, logr.Discard(),
			admission.ForResource(metav1.GroupVersionResource{Version: "v1", Resource: "pods"}, true),
			admission.WithMaxBodyBytes(admission.MaxCreateReviewBytes)))
		// It serves until the process ends.
		go func() {
			if err := srv.Start(context.Background()); err != nil {
				fmt.Fprintln(os.Stderr, "baseline server:", err)
			}
		}()
		deadline := time.Now().Add(time.Minute)
		for srv.StartedChecker()(nil) != nil {
			if time.Now().After(deadline) {
				baseline.err = fmt.Errorf("the baseline server did not start on port %d", port)
				return
			}
			time.Sleep(10 * time.Millisecond)
		}
		baseline.url = fmt.Sprintf("https://127.0.0.1:%d", port)
	})
	if baseline.err != nil {
		b.Fatal(baseline.err)
	}
	return baseline.url
}
