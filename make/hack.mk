##@ Scripts

.PHONY: test-hack
test-hack: ## Check the hack/ scripts' shared library and state handling (no cluster needed).
	@for t in hack/lib/*_test.sh; do echo "$$t"; bash "$$t"; done

# The binaries that go into an image: kind's node image (kubelet, kubeadm,
# kube-proxy, pause) and control-plane images (etcd, the control plane,
# CoreDNS), cert-manager's images and the webhook's. None of those images
# has a dynamic loader, so each must be static (hack/static). make test
# builds the control plane and etcd and so always checks those; the others
# are checked when a kind build has left them in bin/.
IMAGE_BINARIES := etcd kube-apiserver kube-controller-manager kube-scheduler kubectl \
	kubelet kubeadm kube-proxy coredns pause \
	cert-manager-controller cert-manager-cainjector cert-manager-webhook linux/spreadguard-webhook

.PHONY: check-static
check-static: $(ETCD) $(KUBE_APISERVER) $(KUBE_CONTROLLER_MANAGER) $(KUBE_SCHEDULER) $(KUBECTL) ## Fail, naming it, when a binary in bin/ meant for an image is dynamically linked.
	@files=(); for f in $(addprefix $(BIN)/,$(IMAGE_BINARIES)); do [[ ! -e $$f ]] || files+=("$$f"); done; \
	  echo "checking $${#files[@]} binaries: $${files[*]#$(BIN)/}"; \
	  $(GO) run ./hack/static "$${files[@]}"

TEST_TARGETS += test-hack check-static
