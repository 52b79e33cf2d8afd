package server

import (
	"crypto/tls"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

func TestCountHandshakes(t *testing.T) {
	tests := []struct {
		name string
		// requests per connection, one connection each
		connections []int
		want        int
	}{
		{name: "one connection kept alive for three requests costs one handshake", connections: []int{3}, want: 1},
		{name: "three connections of one request each cost three handshakes", connections: []int{1, 1, 1}, want: 3},
		{name: "no connection costs nothing", want: 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			reg := prometheus.NewRegistry()
			opt, err := countHandshakes(reg)
			if err != nil {
				t.Fatal(err)
			}
			srv := httptest.NewUnstartedServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
			srv.TLS = &tls.Config{}
			opt(srv.TLS)
			srv.StartTLS()
			defer srv.Close()
			for _, n := range tt.connections {
				get(t, srv, n)
			}
			want := fmt.Sprintf(`# HELP spreadguard_webhook_tls_handshakes_total TLS handshakes begun by the admission server (one per new connection).
# TYPE spreadguard_webhook_tls_handshakes_total counter
spreadguard_webhook_tls_handshakes_total %d
`, tt.want)
			if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "spreadguard_webhook_tls_handshakes_total"); err != nil {
				t.Error(err)
			}
		})
	}
}

// get sends n requests to srv over one new connection.
func get(t *testing.T, srv *httptest.Server, n int) {
	t.Helper()
	c := srv.Client()
	defer c.CloseIdleConnections()
	for range n {
		resp, err := c.Get(srv.URL)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
}
