#!/usr/bin/env bash
# previous-webhook.sh builds spreadguard-webhook as it was at COMMIT into
# OUT (kept when already there), from a copy of that commit's tree in a
# temporary directory, so that the e2e suite's upgrade scenario runs a
# released chart with the binary it shipped with.
#
#   hack/previous-webhook.sh COMMIT OUT
#
# It needs the commit in this clone (a shallow one: git fetch --unshallow)
# and the modules that commit's go.mod requires (from the module cache, or
# the module proxy).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=lib/common.sh
source "$ROOT/hack/lib/common.sh"

[[ $# -eq 2 ]] || die "usage: hack/previous-webhook.sh COMMIT OUT"
commit=$1 out=$2
[[ -x $out ]] && exit 0
git -C "$ROOT" cat-file -e "$commit^{commit}" 2>/dev/null ||
  die "commit $commit is not in this clone (a shallow one?): git fetch --unshallow"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
git -C "$ROOT" archive "$commit" | tar -x -C "$tmp"
mkdir -p "$(dirname "$out")"
log "building spreadguard-webhook of $commit"
# Static, as every binary of the repository (the Makefile's CGO_ENABLED=0),
# so that it shares the build cache.
(cd "$tmp" && CGO_ENABLED=0 go build -o "$out.tmp" ./cmd/webhook)
mv -f "$out.tmp" "$out"
