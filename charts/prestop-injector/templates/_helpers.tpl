{{/* Names, labels and version gates shared by the templates. */}}

{{- define "prestop-injector.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* The release name alone when it already contains the chart name (the usual
`helm install prestop-injector ...` gives the same names as deploy/). */}}
{{- define "prestop-injector.fullname" -}}
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

{{- define "prestop-injector.reaperName" -}}
{{- printf "%s-reaper" (include "prestop-injector.fullname" .) | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* The DaemonSet on every node: the node agent, and the reaper when enabled, in one pod. */}}
{{- define "prestop-injector.nodeName" -}}
{{- printf "%s-node" (include "prestop-injector.fullname" .) | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "prestop-injector.nodeEnabled" -}}
{{- if or .Values.nodeAgent.enabled .Values.reaper.enabled }}true{{ end }}
{{- end }}

{{- define "prestop-injector.tlsSecret" -}}
{{- printf "%s-tls" (include "prestop-injector.fullname" .) }}
{{- end }}

{{- define "prestop-injector.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
app.kubernetes.io/part-of: prestop-injector
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
{{- end }}

{{/* Selector labels never change over a release's life (selectors are immutable). */}}
{{- define "prestop-injector.selectorLabels" -}}
app.kubernetes.io/name: {{ include "prestop-injector.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: webhook
{{- end }}

{{- define "prestop-injector.reaperSelectorLabels" -}}
app.kubernetes.io/name: {{ include "prestop-injector.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: reaper
{{- end }}

{{- define "prestop-injector.nodeSelectorLabels" -}}
app.kubernetes.io/name: {{ include "prestop-injector.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: node
{{- end }}

{{- define "prestop-injector.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}

{{/* Version gates, the same as src/kube_version.rs. */}}
{{- define "prestop-injector.hasMatchConditions" -}}
{{- if semverCompare ">=1.28-0" .Capabilities.KubeVersion.Version }}true{{ end }}
{{- end }}
{{- define "prestop-injector.hasSleepAction" -}}
{{- if semverCompare ">=1.30-0" .Capabilities.KubeVersion.Version }}true{{ end }}
{{- end }}
{{- define "prestop-injector.pdbApiVersion" -}}
{{- if semverCompare ">=1.21-0" .Capabilities.KubeVersion.Version }}policy/v1{{ else }}policy/v1beta1{{ end }}
{{- end }}

{{/* The namespaces both webhooks never see: the system ones, the release's own, and
webhook.excludedNamespaces, each once. */}}
{{- define "prestop-injector.excludedNamespaces" -}}
{{- $names := list "kube-system" "kube-public" "kube-node-lease" .Release.Namespace }}
{{- $names = concat $names .Values.webhook.excludedNamespaces | uniq }}
{{- toYaml $names }}
{{- end }}

{{/* The configuration file: the values' config, with cleaner.image defaulting to the
webhook's own image (the kustomize install has to keep the two equal by hand), and
nodeAgent exactly when the agent runs (nodeAgent.enabled): never a socket nobody serves. */}}
{{- define "prestop-injector.config" -}}
{{- $config := deepCopy .Values.config }}
{{- $cleaner := default dict $config.cleaner }}
{{- if not $cleaner.image }}
{{- $_ := set $cleaner "image" (include "prestop-injector.image" .) }}
{{- end }}
{{- $_ := set $config "cleaner" $cleaner }}
{{- if .Values.nodeAgent.enabled }}
{{- $_ := set $config "nodeAgent" (dict "hostDirectory" .Values.nodeAgent.hostDirectory) }}
{{- end }}
{{- toYaml $config }}
{{- end }}
