##@ Scripts

.PHONY: test-hack
test-hack: ## Check the hack/ scripts' shared library and state handling (no cluster needed).
	@for t in hack/lib/*_test.sh; do echo "$$t"; bash "$$t"; done

TEST_TARGETS += test-hack
