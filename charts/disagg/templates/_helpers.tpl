{{/* Names and labels shared by every template. */}}

{{- define "disagg.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "disagg.fullname" -}}
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

{{- define "disagg.selectorLabels" -}}
app.kubernetes.io/name: {{ include "disagg.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: operator
{{- end }}

{{- define "disagg.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 }}
{{ include "disagg.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: disagg
{{- end }}

{{- define "disagg.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "disagg.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- required "serviceAccount.name: set the name of an existing ServiceAccount when serviceAccount.create is false" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{- define "disagg.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}

{{/*
RBAC rules, split by scope so that namespaced mode grants namespaced resources through a Role
per watched namespace and only the cluster-scoped reads kopf needs through a ClusterRole.
Every rule is backed by an API call the operator makes; tests/integration/chart compares
these rules with the calls recorded against the API emulator, in both directions.
*/}}
{{- define "disagg.rules.namespaced" -}}
- apiGroups: [disagg.dev]
  resources: [disaggregateddeployments]
  verbs: [get, list, watch, patch]
- apiGroups: [disagg.dev]
  resources: [disaggregateddeployments/status]
  verbs: [get, patch]
- apiGroups: [""]
  resources: [pods, services, secrets]
  verbs: [get, list, watch, create, patch, delete]
- apiGroups: [networking.k8s.io]
  resources: [networkpolicies]
  verbs: [get, list, watch, create, patch, delete]
- apiGroups: [""]
  resources: [events]
  verbs: [create, patch]
{{- if .Values.llmd.enabled }}
- apiGroups: [inference.networking.x-k8s.io]
  resources: [inferencepools]
  verbs: [get, list, watch, create, patch, delete]
{{- end }}
{{- end }}

{{- define "disagg.rules.cluster" -}}
- apiGroups: [apiextensions.k8s.io]
  resources: [customresourcedefinitions]
  verbs: [list, watch]
{{- end }}
