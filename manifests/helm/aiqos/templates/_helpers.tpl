{{/* Labels every object carries (the same as manifests/: the selector of
     the DaemonSet is immutable, so a kustomize install can be taken over by
     the chart and back). COMPONENT is "agent" or "". */}}
{{- define "aiqos.labels" -}}
app.kubernetes.io/name: aiqos
{{- if .component }}
app.kubernetes.io/component: {{ .component }}
{{- end }}
{{- with .root.Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{- define "aiqos.selectorLabels" -}}
app.kubernetes.io/name: aiqos
app.kubernetes.io/component: agent
{{- end -}}

{{/* repository:tag or repository@digest */}}
{{- define "aiqos.image" -}}
{{- if .Values.image.digest -}}
{{ .Values.image.repository }}@{{ .Values.image.digest }}
{{- else -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end -}}
{{- end -}}

{{/* The agent's --metrics-addr. */}}
{{- define "aiqos.metricsAddr" -}}
{{- if eq .Values.metrics.bindAddress "podIP" -}}
$(POD_IP):{{ .Values.metrics.port }}
{{- else if hasPrefix "[" .Values.metrics.bindAddress -}}
{{ .Values.metrics.bindAddress }}:{{ .Values.metrics.port }}
{{- else if contains ":" .Values.metrics.bindAddress -}}
[{{ .Values.metrics.bindAddress }}]:{{ .Values.metrics.port }}
{{- else -}}
{{ .Values.metrics.bindAddress }}:{{ .Values.metrics.port }}
{{- end -}}
{{- end -}}

{{/* The host the kubelet probes: "" (its default, the pod IP) unless the
     agent listens on loopback only. */}}
{{- define "aiqos.probeHost" -}}
{{- if eq .Values.metrics.bindAddress "127.0.0.1" -}}
127.0.0.1
{{- else if has .Values.metrics.bindAddress (list "::1" "[::1]") -}}
"::1"
{{- end -}}
{{- end -}}

{{- define "aiqos.scrapable" -}}
{{- if has .Values.metrics.bindAddress (list "127.0.0.1" "::1" "[::1]") -}}
{{- fail "metrics.bindAddress is node-local (loopback): a Service, ServiceMonitor or PodMonitor cannot reach it; use podIP" -}}
{{- end -}}
{{- end -}}
