#!/usr/bin/env bash
# previous-chart.sh packages the released charts the e2e suite's upgrade
# scenario starts from into test/e2e/testdata/previous/, one package a
# pinned commit, named LABEL-COMMIT.tgz, where TestUpgrade installs each
# before `helm upgrade`-ing to the chart of the checkout.
#
#   hack/previous-chart.sh
#
# The packages are committed, so that the charts install in any clone,
# shallow ones (what CI checks out) included, without the history this
# script reads. Run it again, and commit its output, only when the pinned
# commits change. The webhook binary of each commit, which serves until the
# rollout, is built at test time by hack/previous-webhook.sh (which needs
# the history).
#
# The pinned commits are the first and the last of chart 0.1.0
# (`git log -- charts/spreadguard/Chart.yaml`):
#   oldest  the first with a webhook binary (the chart came a commit
#           before it): two CRDs in crds/ (SpreadPolicy and
#           ClusterSpreadPolicy, without a status subresource)
#   newest  the last before 0.2.0, which most installs run: three CRDs in
#           crds/ (NodeTemplate too). Helm installs crds/ once and never
#           upgrades them: an install of the oldest upgraded to the newest
#           still has two.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=lib/common.sh
source "$ROOT/hack/lib/common.sh"
BIN=${BIN:-$ROOT/bin}
PREVIOUS_CHARTS=${PREVIOUS_CHARTS:-oldest=b36a2174d337611fe6c8df0e4e368f6ad97c15c7 newest=62fbddee0181b718eaf5701421eb22510f3b869c}
OUT=$ROOT/test/e2e/testdata/previous

[[ -x $BIN/helm ]] || die "no $BIN/helm: hack/build-binaries.sh helm"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
rm -rf "$OUT" && mkdir -p "$OUT"
for pinned in $PREVIOUS_CHARTS; do
  label=${pinned%%=*} commit=${pinned#*=}
  git -C "$ROOT" cat-file -e "$commit^{commit}" 2>/dev/null ||
    die "commit $commit is not in this clone (a shallow one?): git fetch --unshallow"
  mkdir -p "$tmp/$label"
  git -C "$ROOT" archive "$commit" charts/spreadguard | tar -x -C "$tmp/$label"
  "$BIN/helm" package "$tmp/$label/charts/spreadguard" --destination "$tmp/$label" >/dev/null
  mv "$tmp/$label"/spreadguard-*.tgz "$OUT/$label-$commit.tgz"
  log "packaged the chart of $commit ($label): testdata/previous/$label-$commit.tgz"
done
