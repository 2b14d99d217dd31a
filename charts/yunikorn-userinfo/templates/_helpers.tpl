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
{{- if not (has .Values.mode (list "standalone" "kubewarden" "cel" "hybrid")) -}}
{{- fail (printf "mode: %q is not standalone, kubewarden, cel or hybrid" .Values.mode) -}}
{{- end -}}
{{- include "yunikorn-userinfo.validateCEL" . -}}
{{- if not (has .Values.failurePolicy (list "Fail" "Ignore")) -}}
{{- fail (printf "failurePolicy: %q is not Fail or Ignore" .Values.failurePolicy) -}}
{{- end -}}
{{- if and (not .Values.tls.certManager) (not .Values.tls.caBundle) (include "yunikorn-userinfo.webhook" .) -}}
{{- fail "tls.caBundle is required when tls.certManager is false: the API server must trust the webhook's certificate" -}}
{{- end -}}
{{- if hasKey .Values.settings "validateOnly" -}}
{{- fail "settings.validateOnly: set validatingTwin instead; the chart gives validateOnly to the twin only" -}}
{{- end -}}
{{- if eq (int .Values.webhookPort) (int .Values.metricsPort) -}}
{{- fail (printf "webhookPort and metricsPort: both are %v; serve cannot listen twice on one port" .Values.webhookPort) -}}
{{- end -}}
{{- $pdb := .Values.podDisruptionBudget -}}
{{- if and $pdb.enabled (ge (int .Values.replicas) 2) -}}
{{- if and (kindIs "string" $pdb.minAvailable) (eq (toString $pdb.minAvailable) "100%") -}}
{{- fail "podDisruptionBudget.minAvailable: 100% would forbid every eviction, so no node running the webhook could be drained" -}}
{{- else if and (not (kindIs "string" $pdb.minAvailable)) (ge (int $pdb.minAvailable) (int .Values.replicas)) -}}
{{- fail (printf "podDisruptionBudget.minAvailable: %v with %v replicas would forbid every eviction, so no node running the webhook could be drained; use fewer than replicas" $pdb.minAvailable .Values.replicas) -}}
{{- end -}}
{{- end -}}
{{- $vc := .Values.kubewarden.policyServer.verification -}}
{{- if and $vc.config (not .Values.kubewarden.policyServer.create) -}}
{{- fail "kubewarden.policyServer.verification.config: the chart creates the verification ConfigMap only for a PolicyServer of its own (kubewarden.policyServer.create)" -}}
{{- end -}}
{{- include "yunikorn-userinfo.checkRegexes" . -}}
{{- end -}}

{{/*
Every regular-expression setting compiled with Go's regexp (RE2, the
dialect of the policy: TinyGo's regexp is Go's), so a pattern that does not
compile fails `helm install`/`helm template` rather than the running
webhook's settings validation. values.schema.json checks the same with
"format": "regex" (Helm validates it with Go's regexp too); this is for
--skip-schema-validation. A template named after each value does the
compiling, so that the error names the value: Helm's message reads
`executing "settings.systemUsers: a pattern is not a Go regular expression"
at <mustRegexMatch . "">: error calling mustRegexMatch: error parsing
regexp: ...`. A setting written as one comma-separated string is compiled
whole (a list of valid patterns joined by commas compiles too).
*/}}
{{- define "yunikorn-userinfo.checkRegexes" -}}
{{- $s := .Values.settings -}}
{{- $checks := list
  (list "systemUsers" $s.systemUsers)
  (list "externalUsers" $s.externalUsers)
  (list "externalGroups" $s.externalGroups)
  (list "schedulerUsers" $s.schedulerUsers) -}}
{{- if kindIs "map" $s.recordedGroups -}}
{{- $checks = append $checks (list "recordedGroups.include" $s.recordedGroups.include) -}}
{{- $checks = append $checks (list "recordedGroups.exclude" $s.recordedGroups.exclude) -}}
{{- end -}}
{{- if kindIs "map" $s.adopters -}}
{{- $checks = append $checks (list "adopters.users" $s.adopters.users) -}}
{{- $checks = append $checks (list "adopters.groups" $s.adopters.groups) -}}
{{- end -}}
{{- if kindIs "map" $s.scheduling -}}
{{- range $k := list "processNamespaces" "bypassNamespaces" "labelNamespaces" "noLabelNamespaces" -}}
{{- $checks = append $checks (list (printf "scheduling.%s" $k) (get $s.scheduling $k)) -}}
{{- end -}}
{{- end -}}
{{- range $c := $checks -}}
{{- $name := index $c 0 -}}
{{- $v := index $c 1 -}}
{{- if kindIs "string" $v -}}
{{- /* The policy splits the string form at commas: no piece may be empty. */ -}}
{{- if and (trim $v) (regexMatch "^\\s*,|,\\s*,|,\\s*$" $v) -}}
{{- fail (printf "settings.%s: empty pattern (between commas): it would match every name; remove it (an empty list trusts no one)" $name) -}}
{{- end -}}
{{- $v = list $v -}}
{{- else if kindIs "slice" $v -}}
{{- range $i, $p := $v -}}
{{- if and (kindIs "string" $p) (not (trim $p)) -}}
{{- fail (printf "settings.%s[%d]: empty pattern: it would match every name; remove it (an empty list trusts no one)" $name $i) -}}
{{- end -}}
{{- /* An array entry is one pattern; "^livy$," is a list (RATIONALE.md). */ -}}
{{- if and (kindIs "string" $p) (regexMatch "^\\s*,|,\\s*,|,\\s*$|\\$\\s*,|,\\s*\\^" $p) -}}
{{- fail (printf "settings.%s[%d]: pattern %q is a comma-separated list in one array entry: as one pattern it matches only names with a comma; write each pattern as its own entry" $name $i $p) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- if kindIs "slice" $v -}}
{{- range $p := $v -}}
{{- include (printf "settings.%s: a pattern is not a Go regular expression" $name) (toString $p) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- with $s.userLabelKey -}}
{{- if and (kindIs "string" .) (not (trim .)) -}}
{{- fail "settings.userLabelKey: must not be empty" -}}
{{- end -}}
{{- end -}}
{{- /* Settings the policy refuses in combination (its words), so that
helm install fails rather than the webhook at start. */ -}}
{{- with $s.recordedGroups -}}
{{- if and (kindIs "map" .) (eq (toString .omit) "true") (or .include .exclude) -}}
{{- fail "settings.recordedGroups: omit is true, so include and exclude would have no effect: set omit or the lists, not both" -}}
{{- end -}}
{{- end -}}
{{- if kindIs "map" $s.scheduling -}}
{{- $n := $s.scheduling.schedulerName -}}
{{- if and (kindIs "string" $n) (or (not (trim $n)) (ne (trim $n) $n) (regexMatch "[ \t\n/]" $n)) -}}
{{- fail (printf "settings.scheduling.schedulerName: must be a scheduler's name (not empty, no spaces or slashes), got %q" $n) -}}
{{- end -}}
{{- $ao := $s.applicationOwnership -}}
{{- if and (kindIs "map" $ao) (hasKey $s.scheduling "generateUniqueAppIds") (hasKey $ao "generateUniqueAppIds") (ne (toString $s.scheduling.generateUniqueAppIds) (toString $ao.generateUniqueAppIds)) -}}
{{- fail "settings.scheduling.generateUniqueAppIds and settings.applicationOwnership.generateUniqueAppIds differ: both say how the IDs of Pods without one are made, which the scheduling jobs do; set one of them" -}}
{{- end -}}
{{- end -}}
{{- $rbac := include "yunikorn-userinfo.trustRBAC" . | fromYaml -}}
{{- if $rbac -}}
{{- $probe := dict "verb" "yunikorn-userinfo-wildcard-probe" "group" "wildcard-probe.yunikorn-userinfo.invalid" "resource" "yunikorn-userinfo-wildcard-probes" "groupsResource" "yunikorn-userinfo-wildcard-probes" -}}
{{- range $k := list "verb" "group" "resource" "groupsResource" -}}
{{- if eq (toString (get $rbac $k)) (get $probe $k) -}}
{{- fail (printf "settings.trustRBAC.%s: %q is the name of the wildcard probe, which no rule may grant: choose another" $k (get $probe $k)) -}}
{{- end -}}
{{- end -}}
{{- if eq (toString $rbac.resource) (toString $rbac.groupsResource) -}}
{{- fail (printf "settings.trustRBAC: resource and groupsResource are both %q: they must differ, or a grant to claim a user would also let the submitter claim a group of that name" (toString $rbac.resource)) -}}
{{- end -}}
{{- end -}}
{{- range $i, $e := ($s.workloads | default list) -}}
{{- if kindIs "map" $e -}}
{{- $ops := $e.operators -}}
{{- if kindIs "string" $ops }}{{ $ops = list $ops }}{{ end -}}
{{- range $p := ($ops | default list) -}}
{{- include "settings.workloads[].operators: a pattern is not a Go regular expression" (toString $p) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- define "settings.systemUsers: a pattern is not a Go regular expression" -}}{{- $_ := mustRegexMatch . "" -}}{{- end -}}
{{- define "settings.externalUsers: a pattern is not a Go regular expression" -}}{{- $_ := mustRegexMatch . "" -}}{{- end -}}
{{- define "settings.externalGroups: a pattern is not a Go regular expression" -}}{{- $_ := mustRegexMatch . "" -}}{{- end -}}
{{- define "settings.schedulerUsers: a pattern is not a Go regular expression" -}}{{- $_ := mustRegexMatch . "" -}}{{- end -}}
{{- define "settings.recordedGroups.include: a pattern is not a Go regular expression" -}}{{- $_ := mustRegexMatch . "" -}}{{- end -}}
{{- define "settings.recordedGroups.exclude: a pattern is not a Go regular expression" -}}{{- $_ := mustRegexMatch . "" -}}{{- end -}}
{{- define "settings.adopters.users: a pattern is not a Go regular expression" -}}{{- $_ := mustRegexMatch . "" -}}{{- end -}}
{{- define "settings.adopters.groups: a pattern is not a Go regular expression" -}}{{- $_ := mustRegexMatch . "" -}}{{- end -}}
{{- define "settings.scheduling.processNamespaces: a pattern is not a Go regular expression" -}}{{- $_ := mustRegexMatch . "" -}}{{- end -}}
{{- define "settings.scheduling.bypassNamespaces: a pattern is not a Go regular expression" -}}{{- $_ := mustRegexMatch . "" -}}{{- end -}}
{{- define "settings.scheduling.labelNamespaces: a pattern is not a Go regular expression" -}}{{- $_ := mustRegexMatch . "" -}}{{- end -}}
{{- define "settings.scheduling.noLabelNamespaces: a pattern is not a Go regular expression" -}}{{- $_ := mustRegexMatch . "" -}}{{- end -}}
{{- define "settings.workloads[].operators: a pattern is not a Go regular expression" -}}{{- $_ := mustRegexMatch . "" -}}{{- end -}}

{{/*
The namespace selector of every webhook: excludedNamespaces (kube-system
and cert-manager by default) and the release's own namespace are never
sent to the webhook; namespaceSelector's expressions and labels narrow it
further (all must hold). Called with (list $ "own-namespace").
*/}}
{{- define "yunikorn-userinfo.namespaceSelector" -}}
{{- $root := index . 0 -}}
{{- $own := index . 1 -}}
{{- $sel := $root.Values.namespaceSelector | default (dict) -}}
{{- $byName := dict "key" "kubernetes.io/metadata.name" "operator" "NotIn" "values" (concat $root.Values.excludedNamespaces (list $own) | uniq) -}}
{{- $out := dict "matchExpressions" (prepend ($sel.matchExpressions | default list) $byName) -}}
{{- with $sel.matchLabels }}{{ $_ := set $out "matchLabels" . }}{{ end -}}
{{- toYaml $out -}}
{{- end -}}

{{/* The failurePolicy the webhook configurations are created with: on a
first install with the registration gate, Ignore until the gate's Job has
seen the webhook serve (docs/INSTALL.md, "Install ordering"); else the value. */}}
{{- define "yunikorn-userinfo.registeredFailurePolicy" -}}
{{- if include "yunikorn-userinfo.gated" . -}}
Ignore
{{- else -}}
{{ include "yunikorn-userinfo.failurePolicy" . }}
{{- end -}}
{{- end -}}

{{/* Whether this rendering registers the webhooks behind the gate: a first
install (helm install, helm template) of the standalone webhook that fails
closed, with registrationGate.enabled. */}}
{{- define "yunikorn-userinfo.gated" -}}
{{- if and (include "yunikorn-userinfo.webhook" .) .Values.registrationGate.enabled .Release.IsInstall (eq (include "yunikorn-userinfo.failurePolicy" .) "Fail") }}true{{ end -}}
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

{{/* Where followYuniKornConfig reads YuniKorn's ConfigMaps
(docs/BEHAVIOUR.md §3.11): its namespace, or nothing when it is off. */}}
{{- define "yunikorn-userinfo.followNamespace" -}}
{{- $f := .Values.settings.followYuniKornConfig -}}
{{- if kindIs "map" $f -}}
{{ default "yunikorn" $f.namespace }}
{{- else if and (kindIs "bool" $f) $f -}}
yunikorn
{{- end -}}
{{- end -}}

{{/* The namespace of the YuniKorn ConfigMaps configValidation checks
(docs/BEHAVIOUR.md §3.9), or nothing when it is off. */}}
{{- define "yunikorn-userinfo.configValidationNamespace" -}}
{{- $c := .Values.settings.configValidation -}}
{{- if kindIs "string" $c -}}
{{- if ne $c "off" }}yunikorn{{ end -}}
{{- else if kindIs "map" $c -}}
{{- if ne (default "off" $c.mode) "off" }}{{ default "yunikorn" $c.namespace }}{{ end -}}
{{- end -}}
{{- end -}}

{{/* The match condition that sends a ConfigMap request to the configuration
check: only YuniKorn's two maps in their namespace. request.name and
request.namespace are always strings, so it never fails to evaluate. */}}
{{- define "yunikorn-userinfo.configValidationCondition" -}}
request.namespace == {{ . | squote }} &&
request.name in ['yunikorn-defaults', 'yunikorn-configs']
{{- end -}}

{{/* Whether the policy calls the API server at all. */}}
{{- define "yunikorn-userinfo.needsAPI" -}}
{{- $w := include "yunikorn-userinfo.workloads" . | fromJson -}}
{{- $s := include "yunikorn-userinfo.schedulingReads" . | fromJson -}}
{{- if or (include "yunikorn-userinfo.trustRBAC" .) (include "yunikorn-userinfo.queueCheckNamespace" .) (include "yunikorn-userinfo.configValidationNamespace" .) (include "yunikorn-userinfo.followNamespace" .) $w.reads $s.reads }}true{{ end -}}
{{- end -}}

{{/* What the scheduling setting reads (docs/BEHAVIOUR.md §3.10), as JSON
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

{{/* The PolicyServer's verification ConfigMap: the one named, else, when the
chart creates it from verification.config, RELEASE-verification. */}}
{{- define "yunikorn-userinfo.verificationConfigMap" -}}
{{- $v := .Values.kubewarden.policyServer.verification -}}
{{- if $v.configMapName -}}
{{ $v.configMapName }}
{{- else if $v.config -}}
{{ include "yunikorn-userinfo.fullname" . }}-verification
{{- end -}}
{{- end -}}

{{/* What every container of the registration gate's Job shares: kubectl
(the image's entrypoint) as nobody, with only /tmp writable for its cache. */}}
{{- define "yunikorn-userinfo.gateContainer" -}}
imagePullPolicy: IfNotPresent
{{- with .resources }}
resources:
  {{- toYaml . | nindent 2 }}
{{- end }}
securityContext:
  runAsNonRoot: true
  readOnlyRootFilesystem: true
  allowPrivilegeEscalation: false
  capabilities:
    drop:
      - ALL
volumeMounts:
  - name: tmp
    mountPath: /tmp
{{- end -}}

{{/* Whether the webhook (serve) is installed: modes standalone and hybrid. */}}
{{- define "yunikorn-userinfo.webhook" -}}
{{- if has .Values.mode (list "standalone" "hybrid") }}true{{ end -}}
{{- end -}}

{{/* Whether the CEL policies are installed: modes cel and hybrid. */}}
{{- define "yunikorn-userinfo.cel" -}}
{{- if has .Values.mode (list "cel" "hybrid") }}true{{ end -}}
{{- end -}}

{{/* The webhooks' failurePolicy: in hybrid mode hybrid.webhookFailurePolicy
(Ignore by default, also when a context check enforces: the CEL policies
hold the core while the webhook is down, and while it is up every answer,
a busy one included, is a review the API server applies), else
failurePolicy. */}}
{{- define "yunikorn-userinfo.failurePolicy" -}}
{{- if eq .Values.mode "hybrid" -}}
{{ .Values.hybrid.webhookFailurePolicy }}
{{- else -}}
{{ .Values.failurePolicy }}
{{- end -}}
{{- end -}}

{{/* The MutatingAdmissionPolicy API version: cel.mapAPIVersion, else by the
cluster's version: v1 from Kubernetes 1.36, v1beta1 on 1.34 and 1.35 (behind
its feature gate there). */}}
{{- define "yunikorn-userinfo.mapAPIVersion" -}}
{{- $v := .Values.cel.mapAPIVersion -}}
{{- if $v -}}
admissionregistration.k8s.io/{{ $v }}
{{- else if semverCompare ">=1.36.0-0" .Capabilities.KubeVersion.Version -}}
admissionregistration.k8s.io/v1
{{- else if semverCompare ">=1.34.0-0" .Capabilities.KubeVersion.Version -}}
admissionregistration.k8s.io/v1beta1
{{- else -}}
{{- fail (printf "mode: %s needs MutatingAdmissionPolicy: Kubernetes 1.34 or later (v1beta1 behind its feature gate on 1.34 and 1.35, v1 from 1.36); this cluster is %s (set cel.mapAPIVersion to render for another)" .Values.mode .Capabilities.KubeVersion.Version) -}}
{{- end -}}
{{- end -}}

{{/* A list of patterns as the CEL policies read it: one per line, an empty
pattern (which matches everything) as (?:), a line break inside one as \n
(internal/cel ParamData). Called with (list "settings.KEY" VALUE). */}}
{{- define "yunikorn-userinfo.celList" -}}
{{- $key := index . 0 -}}
{{- $v := index . 1 -}}
{{- if not (kindIs "slice" $v) -}}
{{- fail (printf "%s: modes cel and hybrid take a list of patterns here, not a comma-separated string" $key) -}}
{{- end -}}
{{- $out := list -}}
{{- range $v -}}
{{- $p := toString . -}}
{{- if eq $p "" }}{{ $p = "(?:)" }}{{ end -}}
{{- $out = append $out (replace "\n" "\\n" $p) -}}
{{- end -}}
{{- join "\n" $out -}}
{{- end -}}

{{/* The data of the CEL policies' ConfigMap parameter (internal/cel
ParamData), from settings; a setting left out takes the policy's default.
Called with (list $ DEFAULTS). */}}
{{/* A settings object as a YAML document for a manifest: toYaml, unless
the YAML it writes does not read back as the same settings. Helm's YAML
writer takes U+0085, U+2028 and U+2029 for line breaks, and a pattern that
holds one would then change, or break the manifest. Those settings are
written as JSON (a YAML document too) instead, with yamlSafeJSON's escapes. */}}
{{- define "yunikorn-userinfo.settingsDocument" -}}
{{- $y := toYaml . -}}
{{- if eq (toJson (fromYaml $y)) (toJson .) -}}
{{- $y -}}
{{- else -}}
{{- include "yunikorn-userinfo.yamlSafeJSON" (toJson .) -}}
{{- end -}}
{{- end -}}

{{/* JSON text made safe to place in YAML: the characters that JSON
leaves raw but YAML readers take for a line break (U+0085) or refuse (the
other C1 controls, U+FEFF, U+FFFE, U+FFFF) become \u escapes, which JSON
and YAML's double-quoted strings read alike. (JSON already escapes the
C0 controls, U+2028 and U+2029.) */}}
{{- define "yunikorn-userinfo.yamlSafeJSON" -}}
{{- $t := . -}}
{{- range $r := concat (untilStep 128 160 1) (list 65279 65534 65535) -}}
{{- $t = $t | replace (printf "%c" $r) (printf "\\u%04x" $r) -}}
{{- end -}}
{{- $t -}}
{{- end -}}

{{- define "yunikorn-userinfo.celParams" -}}
{{- $root := index . 0 -}}
{{- $d := index . 1 -}}
{{- $s := $root.Values.settings | default (dict) -}}
{{- $out := dict -}}
{{- range $k, $v := $d }}{{ $_ := set $out $k $v }}{{ end -}}
{{- if hasKey $s "bypassAuth" }}{{ $_ := set $out "bypassAuth" (toString $s.bypassAuth) }}{{ end -}}
{{- if hasKey $s "trustControllers" }}{{ $_ := set $out "trustControllers" (toString $s.trustControllers) }}{{ end -}}
{{- if hasKey $s "userLabelKey" }}{{ $_ := set $out "userLabelKey" (toString $s.userLabelKey) }}{{ end -}}
{{- range $k := list "systemUsers" "externalUsers" "externalGroups" -}}
{{- if hasKey $s $k }}{{ $_ := set $out $k (include "yunikorn-userinfo.celList" (list (printf "settings.%s" $k) (get $s $k))) }}{{ end -}}
{{- end -}}
{{- with $s.recordedGroups -}}
{{- $_ := set $out "recordedGroups" (ternary "omit" "filter" (eq (toString .omit) "true")) -}}
{{- $_ := set $out "recordedGroupsInclude" (include "yunikorn-userinfo.celList" (list "settings.recordedGroups.include" (.include | default list))) -}}
{{- $_ := set $out "recordedGroupsExclude" (include "yunikorn-userinfo.celList" (list "settings.recordedGroups.exclude" (.exclude | default list))) -}}
{{- end -}}
{{- range $k := keys $out | sortAlpha }}
{{ $k }}: {{ include "yunikorn-userinfo.yamlSafeJSON" (get $out $k | toJson) }}
{{- end -}}
{{- end -}}

{{/* Whether a context setting turns its rule on (internal/cel: absent,
null, false, "off", an empty list and an object whose mode is off are off;
trustRBAC and scheduling objects are on). Called with (list KEY VALUE). */}}
{{- define "yunikorn-userinfo.contextOn" -}}
{{- $k := index . 0 -}}
{{- $v := index . 1 -}}
{{- if kindIs "invalid" $v -}}
{{- else if kindIs "bool" $v -}}{{ if $v }}true{{ end -}}
{{- else if kindIs "string" $v -}}{{ if ne $v "off" }}true{{ end -}}
{{- else if kindIs "slice" $v -}}{{ if gt (len $v) 0 }}true{{ end -}}
{{- else if kindIs "map" $v -}}
{{- if has $k (list "trustRBAC" "scheduling") }}true{{ else if ne (toString (default "on" $v.mode)) "off" }}true{{ end -}}
{{- else -}}true
{{- end -}}
{{- end -}}

{{/* Checks of modes cel and hybrid: settings the CEL policies cannot
express are refused for mode cel (they need the webhook), and those that
admit what the CEL policies refuse are refused for mode hybrid. */}}
{{- define "yunikorn-userinfo.validateCEL" -}}
{{- if include "yunikorn-userinfo.cel" . -}}
{{- $file := .Files.Get "files/cel-policies.json" | fromJson -}}
{{- $on := include "yunikorn-userinfo.contextKeysOn" . | fromJsonArray -}}
{{- if eq .Values.mode "cel" -}}
{{- if $on -}}
{{- $parts := list -}}
{{- $alone := list -}}
{{- range $on }}{{ $parts = append $parts (printf "settings.%s (%s)" . (get $file.contextKeys .)) }}{{ if has . $file.standaloneKeys }}{{ $alone = append $alone (printf "settings.%s" .) }}{{ end }}{{ end -}}
{{- if $alone -}}
{{- fail (printf "mode: cel cannot express %s: these rules need the webhook; use mode standalone (or kubewarden): mode hybrid cannot use %s either, since the webhook would admit a supplied annotation the CEL policies refuse" (join ", " $parts) (join ", " $alone)) -}}
{{- end -}}
{{- fail (printf "mode: cel cannot express %s: these rules need the webhook; use mode hybrid (CEL for the core rules, the webhook for these) or standalone" (join ", " $parts)) -}}
{{- end -}}
{{- if ne .Values.failurePolicy "Fail" -}}
{{- fail "failurePolicy: mode cel always fails closed (an expression that errs, or a missing parameter, refuses); set Fail, or monitor: true to warn instead of refusing" -}}
{{- end -}}
{{- else -}}
{{- $loose := list -}}
{{- range $on }}{{ if has . $file.standaloneKeys }}{{ $loose = append $loose (printf "settings.%s" .) }}{{ end }}{{ end -}}
{{- if $loose -}}
{{- fail (printf "mode: hybrid cannot use %s: the webhook would admit a supplied annotation (an operator's copy, an adoption, or one the followed yunikorn-configs trusts) that the CEL policies refuse; use mode standalone (or kubewarden), which takes them" (join ", " $loose)) -}}
{{- end -}}
{{- if not (has .Values.hybrid.webhookFailurePolicy (list "Fail" "Ignore")) -}}
{{- fail (printf "hybrid.webhookFailurePolicy: %q is not Fail or Ignore" .Values.hybrid.webhookFailurePolicy) -}}
{{- end -}}
{{- end -}}
{{- if and .Values.cel.mapAPIVersion (not (has .Values.cel.mapAPIVersion (list "v1" "v1beta1"))) -}}
{{- fail (printf "cel.mapAPIVersion: %q is not v1 or v1beta1" .Values.cel.mapAPIVersion) -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* Whether the validating twin's webhook for Pods and workloads carries
the match condition that lets the API server skip it for a Pod create
whose annotation is the submitter's own record (internal/cel
TwinCondition): validatingTwinSkipsOwnRecord, and settings that turn on
no rule needing context and leave recordedGroups unset (the condition
writes the record with every group). */}}
{{- define "yunikorn-userinfo.twinCondition" -}}
{{- if .Values.validatingTwinSkipsOwnRecord -}}
{{- $s := .Values.settings | default (dict) -}}
{{- if not (or (include "yunikorn-userinfo.contextKeysOn" . | fromJsonArray) $s.recordedGroups) }}true{{ end -}}
{{- end -}}
{{- end -}}

{{/* The settings keys, sorted, that turn on a rule needing the cluster
(files/cel-policies.json's contextKeys, contextOn), as a JSON list: what
modes cel and hybrid refuse, and what keeps the twin's condition out. */}}
{{- define "yunikorn-userinfo.contextKeysOn" -}}
{{- $file := .Files.Get "files/cel-policies.json" | fromJson -}}
{{- $s := .Values.settings | default (dict) -}}
{{- $on := list -}}
{{- range $k := keys $file.contextKeys | sortAlpha -}}
{{- if and (hasKey $s $k) (include "yunikorn-userinfo.contextOn" (list $k (get $s $k))) -}}
{{- $on = append $on $k -}}
{{- end -}}
{{- end -}}
{{- toJson $on -}}
{{- end -}}

{{/* The twin's match condition: files/cel-policies.json's template with the
allow-lists' patterns written in (internal/cel FillTwinCondition does the
same; test/manifests compares the two): systemUsers when trustControllers
is on (the policy's defaults when systemUsers is unset), externalUsers,
externalGroups. A list written as one string is left out: fewer Pods skip
the twin, never more. */}}
{{- define "yunikorn-userinfo.twinConditionExpression" -}}
{{- $file := .Files.Get "files/cel-policies.json" | fromJson -}}
{{- $tw := $file.twin -}}
{{- $s := .Values.settings | default (dict) -}}
{{- $users := list -}}
{{- if ne (toString $s.trustControllers) "false" -}}
{{- $sys := $s.systemUsers -}}
{{- if not (hasKey $s "systemUsers") -}}
{{- $sys = splitList "\n" $file.defaults.systemUsers -}}
{{- end -}}
{{- if kindIs "slice" $sys -}}
{{- range $sys }}{{ $users = append $users (printf $tw.userMatch (toJson .)) }}{{ end -}}
{{- end -}}
{{- end -}}
{{- if kindIs "slice" $s.externalUsers -}}
{{- range $s.externalUsers }}{{ $users = append $users (printf $tw.userMatch (toJson .)) }}{{ end -}}
{{- end -}}
{{- $groups := list -}}
{{- if kindIs "slice" $s.externalGroups -}}
{{- range $s.externalGroups }}{{ $groups = append $groups (printf $tw.groupMatch (toJson .)) }}{{ end -}}
{{- end -}}
{{- $u := "false" -}}
{{- if $users }}{{ $u = printf "(%s)" (join " || " $users) }}{{ end -}}
{{- $g := "false" -}}
{{- if $groups }}{{ $g = printf "(%s)" (join " || " $groups) }}{{ end -}}
{{- $tw.template | replace $tw.usersPlaceholder $u | replace $tw.groupsPlaceholder $g -}}
{{- end -}}

{{/* Whether the validating twin is installed: validatingTwin, and in mode
hybrid hybrid.validatingTwin (off by default: the ValidatingAdmissionPolicies
hold the core after every mutation, which is the twin's job in standalone). */}}
{{- define "yunikorn-userinfo.twin" -}}
{{- if eq .Values.mode "hybrid" -}}
{{- if .Values.hybrid.validatingTwin }}true{{ end -}}
{{- else if .Values.validatingTwin }}true{{ end -}}
{{- end -}}
