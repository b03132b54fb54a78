{{/* Names, labels and the image shared by every template. */}}

{{- define "tephra.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "tephra.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else if contains (include "tephra.name" .) .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name (include "tephra.name" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{/* Labels of every object; pass a dict with "root" and "component". */}}
{{- define "tephra.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .root.Chart.Name .root.Chart.Version | replace "+" "_" }}
{{ include "tephra.selectorLabels" . }}
app.kubernetes.io/version: {{ .root.Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .root.Release.Service }}
app.kubernetes.io/part-of: tephra
{{- end -}}

{{- define "tephra.selectorLabels" -}}
app.kubernetes.io/name: {{ include "tephra.name" .root }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{- define "tephra.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}

{{/* One component's object name: <fullname>-<component>. */}}
{{- define "tephra.component" -}}
{{- printf "%s-%s" (include "tephra.fullname" .root) .component | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* The ServiceAccount a member grants tephra (memberAccess). */}}
{{- define "tephra.memberAccount" -}}
{{- include "tephra.component" (dict "root" . "component" "member") -}}
{{- end -}}

{{/* Pod fields every component shares: image pull secrets, security context, placement. */}}
{{- define "tephra.podCommon" -}}
{{- with .root.Values.imagePullSecrets }}
imagePullSecrets:
  {{- toYaml . | nindent 2 }}
{{- end }}
securityContext:
  {{- toYaml .root.Values.podSecurityContext | nindent 2 }}
{{- with .values.priorityClassName }}
priorityClassName: {{ . }}
{{- end }}
{{- with .values.nodeSelector }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .values.tolerations }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .values.affinity }}
affinity:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end -}}

{{/* The downward-API environment every component reads its identity from. */}}
{{- define "tephra.podEnv" -}}
- name: POD_NAME
  valueFrom:
    fieldRef: {fieldPath: metadata.name}
- name: POD_NAMESPACE
  valueFrom:
    fieldRef: {fieldPath: metadata.namespace}
{{- end -}}

{{/* A component's Role in the release namespace: its leader Lease (leader.rs: get, create,
and update to renew), and with "secrets" the members' credential Secrets (members.rs). */}}
{{- define "tephra.namespaceRole" -}}
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata:
  name: {{ .name }}
  namespace: {{ .root.Release.Namespace }}
  labels:
    {{- include "tephra.labels" (dict "root" .root "component" .component) | nindent 4 }}
rules:
  - apiGroups: [coordination.k8s.io]
    resources: [leases]
    verbs: [get, create, update]
  {{- if .secrets }}
  # members.rs and cluster_status.rs: the members' credentials; the scheduler watches each
  # member's Secret (by name) to use a rotated token at once.
  - apiGroups: [""]
    resources: [secrets]
    verbs: [get{{ if .watchSecrets }}, list, watch{{ end }}]
  {{- end }}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata:
  name: {{ .name }}
  namespace: {{ .root.Release.Namespace }}
  labels:
    {{- include "tephra.labels" (dict "root" .root "component" .component) | nindent 4 }}
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: Role
  name: {{ .name }}
subjects:
  - kind: ServiceAccount
    name: {{ .name }}
    namespace: {{ .root.Release.Namespace }}
{{- end -}}
