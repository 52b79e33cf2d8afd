// Package e2e is spreadguard's end-to-end suite. It runs against any cluster
// with spreadguard installed, reached through KUBECONFIG, and asserts where
// the real kube-scheduler placed pods, not only what the webhook stored.
//
// The tests are behind the build tag e2e, in a module of their own (so that
// the root module does not require cert-manager for them), which replaces
// github.com/spreadguard/spreadguard with the checkout it sits in:
//
//	cd test/e2e && KUBECONFIG=... go test -tags e2e -count=1 ./...
//
// `make e2e` starts a local cluster (hack/local-cluster.sh), runs the webhook
// and installs the chart before it runs them; `make e2e-kind` does the same
// on kind. See docs/e2e.md for the environment variables the suite reads.
package e2e
