#!/usr/bin/env bash
# check-module-versions.sh fails when the repository's Go modules (the root
# and the nested test modules) compile one dependency at two versions.
#
#   hack/check-module-versions.sh [--fix] [MODULE_DIR...]
#
# Why: go build caches a compiled package under its sources and the versions
# of everything it imports. Where test/chart resolves golang.org/x/sys one
# patch higher than the root module, every package above it (client-go,
# controller-runtime, helm) is compiled, vetted and analysed by staticcheck
# once per module on a cold machine. With one version each, once in all.
#
# Only modules that provide a compiled package count (go list -deps -test,
# with the suites' build tags, and the tools the modules list); a module
# that is only in a go.mod graph costs nothing. --fix raises each module to
# the highest version another module compiles (go get), then runs go mod
# tidy; it never lowers one.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=lib/common.sh
source "$ROOT/hack/lib/common.sh"
TAGS=${TAGS:-e2e,integration}

fix=0
if [[ ${1:-} == --fix ]]; then fix=1; shift; fi
if [[ $# -eq 0 ]]; then
  set -- . test/chart test/e2e test/parity
fi

# compiled DIR prints "MODULE VERSION" for each dependency module DIR
# compiles, for its tests and for the tools its go.mod lists (helm, the
# control plane), at the version a replace directive gives when there is one;
# modules replaced by a local directory are left out.
compiled() {
  local format='{{with .Module}}{{if not .Main}}{{with .Replace}}{{if .Version}}{{.Path}} {{.Version}}{{end}}{{else}}{{.Path}} {{.Version}}{{end}}{{end}}{{end}}'
  (
    cd "$ROOT/$1"
    go list -deps -test -tags "$TAGS" -f "$format" ./...
    if grep -Eq '^tool[[:space:]]' go.mod; then go list -deps -f "$format" tool; fi
  ) | sort -u
}

# conflicts prints "MODULE DIR=VERSION ..." for each module compiled at more
# than one version.
conflicts() {
  local dir
  for dir in "$@"; do
    compiled "$dir" | sed "s|\$| $dir|"
  done | awk '
    { v[$1] = v[$1] " " $3 "=" $2; if (!seen[$1 SUBSEP $2]++) n[$1]++ }
    END { for (m in n) if (n[m] > 1) print m v[m] }' | sort
}

found=$(conflicts "$@")
if [[ -z $found ]]; then
  log "the modules $* compile every dependency at one version"
  exit 0
fi
if [[ $fix -eq 0 ]]; then
  {
    echo "these dependencies are compiled at more than one version (module dir=version);"
    echo "each is then compiled once per version on a cold machine."
    echo "hack/check-module-versions.sh --fix raises the lower ones:"
    echo "$found" | sed 's/^/  /'
  } >&2
  exit 1
fi

while read -r mod rest; do
  highest=$(tr ' ' '\n' <<<"$rest" | sed 's/^[^=]*=//' | semver_sort | tail -1)
  for pair in $rest; do
    dir=${pair%%=*} version=${pair#*=}
    [[ $version == "$highest" ]] && continue
    log "$dir: go get $mod@$highest (was $version)"
    (cd "$ROOT/$dir" && go get "$mod@$highest")
  done
done <<<"$found"
for dir in "$@"; do (cd "$ROOT/$dir" && go mod tidy); done
found=$(conflicts "$@")
[[ -z $found ]] || die "still compiled at more than one version after --fix:
$found"
log "the modules $* compile every dependency at one version"
