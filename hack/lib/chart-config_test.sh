#!/usr/bin/env bash
# Checks hack/lib/chart-config.sh against a kubectl stand-in that answers
# from the ConfigMap a release holds now: each read follows the release's
# latest `helm upgrade`, and a read that fails leaves the last file in
# place. Run by `make test-hack`.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/chart-config.sh"

dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
RELEASE=spreadguard RELEASE_NAMESPACE=spreadguard-system
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

# k stands in for kubectl: the release's ConfigMaps are the files in
# $dir/cluster, whose config.yaml is the file's content; $dir/down makes
# every call fail, as an API server that does not answer.
mkdir "$dir/cluster"
k() {
  [[ ! -e $dir/down ]] || { echo "The connection to the server was refused" >&2; return 1; }
  local args="$*"
  [[ $args == *"-n spreadguard-system"* ]] || { echo "k: want -n spreadguard-system, got: $args" >&2; return 1; }
  case $args in
    *"get configmap -l app.kubernetes.io/instance=spreadguard -o name"*)
      local f
      for f in "$dir"/cluster/*; do [[ -e $f ]] && echo "configmap/$(basename "$f")"; done
      ;;
    *"get configmap/"*"-o jsonpath={.data.config\.yaml}"*)
      local name=${args#*get configmap/}
      cat "$dir/cluster/${name%% *}"
      ;;
    *) echo "k: unexpected call: $args" >&2; return 1 ;;
  esac
}
# installed VALUES: the chart as `helm upgrade` rendered it with VALUES.
installed() { printf 'kind: WebhookConfiguration\n%s\n' "$1" >"$dir/cluster/spreadguard-config"; }
want_file() { # want_file STEP WANT
  local got
  got=$(cat "$dir/config.yaml" 2>/dev/null || echo "(no file)")
  [[ $got == "$2" ]] || fail "$1: config.yaml is \"$got\", want \"$2\""
}

# The dashboard's ConfigMap of the same release is not the server's.
echo '{}' >"$dir/cluster/spreadguard-dashboard"
installed 'autoscalerZones: [zone-a, zone-b, zone-c]'
chart_config "$dir/config.yaml" || fail "the first start: chart_config failed"
want_file "the first start" $'kind: WebhookConfiguration\nautoscalerZones: [zone-a, zone-b, zone-c]'

installed 'autoscalerZones: [zone-a, zone-b, zone-c, zone-d]'
chart_config "$dir/config.yaml" || fail "a start after helm upgrade --set autoscaler.zones: chart_config failed"
want_file "a start after helm upgrade --set autoscaler.zones" $'kind: WebhookConfiguration\nautoscalerZones: [zone-a, zone-b, zone-c, zone-d]'

touch "$dir/down"
if chart_config "$dir/config.yaml" 2>"$dir/err"; then fail "the API server down: chart_config succeeded"; fi
grep -q "could not read\|no ConfigMap" "$dir/err" || fail "the API server down: the error does not say what it could not read: $(cat "$dir/err")"
want_file "the API server down: the last file is kept" $'kind: WebhookConfiguration\nautoscalerZones: [zone-a, zone-b, zone-c, zone-d]'
rm "$dir/down"

: >"$dir/cluster/spreadguard-config"
if chart_config "$dir/config.yaml" 2>"$dir/err"; then fail "an empty config.yaml: chart_config succeeded"; fi
grep -q "has no config.yaml" "$dir/err" || fail "an empty config.yaml: the error is $(cat "$dir/err")"
want_file "an empty config.yaml: the last file is kept" $'kind: WebhookConfiguration\nautoscalerZones: [zone-a, zone-b, zone-c, zone-d]'

rm "$dir/cluster/spreadguard-config"
if chart_config "$dir/config.yaml" 2>"$dir/err"; then fail "the release uninstalled: chart_config succeeded"; fi
grep -q "has no ConfigMap ending in -config" "$dir/err" || fail "the release uninstalled: the error is $(cat "$dir/err")"
[[ ! -e $dir/config.yaml.tmp ]] || fail "a temporary file was left behind"

if ((failures)); then
  echo "chart-config_test: $failures failed"
  exit 1
fi
echo "chart-config_test: ok"
