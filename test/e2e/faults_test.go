//go:build e2e

package e2e

import (
	"context"
	"crypto/tls"
	"fmt"
	"net/url"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/spreadguard/spreadguard/pkg/apis/spreadguard/v1alpha1"
	"github.com/spreadguard/spreadguard/pkg/spread/spreadtest"
)

const (
	// envWebhookURL is the webhook's address when it runs as a local
	// process; envRenewCertCmd renews its serving certificate on disk, as
	// cert-manager does. The renewal scenario needs both.
	envWebhookURL   = "SPREADGUARD_E2E_WEBHOOK_URL"
	envRenewCertCmd = "SPREADGUARD_E2E_RENEW_CERT_CMD"
)

// loadResult counts what a stream of pod creates met.
type loadResult struct {
	sent, failed, unmutated, slow int64
}

// createStream dry-runs pods selected by the Service "load" at rate per
// second for d: each must be admitted and mutated, which proves the API
// server reached the webhook (under failurePolicy Ignore a failed call
// would admit the pod unmutated). A create slower than slowAfter counts as
// slow.
func (f *framework) createStream(ctx context.Context, rate int, d, slowAfter time.Duration) loadResult {
	var r loadResult
	var wg sync.WaitGroup
	tick := time.NewTicker(time.Second / time.Duration(rate))
	defer tick.Stop()
	deadline := time.Now().Add(d)
	for i := 0; time.Now().Before(deadline); i++ {
		<-tick.C
		wg.Add(1)
		go func() {
			defer wg.Done()
			atomic.AddInt64(&r.sent, 1)
			start := time.Now()
			p, err := f.dryRunCreate(ctx, k8s, pod(spreadtest.MakePod().Name(fmt.Sprintf("load-%d", i)).Label("app", "load")))
			if time.Since(start) > slowAfter {
				atomic.AddInt64(&r.slow, 1)
			}
			switch {
			case err != nil:
				atomic.AddInt64(&r.failed, 1)
				f.t.Logf("create %d failed: %v", i, err)
			case p.Annotations[policyAnnotation] == "":
				atomic.AddInt64(&r.unmutated, 1)
			}
		}()
	}
	wg.Wait()
	return r
}

// servedSerial is the serial number of the certificate the webhook presents.
func servedSerial(t *testing.T, webhookURL string) string {
	t.Helper()
	u, err := url.Parse(webhookURL)
	if err != nil {
		t.Fatal(err)
	}
	// Only the certificate is read; the API server verifies it for real.
	conn, err := tls.Dial("tcp", u.Host, &tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS12}) //nolint:gosec
	if err != nil {
		t.Fatalf("TLS to %s: %v", u.Host, err)
	}
	defer conn.Close()
	return conn.ConnectionState().PeerCertificates[0].SerialNumber.String()
}

func certificateRenewedUnderLoad(t *testing.T) {
	webhookURL := os.Getenv(envWebhookURL)
	if webhookURL == "" || os.Getenv(envRenewCertCmd) == "" {
		t.Skipf("%s/%s unset: the serving certificate is not on this machine's disk", envWebhookURL, envRenewCertCmd)
	}
	f := newFramework(t)
	f.create(makeSpreadPolicy("zones").Constraint(spreadtest.Constraint(1, zoneKey).DoNotSchedule()).Action(v1alpha1.ActionDeny).Obj())
	f.create(service(spreadtest.MakeService().Name("load").Selector("app", "load")))
	f.create(service(spreadtest.MakeService().Name("probe").Selector("e2e-probe", "true")))
	f.eventually(policyChangeTimeout, "the webhook is serving", f.serving)
	before := servedSerial(t, webhookURL)

	const rate, duration = 20, 6 * time.Second
	renewed := make(chan error, 1)
	go func() {
		time.Sleep(duration / 3)
		renewed <- runHook(t.Context(), t, envRenewCertCmd)
	}()
	r := f.createStream(t.Context(), rate, duration, time.Second)
	if err := <-renewed; err != nil {
		t.Fatal(err)
	}
	t.Logf("serving certificate renewed under %d creates/s for %s: %d creates, %d failed, %d admitted without the webhook, %d slower than 1s",
		rate, duration, r.sent, r.failed, r.unmutated, r.slow)
	if r.failed != 0 || r.unmutated != 0 {
		t.Errorf("%d creates failed and %d missed the webhook while its certificate was renewed, want none", r.failed, r.unmutated)
	}
	f.eventually(10*time.Second, "the webhook presents the renewed certificate without a restart", func(context.Context) error {
		if after := servedSerial(t, webhookURL); after == before {
			return fmt.Errorf("still serial %s", before)
		}
		return nil
	})
}
