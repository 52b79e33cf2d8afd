##@ Lint

STATICCHECK_STAMP := $(BIN)/.stamps/staticcheck-$(STATICCHECK_VERSION)
# Every Go module of the repository: the root and the nested test modules
# (parity, chart, e2e), each linted and tidied on its own. hack/kind-without-registry/cert-manager's
# go.mod only fences off mains that build inside a copy of cert-manager's
# module (hack/build-binaries.sh cert-manager), so it is not one of them.
GO_MODULES := $(patsubst ./%,%,$(patsubst %/go.mod,%,$(shell find . -name go.mod -not -path './bin/*' -not -path './hack/kind-without-registry/cert-manager/*')))
# The build tags of the suites that are compiled only on demand, so that
# vet and staticcheck read them too.
LINT_TAGS := e2e,integration

$(STATICCHECK_STAMP):
	@mkdir -p $(BIN)/.stamps
	GOBIN=$(BIN) $(GO) install honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION)
	@touch $@

.PHONY: staticcheck
staticcheck: $(STATICCHECK_STAMP) ## Build the pinned staticcheck into ./bin.

.PHONY: lint
lint: $(STATICCHECK_STAMP) ## Check every Go module with gofmt, go vet and staticcheck, that go.mod/go.sum are tidy and that the modules agree on their dependencies' versions.
	@unformatted=$$(gofmt -l $$(git ls-files '*.go')); \
	if [ -n "$$unformatted" ]; then \
	  echo "gofmt would change these files (run 'gofmt -w' on them):" >&2; \
	  echo "$$unformatted" >&2; gofmt -d $$unformatted >&2; exit 1; \
	fi
	@# One version of each dependency across the modules: a cold machine
	@# then compiles, vets and analyses it once, not once per module.
	TAGS=$(LINT_TAGS) hack/check-module-versions.sh $(GO_MODULES)
	@for m in $(GO_MODULES); do \
	  echo "go vet + staticcheck: $$m"; \
	  ( cd "$$m" && $(GO) vet -tags $(LINT_TAGS) ./... && $(BIN)/staticcheck -tags $(LINT_TAGS) ./... ) || exit 1; \
	done
	@# go mod tidy rewrites go.mod/go.sum in place: run it on the real files
	@# and put the originals back whatever happens, so the check leaves the
	@# tree as it found it and fails with the diff.
	@for m in $(GO_MODULES); do \
	  echo "go mod tidy: $$m"; \
	  tmp=$$(mktemp -d); \
	  cp "$$m/go.mod" "$$tmp/go.mod"; [ ! -e "$$m/go.sum" ] || cp "$$m/go.sum" "$$tmp/go.sum"; \
	  if ( cd "$$m" && $(GO) mod tidy ) >"$$tmp/tidy.log" 2>&1; then tidy=0; else tidy=1; fi; \
	  cp "$$m/go.mod" "$$tmp/go.mod.tidy"; \
	  if [ -e "$$m/go.sum" ]; then cp "$$m/go.sum" "$$tmp/go.sum.tidy"; else : >"$$tmp/go.sum.tidy"; fi; \
	  cp "$$tmp/go.mod" "$$m/go.mod"; \
	  if [ -e "$$tmp/go.sum" ]; then cp "$$tmp/go.sum" "$$m/go.sum"; else rm -f "$$m/go.sum"; touch "$$tmp/go.sum"; fi; \
	  if [ $$tidy -ne 0 ]; then echo "go mod tidy failed in $$m:" >&2; cat "$$tmp/tidy.log" >&2; rm -rf "$$tmp"; exit 1; fi; \
	  if ! diff -u "$$tmp/go.mod" "$$tmp/go.mod.tidy" >"$$tmp/diff" || \
	     ! diff -u "$$tmp/go.sum" "$$tmp/go.sum.tidy" >>"$$tmp/diff"; then \
	    echo "$$m/go.mod or go.sum is not tidy (run 'go mod tidy' in $$m):" >&2; cat "$$tmp/diff" >&2; rm -rf "$$tmp"; exit 1; \
	  fi; \
	  rm -rf "$$tmp"; \
	done

TEST_TARGETS += lint
