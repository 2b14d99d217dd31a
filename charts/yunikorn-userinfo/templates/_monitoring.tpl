{{/* The monitoring of the webhook (values monitoring.*; docs/OPERATIONS.md). */}}

{{/* Whether serve reads its own webhook configurations
(--watch-registration): with the alerts, in standalone mode. */}}
{{- define "yunikorn-userinfo.watchRegistration" -}}
{{- if and (include "yunikorn-userinfo.webhook" .) .Values.monitoring.rules.enabled }}true{{ end -}}
{{- end -}}

{{/* The webhook configurations of the release serve answers for, as
--watch-registration takes them. */}}
{{- define "yunikorn-userinfo.registrations" -}}
{{- $fullname := include "yunikorn-userinfo.fullname" . -}}
{{- if not .Values.watchOnly }}mutating/{{ $fullname }}{{ end -}}
{{- if and (include "yunikorn-userinfo.twin" .) (not .Values.watchOnly) }},{{ end -}}
{{- if include "yunikorn-userinfo.twin" . }}validating/{{ $fullname }}-validate{{ end -}}
{{- end -}}

{{/* The label matchers that pick the webhook's series: its namespace and
job (the Service's name, as the ServiceMonitor makes it, unless
monitoring.rules.job says otherwise). */}}
{{- define "yunikorn-userinfo.metricSelector" -}}
namespace="{{ .Release.Namespace }}",job="{{ .Values.monitoring.rules.job | default (include "yunikorn-userinfo.fullname" .) }}"
{{- end -}}
