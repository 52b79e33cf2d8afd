#!/usr/bin/env bash
# Checks hack/build-binaries.sh's stamps with a stand-in go command that
# records its calls: a binary whose stamp was written by another build
# recipe (a bin/ from before every build was static) is built again and
# restamped; one stamped with this recipe is left alone; and every build
# runs with CGO_ENABLED=0. Run by `make test-hack`.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)

dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
failures=0 checks=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
check() { checks=$((checks + 1)); }

# The stand-in: `go list tool` names kubectl as test/parity's tool, as the
# real module does; `go build -o OUT` writes OUT and logs the call with the
# CGO_ENABLED it ran under.
mkdir -p "$dir/path"
cat >"$dir/path/go" <<'SH'
#!/usr/bin/env bash
echo "go $* CGO_ENABLED=${CGO_ENABLED:-unset}" >>"$GO_CALLS"
case $1 in
  list) echo k8s.io/kubernetes/cmd/kubectl ;;
  build)
    while [[ $# -gt 0 ]]; do
      if [[ $1 == -o ]]; then printf '#!/bin/sh\n' >"$2"; chmod +x "$2"; fi
      shift
    done ;;
esac
SH
chmod +x "$dir/path/go"

# run BIN: build kubectl into BIN with the stand-in, with the test module's
# own pin of k8s.io/kubernetes.
version=$(awk '$1 == "k8s.io/kubernetes" && $2 ~ /^v/ { print $2; exit }' "$root/test/parity/go.mod")
run() {
  : >"$dir/calls"
  PATH="$dir/path:$PATH" GO_CALLS="$dir/calls" BIN=$1 KUBE_VERSION=$version CGO_ENABLED=1 \
    "$root/hack/build-binaries.sh" kubectl >"$dir/out" 2>&1 || { cat "$dir/out"; fail "build-binaries.sh kubectl failed"; }
}

# A bin/ as the cgo builds left it: the binary and a stamp without a recipe.
old=$dir/old-bin
mkdir -p "$old/.stamps"
printf '#!/bin/sh\n' >"$old/kubectl" && chmod +x "$old/kubectl"
touch "$old/.stamps/kubectl-$version"
run "$old"
check
grep -q "^go build .*-o $old/kubectl .* CGO_ENABLED=0\$" "$dir/calls" ||
  fail "a kubectl stamped by another recipe was not built again with CGO_ENABLED=0; go calls: $(cat "$dir/calls")"
check
[[ -f $old/.stamps/kubectl-$version.static && ! -e $old/.stamps/kubectl-$version ]] ||
  fail "the rebuilt kubectl is not restamped with the recipe alone: $(ls "$old/.stamps")"

# The same bin/ again: its stamp is this recipe's, so nothing is built.
run "$old"
check
! grep -q "^go build" "$dir/calls" || fail "a kubectl stamped by this recipe was built again: $(cat "$dir/calls")"

echo "$checks checks, $failures failed"
((failures == 0))
