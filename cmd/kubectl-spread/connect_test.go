package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const kubeconfig = `apiVersion: v1
kind: Config
clusters:
- name: dev
  cluster: {server: "https://127.0.0.1:6443"}
users:
- name: dev
  user: {token: not-a-secret}
contexts:
- name: dev
  context: {cluster: dev, user: dev}
- name: shop
  context: {cluster: dev, user: dev, namespace: shop}
current-context: dev
`

func TestConnect(t *testing.T) {
	path := filepath.Join(t.TempDir(), "config")
	if err := os.WriteFile(path, []byte(kubeconfig), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name          string
		context       string
		wantNamespace string
	}{
		{"the current context, which names no namespace -> default", "", "default"},
		{"--context shop, whose namespace is shop -> shop, used when -n is not given", "shop", "shop"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := connect(path, tt.context)
			if err != nil {
				t.Fatal(err)
			}
			if c.namespace != tt.wantNamespace || c.reader == nil {
				t.Errorf("connect() = namespace %q, reader %v; want %q and a reader", c.namespace, c.reader, tt.wantNamespace)
			}
		})
	}

	t.Run("a --kubeconfig that does not exist -> one-line error, exit 2", func(t *testing.T) {
		missing := filepath.Join(t.TempDir(), "nope")
		got := runCommand(t, "explain", "deployment/web", "--kubeconfig", missing)
		if got.code != exitBadInput || !strings.HasPrefix(got.stderr, "kubectl-spread: loading the kubeconfig: ") ||
			!strings.Contains(got.stderr, missing) || strings.Count(got.stderr, "\n") != 1 {
			t.Errorf("run() = exit %d, stderr %q; want 2 and one line naming %s", got.code, got.stderr, missing)
		}
	})
}
