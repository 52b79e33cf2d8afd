# chart-config.sh: the webhook's configuration file as the chart rendered it
# into its ConfigMap, read from the cluster at each start of a local server,
# so that a `helm upgrade` of the release (--set autoscaler.zones=...) takes
# effect at the next `hack/dev.sh webhook-start` as at a pod's restart.
# Sourced; it only defines functions. It calls `k` (kubectl with the
# cluster's KUBECONFIG) and reads RELEASE and RELEASE_NAMESPACE.

# chart_config OUT writes the config.yaml of the release's ConfigMap ending
# in -config into OUT. It replaces OUT only once it has read a non-empty
# file, and returns 1 with the reason on stderr otherwise, leaving OUT as it
# was.
chart_config() {
  local out=$1 configmap
  configmap=$(k -n "$RELEASE_NAMESPACE" get configmap -l "app.kubernetes.io/instance=$RELEASE" -o name | grep -- '-config$' | head -1) || true
  if [[ -z $configmap ]]; then
    echo "the chart's release $RELEASE has no ConfigMap ending in -config in $RELEASE_NAMESPACE" >&2
    return 1
  fi
  if ! k -n "$RELEASE_NAMESPACE" get "$configmap" -o jsonpath='{.data.config\.yaml}' >"$out.tmp"; then
    rm -f "$out.tmp"
    echo "could not read $configmap in $RELEASE_NAMESPACE" >&2
    return 1
  fi
  if [[ ! -s $out.tmp ]]; then
    rm -f "$out.tmp"
    echo "$configmap in $RELEASE_NAMESPACE has no config.yaml" >&2
    return 1
  fi
  mv -f "$out.tmp" "$out"
}
