{{/* Chart name, overridable. */}}
{{- define "easyscale.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Object-name prefix: <release>-<chart>, or the release name when it already has the chart name. */}}
{{- define "easyscale.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{/* Labels on every object. */}}
{{- define "easyscale.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
app.kubernetes.io/name: {{ include "easyscale.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{/* Selector labels of one component; call with (dict "root" $ "component" "operator"). */}}
{{- define "easyscale.selectorLabels" -}}
app.kubernetes.io/name: {{ include "easyscale.name" .root }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end }}

{{/* All labels of one component's objects; same argument as selectorLabels. */}}
{{- define "easyscale.componentLabels" -}}
{{ include "easyscale.labels" .root }}
app.kubernetes.io/component: {{ .component }}
{{- end }}

{{/* Image reference of one component; call with (dict "root" $ "image" .Values.operator.image). */}}
{{- define "easyscale.image" -}}
{{- $tag := .image.tag | default .root.Values.image.tag | default .root.Chart.AppVersion }}
{{- printf "%s/%s:%s" .root.Values.image.registry .image.repository $tag }}
{{- end }}

{{- define "easyscale.operator.fullname" -}}
{{- printf "%s-operator" (include "easyscale.fullname" .) | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "easyscale.devicePlugin.fullname" -}}
{{- printf "%s-device-plugin" (include "easyscale.fullname" .) | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "easyscale.operator.serviceAccountName" -}}
{{- default (include "easyscale.operator.fullname" .) .Values.operator.serviceAccount.name }}
{{- end }}

{{- define "easyscale.devicePlugin.serviceAccountName" -}}
{{- default (include "easyscale.devicePlugin.fullname" .) .Values.devicePlugin.serviceAccount.name }}
{{- end }}

{{/* Name of the Service workers reach the operator's control port through. */}}
{{- define "easyscale.controlService.name" -}}
{{- printf "%s-control" (include "easyscale.operator.fullname" .) | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* URL workers use for the control protocol (EASYSCALE_CONTROL_URL). */}}
{{- define "easyscale.controlURL" -}}
{{- printf "http://%s.%s.svc:%v" (include "easyscale.controlService.name" .) .Release.Namespace .Values.controlService.port }}
{{- end }}

{{/* Container securityContext shared by the operator and the device plugin. */}}
{{- define "easyscale.containerSecurityContext" -}}
allowPrivilegeEscalation: false
readOnlyRootFilesystem: true
capabilities:
  drop: ["ALL"]
{{- end }}

{{/* Fails rendering with a clear message when values contradict each other. */}}
{{- define "easyscale.validateValues" -}}
{{- if and (gt (int .Values.operator.replicas) 1) (not .Values.operator.leaderElect) }}
{{- fail "operator.replicas > 1 needs operator.leaderElect=true: two operators without a leader would both reconcile" }}
{{- end }}
{{- if lt (int .Values.operator.replicas) 1 }}
{{- fail "operator.replicas must be >= 1" }}
{{- end }}
{{- end }}

{{- define "easyscale.metricsService.name" -}}
{{- printf "%s-metrics" (include "easyscale.operator.fullname" .) | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* The Secret holding the key of the per-job control tokens. */}}
{{- define "easyscale.controlKeySecret.name" -}}
{{- printf "%s-control-key" (include "easyscale.fullname" .) | trunc 63 | trimSuffix "-" }}
{{- end }}
