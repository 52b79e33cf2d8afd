##@ Integration

# The integration tests start etcd and kube-apiserver (built from source into
# ./bin) once per package with controller-runtime's envtest, run the webhook
# in-process and register it through real webhook configurations.
.PHONY: test-integration
test-integration: $(ETCD) $(KUBE_APISERVER) ## Run the webhook against a real kube-apiserver and etcd (envtest).
	KUBEBUILDER_ASSETS=$(BIN) $(GO) test -tags integration -count=1 ./test/integration/...

TEST_TARGETS += test-integration
