{{/* The name of every object: the release name. */}}
{{- define "yunikorn-userinfo.fullname" -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* Labels Helm adds to those of deploy/ (test/manifests ignores these). */}}
{{- define "yunikorn-userinfo.helmLabels" -}}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- end -}}

{{/* Labels of objects that belong to the product as a whole. */}}
{{- define "yunikorn-userinfo.labels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/part-of: yunikorn-userinfo
{{ include "yunikorn-userinfo.helmLabels" . }}
{{- end -}}

{{/* Labels of the webhook's own objects. */}}
{{- define "yunikorn-userinfo.webhookLabels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/component: webhook
app.kubernetes.io/part-of: yunikorn-userinfo
{{ include "yunikorn-userinfo.helmLabels" . }}
{{- end -}}

{{/* The webhook Pods' selector. */}}
{{- define "yunikorn-userinfo.selectorLabels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/component: webhook
{{- end -}}

{{- define "yunikorn-userinfo.image" -}}
{{- if .Values.image.digest -}}
{{ .Values.image.repository }}@{{ .Values.image.digest }}
{{- else -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end -}}
{{- end -}}

{{- define "yunikorn-userinfo.tlsSecret" -}}
{{- if .Values.tls.certManager -}}
{{ include "yunikorn-userinfo.fullname" . }}-tls
{{- else -}}
{{ required "tls.existingSecret is required when tls.certManager is false" .Values.tls.existingSecret }}
{{- end -}}
{{- end -}}

{{- define "yunikorn-userinfo.policyServer" -}}
{{- if .Values.kubewarden.policyServer.create -}}
{{ .Values.kubewarden.policyServer.name | default (include "yunikorn-userinfo.fullname" .) }}
{{- else -}}
{{ required "kubewarden.policyServer.name is required when kubewarden.policyServer.create is false" .Values.kubewarden.policyServer.name }}
{{- end -}}
{{- end -}}

{{/* Checks of values that would render a broken installation. */}}
{{- define "yunikorn-userinfo.validate" -}}
{{- if not (has .Values.mode (list "standalone" "kubewarden")) -}}
{{- fail (printf "mode: %q is not standalone or kubewarden" .Values.mode) -}}
{{- end -}}
{{- if not (has .Values.failurePolicy (list "Fail" "Ignore")) -}}
{{- fail (printf "failurePolicy: %q is not Fail or Ignore" .Values.failurePolicy) -}}
{{- end -}}
{{- if and (not .Values.tls.certManager) (not .Values.tls.caBundle) (eq .Values.mode "standalone") -}}
{{- fail "tls.caBundle is required when tls.certManager is false: the API server must trust the webhook's certificate" -}}
{{- end -}}
{{- if hasKey .Values.settings "validateOnly" -}}
{{- fail "settings.validateOnly: set validatingTwin instead; the chart gives validateOnly to the twin only" -}}
{{- end -}}
{{- end -}}

{{/*
The namespace selector of every webhook: kube-system (by default) and the
release's own namespace are never sent to the webhook.
*/}}
{{- define "yunikorn-userinfo.namespaceSelector" -}}
matchExpressions:
  - key: kubernetes.io/metadata.name
    operator: NotIn
    values: {{ concat .Values.excludedNamespaces (list .Release.Namespace) | uniq | toJson }}
{{- end -}}

{{/* The access trustRBAC asks (docs/BEHAVIOUR.md §3.1) as a dict, or an
empty dict when trustRBAC is off. */}}
{{- define "yunikorn-userinfo.trustRBAC" -}}
{{- $t := .Values.settings.trustRBAC -}}
{{- if kindIs "map" $t -}}
{{- toYaml (merge (dict) $t (dict "verb" "set" "group" "yunikorn.apache.org" "resource" "userinfos" "groupsResource" "usergroups")) -}}
{{- else if $t -}}
{{- toYaml (dict "verb" "set" "group" "yunikorn.apache.org" "resource" "userinfos" "groupsResource" "usergroups") -}}
{{- end -}}
{{- end -}}

{{/* Where queueCheck reads YuniKorn's configuration (docs/BEHAVIOUR.md
§3.2): its namespace, or nothing when the check is off. */}}
{{- define "yunikorn-userinfo.queueCheckNamespace" -}}
{{- $q := .Values.settings.queueCheck -}}
{{- if kindIs "string" $q -}}
{{- if ne $q "off" }}yunikorn{{ end -}}
{{- else if kindIs "map" $q -}}
{{- if ne (default "off" $q.mode) "off" }}{{ default "yunikorn" $q.namespace }}{{ end -}}
{{- end -}}
{{- end -}}

{{/* Whether the policy calls the API server at all. */}}
{{- define "yunikorn-userinfo.needsAPI" -}}
{{- $w := include "yunikorn-userinfo.workloads" . | fromJson -}}
{{- $s := include "yunikorn-userinfo.schedulingReads" . | fromJson -}}
{{- if or (include "yunikorn-userinfo.trustRBAC" .) (include "yunikorn-userinfo.queueCheckNamespace" .) $w.reads $s.reads }}true{{ end -}}
{{- end -}}

{{/* What the scheduling setting reads (docs/BEHAVIOUR.md §3.9), as JSON
{"reads": [{group, version, kind, resource}]}: Namespaces (their
enableYuniKorn and generateAppId annotations) unless namespaceAnnotations
is false, and PriorityClasses (allow-preemption) unless preemption is
false; nothing when scheduling is absent or null. */}}
{{- define "yunikorn-userinfo.schedulingReads" -}}
{{- $sc := .Values.settings.scheduling -}}
{{- $reads := list -}}
{{- if kindIs "map" $sc -}}
{{- if ternary $sc.namespaceAnnotations true (hasKey $sc "namespaceAnnotations") -}}
{{- $reads = append $reads (dict "group" "" "version" "v1" "kind" "Namespace" "resource" "namespaces") -}}
{{- end -}}
{{- if ternary $sc.preemption true (hasKey $sc "preemption") -}}
{{- $reads = append $reads (dict "group" "scheduling.k8s.io" "version" "v1" "kind" "PriorityClass" "resource" "priorityclasses") -}}
{{- end -}}
{{- end -}}
{{- toJson (dict "reads" $reads) -}}
{{- end -}}

{{/* The custom kinds of settings.workloads (docs/BEHAVIOUR.md §3.3, §3.4),
as JSON: "rules", the kinds the webhook must receive ({group, resource}),
and "reads", the kinds the provenance proofs read ({group, version, kind,
resource}): the owners of entries that name operators, and Pods with
trustPodTokens, applicationOwnership, or queueCheck with schedulerUsers. Presets come from files/workload-presets.json, generated
from the policy's own table. */}}
{{- define "yunikorn-userinfo.workloads" -}}
{{- $presets := (.Files.Get "files/workload-presets.json" | fromJson).presets -}}
{{- $rules := list -}}
{{- $reads := list -}}
{{- $pod := dict "group" "" "version" "v1" "kind" "Pod" "resource" "pods" -}}
{{- range $i, $e := (.Values.settings.workloads | default list) -}}
{{- $entry := $e -}}
{{- if kindIs "string" $e }}{{ $entry = dict "preset" $e }}{{ end -}}
{{- if $entry.preset -}}
{{- $p := get $presets $entry.preset -}}
{{- if not $p }}{{ fail (printf "settings.workloads[%d]: unknown preset %q" $i $entry.preset) }}{{ end -}}
{{- range $p.kinds }}{{ $rules = append $rules (dict "group" .group "resource" .resource) }}{{ end -}}
{{- if $entry.operators }}{{ $reads = concat $reads $p.owners }}{{ end -}}
{{- else -}}
{{- if or (not $entry.resource) (not $entry.version) -}}
{{- fail (printf "settings.workloads[%d]: the chart needs the kind's version and resource (its plural) to route %s to the policy and to read it" $i (default "it" $entry.kind)) -}}
{{- end -}}
{{- $rules = append $rules (dict "group" (default "" $entry.group) "resource" $entry.resource) -}}
{{- if $entry.operators -}}
{{- $reads = append $reads (dict "group" (default "" $entry.group) "version" $entry.version "kind" $entry.kind "resource" $entry.resource) -}}
{{- range ($entry.owners | default list) -}}
{{- if ne . "Pod" }}{{ fail (printf "settings.workloads[%d].owners: the chart grants reads of owner Pod only; grant %s to the webhook yourself and leave it out here" $i .) }}{{ end -}}
{{- $reads = append $reads $pod -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- if .Values.settings.trustPodTokens }}{{ $reads = append $reads $pod }}{{ end -}}
{{- $ao := .Values.settings.applicationOwnership -}}
{{- if or (and (kindIs "string" $ao) (ne (toString $ao) "off")) (and (kindIs "map" $ao) (ne (default "off" (get (default (dict) $ao) "mode")) "off")) }}{{ $reads = append $reads $pod }}{{ end -}}
{{- /* The queue check and a scheduler's placeholders (docs/BEHAVIOUR.md §3.7):
the policy reads a placeholder's originator Pod, without which the check
would refuse the placeholder. */ -}}
{{- $su := ternary .Values.settings.schedulerUsers true (hasKey .Values.settings "schedulerUsers") -}}
{{- if and $su (include "yunikorn-userinfo.queueCheckNamespace" .) }}{{ $reads = append $reads $pod }}{{ end -}}
{{- toJson (dict "rules" $rules "reads" (uniq $reads)) -}}
{{- end -}}
