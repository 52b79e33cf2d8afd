##@ Integration

# The integration tests start etcd and kube-apiserver (built from source into
# ./bin) once per package with controller-runtime's envtest, run the webhook
# in-process and register it through real webhook configurations. Karpenter's
# CRDs (copied from its module next to its kwok provider) are installed too,
# so that the webhook reads NodePools as it does in a cluster that runs it,
# and the EC2NodeClass CRD of Karpenter's AWS provider (copied from its
# module), whose status gives a NodePool its zones.
INTEGRATION_PREREQUISITES := $(ETCD) $(KUBE_APISERVER) $(KARPENTER) $(KARPENTER_AWS_CRDS)

.PHONY: test-integration
test-integration: $(INTEGRATION_PREREQUISITES) ## Run the webhook against a real kube-apiserver and etcd (envtest).
	KUBEBUILDER_ASSETS=$(BIN) KARPENTER_CRDS=$(BIN)/karpenter-crds KARPENTER_AWS_CRDS=$(BIN)/karpenter-aws-crds \
	  $(GO) test $(GO_TEST_VET) -tags integration -count=1 ./test/integration/...

TEST_TARGETS += test-integration
