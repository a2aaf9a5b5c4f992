{{/* Full name: the release name, with the chart name when it is not in it. */}}
{{- define "skald.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 50 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 50 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "skald.peers" -}}{{ include "skald.fullname" . }}-peers{{- end -}}

{{- define "skald.selectorLabels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "skald.labels" -}}
{{ include "skald.selectorLabels" . }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end -}}

{{- define "skald.secretName" -}}
{{- default (printf "%s-auth" (include "skald.fullname" .)) .Values.auth.existingSecret -}}
{{- end -}}

{{- define "skald.tlsSecretName" -}}
{{- default (printf "%s-tls" (include "skald.fullname" .)) .Values.tls.secretName -}}
{{- end -}}

{{/* The DNS name of pod $i through the headless Service. */}}
{{- define "skald.podHost" -}}
{{- $ := index . 0 -}}
{{- printf "%s-%d.%s.%s.svc.%s" (include "skald.fullname" $) (index . 1) (include "skald.peers" $) $.Release.Namespace $.Values.clusterDomain -}}
{{- end -}}

{{- define "skald.scheme" -}}{{ if .Values.tls.enabled }}HTTPS{{ else }}HTTP{{ end }}{{- end -}}
