#!/usr/bin/env bash
# previous-chart.sh packages the chart as it was at PREVIOUS_CHART_COMMIT
# into test/e2e/testdata/, where the e2e suite's upgrade scenario installs it
# from before `helm upgrade`-ing to the chart of the checkout.
#
#   hack/previous-chart.sh
#
# The package is committed, so that the scenario runs in any clone, shallow
# ones (what CI checks out) included, without the history this script reads.
# Run it again, and commit its output, only when the pinned commit changes.
#
# The pinned commit is the last one before the NodeTemplate kind: its chart is
# 0.1.0, with two CRDs in crds/ (SpreadPolicy and ClusterSpreadPolicy, without
# a status subresource), which Helm installed once and never upgraded.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=lib/common.sh
source "$ROOT/hack/lib/common.sh"
BIN=${BIN:-$ROOT/bin}
PREVIOUS_CHART_COMMIT=${PREVIOUS_CHART_COMMIT:-f261901fd2dd9f7cef40dbb94b88c38477f7fed2}
OUT=$ROOT/test/e2e/testdata

git -C "$ROOT" cat-file -e "$PREVIOUS_CHART_COMMIT^{commit}" 2>/dev/null ||
  die "commit $PREVIOUS_CHART_COMMIT is not in this clone (a shallow one?): git fetch --unshallow"
[[ -x $BIN/helm ]] || die "no $BIN/helm: hack/build-binaries.sh helm"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
git -C "$ROOT" archive "$PREVIOUS_CHART_COMMIT" charts/spreadguard | tar -x -C "$tmp"
rm -f "$OUT"/spreadguard-*.tgz
"$BIN/helm" package "$tmp/charts/spreadguard" --destination "$OUT" >/dev/null
log "packaged the chart of $PREVIOUS_CHART_COMMIT: $(cd "$OUT" && ls spreadguard-*.tgz)"
