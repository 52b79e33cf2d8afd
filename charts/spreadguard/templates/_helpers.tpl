{{/*
spreadguard.name is the chart name, or nameOverride.
*/}}
{{- define "spreadguard.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
spreadguard.fullname prefixes every resource name. It is cut to 52 characters so
that the longest suffix the chart adds ("-selfsigned", 11) still fits in a
63-character name.
*/}}
{{- define "spreadguard.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 52 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 52 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 52 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{- define "spreadguard.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
spreadguard.selectorLabels select the webhook server's pods; they never change
after install, since a Deployment's selector is immutable.
*/}}
{{- define "spreadguard.selectorLabels" -}}
{{ include "spreadguard.instanceLabels" . }}
app.kubernetes.io/component: webhook
{{- end }}

{{- define "spreadguard.instanceLabels" -}}
app.kubernetes.io/name: {{ include "spreadguard.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{/*
spreadguard.commonLabels go on every object, each of which adds its
app.kubernetes.io/component.
*/}}
{{- define "spreadguard.commonLabels" -}}
helm.sh/chart: {{ include "spreadguard.chart" . }}
{{ include "spreadguard.instanceLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: spreadguard
{{- end }}

{{- define "spreadguard.labels" -}}
{{ include "spreadguard.commonLabels" . }}
app.kubernetes.io/component: webhook
{{- end }}

{{- define "spreadguard.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "spreadguard.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- required "serviceAccount.name is required when serviceAccount.create is false: name an existing ServiceAccount" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{- define "spreadguard.image" -}}
{{- $tag := default .Chart.AppVersion .Values.image.tag }}
{{- if .Values.image.digest }}
{{- printf "%s:%s@%s" .Values.image.repository $tag .Values.image.digest }}
{{- else }}
{{- printf "%s:%s" .Values.image.repository $tag }}
{{- end }}
{{- end }}

{{/*
spreadguard.inCluster is "true" when the webhook server runs in the cluster
(no webhook.url), the case in which the chart renders the Deployment, the
Services and the serving certificate.
*/}}
{{- define "spreadguard.inCluster" -}}
{{- if not .Values.webhook.url }}true{{ end }}
{{- end }}

{{/*
spreadguard.checkValues fails the render on combinations the schema cannot
express. Every template that depends on them includes it.
*/}}
{{- define "spreadguard.checkValues" -}}
{{- if and .Values.webhook.url .Values.certManager.enabled }}
{{- fail "webhook.url and certManager.enabled are both set: with an external URL the serving certificate belongs to the process outside the cluster. Unset certManager.enabled, or unset webhook.url to run the server in the cluster." }}
{{- end }}
{{- if and (not .Values.webhook.url) .Values.webhook.caBundle }}
{{- fail "webhook.caBundle is set without webhook.url: the caBundle of the in-cluster server comes from cert-manager or the generated CA. Unset webhook.caBundle, or set webhook.url." }}
{{- end }}
{{- if and (eq .Values.webhook.policyFailurePolicy "Fail") (or .Values.policy.clusterDefault.enabled .Values.policy.namespaces) }}
{{- fail "webhook.policyFailurePolicy is Fail while the chart renders policies: on a fresh install Helm 4 registers the validating webhook before the server is up, so the chart's own policies would be refused. Keep webhook.policyFailurePolicy=Ignore, or set policy.clusterDefault.enabled=false and policy.namespaces={} and manage the policies apart." }}
{{- end }}
{{- if ge (int .Values.shutdownDelaySeconds) (int .Values.terminationGracePeriodSeconds) }}
{{- fail (printf "shutdownDelaySeconds (%d) is not less than terminationGracePeriodSeconds (%d): the kubelet would kill a stopping replica before it drains the requests in flight. Lower shutdownDelaySeconds or raise terminationGracePeriodSeconds." (int .Values.shutdownDelaySeconds) (int .Values.terminationGracePeriodSeconds)) }}
{{- end }}
{{- $excluded := fromJsonArray (include "spreadguard.excludedNamespaces" .) }}
{{- range $ns, $_ := .Values.policy.namespaces }}
{{- if has $ns $excluded }}
{{- fail (printf "policy.namespaces.%s: spreadguard never acts in namespace %q (it is always excluded, or listed in webhook.excludedNamespaces), so this default would do nothing. Remove it." $ns $ns) }}
{{- end }}
{{- end }}
{{- end }}

{{/*
spreadguard.excludedNamespaces is the JSON list of namespaces the webhook never
sees: kube-system and the release's own namespace always (the webhook must not
stand between the cluster and the pods that run it), then the configured ones.
*/}}
{{- define "spreadguard.excludedNamespaces" -}}
{{- $certManager := list }}
{{- if .Values.certManager.enabled }}
{{- /* cert-manager issues this webhook's certificate: its pods must never wait on it. */}}
{{- $certManager = list .Values.certManager.namespace }}
{{- end }}
{{- concat (list "kube-system" .Release.Namespace) $certManager .Values.webhook.excludedNamespaces | uniq | toJson }}
{{- end }}

{{/*
spreadguard.namespaceSelector is the namespaceSelector of both pod webhooks.
The exclusions come first and cannot be removed by values; webhook.namespaceSelector
only narrows further.
*/}}
{{- define "spreadguard.namespaceSelector" -}}
{{- $extra := .Values.webhook.namespaceSelector }}
{{- with $extra.matchLabels }}
matchLabels:
  {{- toYaml . | nindent 2 }}
{{- end }}
matchExpressions:
  - key: kubernetes.io/metadata.name
    operator: NotIn
    values:
      {{- include "spreadguard.excludedNamespaces" . | fromJsonArray | toYaml | nindent 6 }}
  - key: spreadguard.io/ignore
    operator: NotIn
    values:
      - "true"
  {{- with $extra.matchExpressions }}
  {{- toYaml . | nindent 2 }}
  {{- end }}
{{- end }}

{{/*
spreadguard.namespaceSelectorString is webhook.namespaceSelector in the syntax of
kubectl's --selector, for the server's configuration (namespaceSelector): the
keeper of deletion costs and spread health act only in the namespaces the
webhook configurations send.
*/}}
{{- define "spreadguard.namespaceSelectorString" -}}
{{- $parts := list }}
{{- range $k, $v := .Values.webhook.namespaceSelector.matchLabels }}
{{- $parts = append $parts (printf "%s=%s" $k $v) }}
{{- end }}
{{- range .Values.webhook.namespaceSelector.matchExpressions }}
{{- $op := lower .operator }}
{{- if eq $op "in" }}{{ $parts = append $parts (printf "%s in (%s)" .key (join "," .values)) }}
{{- else if eq $op "notin" }}{{ $parts = append $parts (printf "%s notin (%s)" .key (join "," .values)) }}
{{- else if eq $op "exists" }}{{ $parts = append $parts .key }}
{{- else if eq $op "doesnotexist" }}{{ $parts = append $parts (printf "!%s" .key) }}
{{- end }}
{{- end }}
{{- join "," $parts }}
{{- end -}}

{{/*
spreadguard.clientConfig is a webhook's clientConfig for the path given as
"path" in the dict: the external URL in URL mode, the Service otherwise. The
caBundle is written here only when no cainjector writes it.
*/}}
{{- define "spreadguard.clientConfig" -}}
{{- $root := .root }}
{{- if $root.Values.webhook.url }}
url: {{ printf "%s%s" (trimSuffix "/" $root.Values.webhook.url) .path | quote }}
{{- with $root.Values.webhook.caBundle }}
caBundle: {{ . }}
{{- end }}
{{- else }}
service:
  name: {{ include "spreadguard.fullname" $root }}
  namespace: {{ $root.Release.Namespace }}
  path: {{ .path }}
  port: 443
{{- if not $root.Values.certManager.enabled }}
caBundle: {{ (include "spreadguard.selfSignedTLS" $root | fromJson).ca | b64enc }}
{{- end }}
{{- end }}
{{- end }}

{{/*
spreadguard.webhookAnnotations asks cert-manager's cainjector to copy the CA of
the serving Certificate into the configuration's caBundle.
*/}}
{{- define "spreadguard.webhookAnnotations" -}}
{{- if and .Values.certManager.enabled (include "spreadguard.inCluster" .) }}
annotations:
  cert-manager.io/inject-ca-from: {{ printf "%s/%s" .Release.Namespace (include "spreadguard.servingCertificateName" .) }}
{{- end }}
{{- end }}

{{/*
spreadguard.tlsSecretName is the Secret the server's certificate is mounted
from. The two modes use different names, so that switching modes on upgrade
never has Helm delete the Secret cert-manager has just taken over: the pods
roll onto the new Secret once it exists while the old ones keep serving.
*/}}
{{- define "spreadguard.tlsSecretName" -}}
{{- if .Values.certManager.enabled }}
{{- printf "%s-serving-cert" (include "spreadguard.fullname" .) }}
{{- else }}
{{- printf "%s-tls" (include "spreadguard.fullname" .) }}
{{- end }}
{{- end }}

{{- define "spreadguard.servingCertificateName" -}}
{{- printf "%s-serving" (include "spreadguard.fullname" .) }}
{{- end }}

{{/*
spreadguard.dnsNames are the names the API server may use for the Service:
it calls <svc>.<ns>.svc; the shorter forms serve clients inside the namespace.
*/}}
{{- define "spreadguard.dnsNames" -}}
{{- $svc := include "spreadguard.fullname" . }}
{{- list $svc (printf "%s.%s" $svc .Release.Namespace) (printf "%s.%s.svc" $svc .Release.Namespace) | toJson }}
{{- end }}

{{/*
spreadguard.selfSignedTLS returns, as JSON {ca, crt, key} in PEM, the CA and
serving certificate used when cert-manager is not: the ones already in the
cluster's Secret when it exists (so that `helm upgrade` changes neither the
Secret nor the caBundle), or new ones. Several templates need the same
certificate within one render while genCA returns a new one on every call, so
the first result is kept in the root context, which the engine shares between
the templates of a chart.
*/}}
{{- define "spreadguard.selfSignedTLS" -}}
{{- if not (hasKey . "spreadguardSelfSignedTLS") }}
{{- $secret := lookup "v1" "Secret" .Release.Namespace (include "spreadguard.tlsSecretName" .) }}
{{- $ca := dig "data" "ca.crt" "" $secret }}
{{- $crt := dig "data" "tls.crt" "" $secret }}
{{- $key := dig "data" "tls.key" "" $secret }}
{{- if and $ca $crt $key }}
{{- $_ := set . "spreadguardSelfSignedTLS" (dict "ca" (b64dec $ca) "crt" (b64dec $crt) "key" (b64dec $key)) }}
{{- else }}
{{- $days := int .Values.selfSigned.validityDays }}
{{- $svc := include "spreadguard.fullname" . }}
{{- $caCert := genCA (printf "%s-ca" $svc) $days }}
{{- $dnsNames := include "spreadguard.dnsNames" . | fromJsonArray }}
{{- $serving := genSignedCert (printf "%s.%s.svc" $svc .Release.Namespace) nil $dnsNames $days $caCert }}
{{- $_ := set . "spreadguardSelfSignedTLS" (dict "ca" $caCert.Cert "crt" $serving.Cert "key" $serving.Key) }}
{{- end }}
{{- end }}
{{- get . "spreadguardSelfSignedTLS" | toJson }}
{{- end }}

{{/*
spreadguard.customResourceAnnotations are the annotations of a custom resource
the chart renders, of kind "kind" in the dict. Helm maps every object of a
release to its API before it creates any, so a NodeTemplate or a policy
cannot be in the same release as the CRD that defines it unless the API
server serves the kind already: on a fresh install, or an upgrade from a
chart version without the kind, the resource is created after the release's
other objects instead, by a post-install and post-upgrade hook. The hook
carries the ownership annotations Helm would have written, so the next
upgrade, which finds the kind served, adopts the object into the release.
*/}}
{{- define "spreadguard.customResourceAnnotations" -}}
{{- $root := .root }}
{{- if and $root.Values.crds.enabled (not ($root.Capabilities.APIVersions.Has (printf "spreadguard.io/v1alpha1/%s" .kind))) }}
annotations:
  helm.sh/hook: post-install,post-upgrade
  helm.sh/hook-delete-policy: before-hook-creation
  meta.helm.sh/release-name: {{ $root.Release.Name }}
  meta.helm.sh/release-namespace: {{ $root.Release.Namespace }}
{{- end }}
{{- end }}

{{/*
spreadguard.metricsScraper is "true" when the chart makes the ServiceAccount
and token Secret the ServiceMonitor authenticates with: a secure ServiceMonitor
whose token Secret is not given.
*/}}
{{- define "spreadguard.metricsScraper" -}}
{{- with .Values.metrics }}
{{- if and (include "spreadguard.inCluster" $) .serviceMonitor.enabled .secure (not .serviceMonitor.tokenSecret.name) }}true{{ end }}
{{- end }}
{{- end }}

{{- define "spreadguard.metricsTokenSecretName" -}}
{{- default (printf "%s-metrics-scraper-token" (include "spreadguard.fullname" .)) .Values.metrics.serviceMonitor.tokenSecret.name }}
{{- end }}

{{/*
Whether spread health runs: health.enabled, and audit.enabled, its old name,
read until the next minor version. The new name wins when it is set false;
the old one, when set false, turns spread health off as it did before.
*/}}
{{- define "spreadguard.healthEnabled" -}}
{{- $old := dig "enabled" nil (.Values.audit | default dict) -}}
{{- if and .Values.health.enabled (or (kindIs "invalid" $old) $old) -}}
true
{{- end -}}
{{- end }}
