package perf

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"os"
	"sync"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/webhook"

	"github.com/spreadguard/spreadguard/cmd/webhook/app"
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
// one review. The baseline is the same client against a server that
// answers every review with a canned response: the cost of HTTPS and
// HTTP alone on this machine.
func BenchmarkAdmissionHTTPS(b *testing.B) {
	for _, nodes := range benchSizes {
		c := fixture.New(nodes)
		for _, hook := range []struct {
			name, path string
			expect     expectation
			bodies     func(*prepared) string
		}{
			{"mutate", app.PathMutatePod, expectPatched, func(p *prepared) string { return p.mutateBodies }},
			{"validate", app.PathValidatePod, expectChecked, func(p *prepared) string { return p.validateBodies }},
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
		url := cannedServer(b, p.dir)
		runLoad(b, loadConfig{URL: url, CAFile: p.srv.caFile, Bodies: p.mutateBodies, Workers: workers, Expect: expectAllowed})
	})
}

// cannedResponse allows everything, without reading what it allows.
const cannedResponse = `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","response":{"uid":"canned","allowed":true}}` + "\n"

var canned struct {
	sync.Once
	url string
	err error
}

// cannedServer starts, once, controller-runtime's webhook server with the
// production TLS settings and the certificates in dir, serving only the
// canned response.
func cannedServer(b *testing.B, dir string) string {
	b.Helper()
	canned.Do(func() {
		port, err := freePort()
		if err != nil {
			canned.err = err
			return
		}
		srv := webhook.NewServer(webhook.Options{
			Host: "127.0.0.1", Port: port, CertDir: dir,
			TLSOpts: []func(*tls.Config){func(c *tls.Config) {
				c.MinVersion = tls.VersionTLS12
				c.NextProtos = []string{"http/1.1"}
			}},
		})
		srv.Register("/canned", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.Copy(io.Discard, r.Body)
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, cannedResponse)
		}))
		// It serves until the process ends.
		go func() {
			if err := srv.Start(context.Background()); err != nil {
				fmt.Fprintln(os.Stderr, "canned server:", err)
			}
		}()
		deadline := time.Now().Add(time.Minute)
		for srv.StartedChecker()(nil) != nil {
			if time.Now().After(deadline) {
				canned.err = fmt.Errorf("the canned server did not start on port %d", port)
				return
			}
			time.Sleep(10 * time.Millisecond)
		}
		canned.url = fmt.Sprintf("https://127.0.0.1:%d/canned", port)
	})
	if canned.err != nil {
		b.Fatal(canned.err)
	}
	return canned.url
}
