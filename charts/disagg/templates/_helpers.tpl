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

{{/* The Secret holding the operator's root key: the user's, or the one the chart makes. */}}
{{- define "disagg.rootKeySecret" -}}
{{- default (printf "%s-root-key" (include "disagg.fullname" .)) .Values.rootKey.existingSecret }}
{{- end }}

{{- define "disagg.rootKeyKey" -}}
{{- if .Values.rootKey.existingSecret }}{{ .Values.rootKey.existingSecretKey }}{{ else }}root-key{{ end }}
{{- end }}

{{/* replicaCount, refused above 1 without leader election, and election timings checked. */}}
{{- define "disagg.replicas" -}}
{{- $le := .Values.leaderElection }}
{{- if and (gt (int .Values.replicaCount) 1) (not $le.enabled) }}
{{- fail (printf "replicaCount: %d replicas need leaderElection.enabled=true (without it every replica would reconcile); set replicaCount: 1 or enable leader election" (int .Values.replicaCount)) }}
{{- end }}
{{- if and $le.enabled (ge (float64 $le.renewDeadlineSeconds) (float64 $le.leaseDurationSeconds)) }}
{{- fail "leaderElection.renewDeadlineSeconds must be below leaderElection.leaseDurationSeconds: the leader must stop before a standby may take over" }}
{{- end }}
{{- if and $le.enabled (le (float64 $le.renewDeadlineSeconds) (mulf 1.2 $le.retryPeriodSeconds)) }}
{{- fail "leaderElection.renewDeadlineSeconds must be above 1.2 x leaderElection.retryPeriodSeconds: at least one renewal must fit" }}
{{- end }}
{{- int .Values.replicaCount }}
{{- end }}

{{/* The transfer canary's image for vLLM decode pods: the one given, else this release's
worker image (same tag as the operator's). */}}
{{- define "disagg.canaryImage" -}}
{{- .Values.transferCanary.image | default (printf "%s:%s" .Values.transferCanary.repository (default .Chart.AppVersion .Values.image.tag)) }}
{{- end }}

{{- define "disagg.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}

{{/*
RBAC rules, split by scope: namespaced resources (granted through a Role per watched
namespace in namespaced mode) and cluster-scoped reads kopf makes. Each verb is one the
operator really calls; tests/chart/test_rbac_minimal.py records the operator's
calls against the API emulator and fails on any difference, in both directions.
- The custom resource: kopf lists/watches it (its index is the reconciler's cache); the
  reconciler patches its status subresource and never writes the resource itself (only
  event handlers are registered, so kopf keeps no bookkeeping on it).
- Children: kopf lists and watches them (child events trigger a reconcile and fill the
  cache the reconciler reads; the periodic resync lists them once per pass to find
  objects deleted without an event); the reconciler creates what is missing, patches drift (Services, NetworkPolicies,
  PodDisruptionBudgets; pods are replaced, never patched), deletes what is no longer
  desired (pods, the Service of a role scaled to 0, the PodDisruptionBudget of a role
  scaled to 0 or whose budget is turned off). NetworkPolicies are never deleted: every
  deployment always has one, and owner references let the garbage collector remove it.
- LeaderWorkerSets (kubernetes-sigs/lws): the instances of a role whose nodesPerInstance
  is above 1, watched, created and deleted like pods (never patched: a new spec is a new
  object). Granted always: a cluster without the LWS CRD has nothing to watch (the
  operator skips the kind), and a rule for an absent API group grants nothing.
- Secrets: create only, never get/list/watch. Each deployment's handshake Secret holds a
  key derived from the root key (mounted from a Secret volume, which needs no RBAC), so
  the operator never reads a Secret back; it creates it with the pods (409: it exists).
- Events: Warning events for invalid specs (routine events are not posted).
- The router's ServiceAccount, Role and RoleBinding (spec.routing.transferLocality): read
  by name on each reconcile of a deployment with a router section, written while its
  locality is on. Their Role lets the router get, list and watch EndpointSlices (the pods'
  zones), so the operator holds that read itself: Kubernetes refuses to create a Role
  granting what its creator lacks (RBAC escalation check). The operator never reads them.
- InferencePools (only with llmd.enabled): read by name (get) on each reconcile of a
  deployment whose spec has an llmd section (a cluster without the CRD answers 404, which
  is fine), written while its llm-d is enabled. Without the grant, such a lookup answers
  403 and the operator observes no pool.
  One API group per entry of llmd.inferencePoolVersions, the versions deployments render
  (spec.llmd.inferencePool.version): v1 is inference.networking.k8s.io.
- PodMonitors and PrometheusRules (monitoring.coreos.com): only with monitoring.enabled;
  read by name on every reconcile of a deployment with a spec.monitoring section, written
  while it is enabled. With them, ConfigMaps get: the autoscaler reads the profile
  ConfigMap spec.autoscaling.profile names (autoscaling needs spec.monitoring).
*/}}
{{- define "disagg.rules.namespaced" -}}
- apiGroups: [disagg.dev]
  resources: [disaggregateddeployments]
  verbs: [list, watch]
- apiGroups: [disagg.dev]
  resources: [disaggregateddeployments/status]
  verbs: [patch]
- apiGroups: [""]
  resources: [pods]
  verbs: [list, watch, create, delete]
- apiGroups: [""]
  resources: [services]
  verbs: [list, watch, create, patch, delete]
- apiGroups: [""]
  resources: [secrets]
  verbs: [create]
- apiGroups: [""]
  resources: [configmaps]
  verbs: [list, watch, create, patch, delete]
- apiGroups: [networking.k8s.io]
  resources: [networkpolicies]
  verbs: [list, watch, create, patch]
- apiGroups: [policy]
  resources: [poddisruptionbudgets]
  verbs: [list, watch, create, patch, delete]
- apiGroups: [apps]
  resources: [deployments]
  verbs: [list, watch, create, patch, delete]
- apiGroups: [leaderworkerset.x-k8s.io]
  resources: [leaderworkersets]
  verbs: [list, watch, create, delete]
- apiGroups: [""]
  resources: [serviceaccounts]
  verbs: [get, create, delete]
- apiGroups: [rbac.authorization.k8s.io]
  resources: [roles]
  verbs: [get, create, patch, delete]
- apiGroups: [rbac.authorization.k8s.io]
  resources: [rolebindings]
  verbs: [get, create, patch, delete]
- apiGroups: [discovery.k8s.io]
  resources: [endpointslices]
  verbs: [get, list, watch]
- apiGroups: [""]
  resources: [events]
  verbs: [create]
{{- if .Values.llmd.enabled }}
{{- range .Values.llmd.inferencePoolVersions }}
- apiGroups: [inference.networking.k8s.io]
  resources: [inferencepools]
  verbs: [get, create, patch, delete]
{{- end }}
{{- end }}
{{- if .Values.monitoring.enabled }}
- apiGroups: [monitoring.coreos.com]
  resources: [podmonitors, prometheusrules]
  verbs: [get, create, patch, delete]
- apiGroups: [""]
  resources: [configmaps]
  verbs: [get]
{{- end }}
{{- end }}

{{/*
Cluster-scoped reads: kopf watches CustomResourceDefinitions to notice resources appear,
and in namespaced mode lists and watches Namespaces to find the ones it serves.
*/}}
{{- define "disagg.rules.cluster" -}}
- apiGroups: [apiextensions.k8s.io]
  resources: [customresourcedefinitions]
  verbs: [list, watch]
{{- if .Values.watchNamespaces }}
- apiGroups: [""]
  resources: [namespaces]
  verbs: [list, watch]
{{- end }}
{{- end }}
