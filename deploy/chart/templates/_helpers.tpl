{{- define "clusterregistry.name" -}}
{{- printf "%s-controllers" .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "clusterregistry.labels" -}}
app.kubernetes.io/name: clusterregistry-controllers
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- end -}}

{{- /* fleet-api's objects: the same labels, named as its Pods are. */ -}}
{{- define "clusterregistry.fleetAPILabels" -}}
{{ include "clusterregistry.labels" . | replace "app.kubernetes.io/name: clusterregistry-controllers" "app.kubernetes.io/name: fleet-api" }}
{{- end -}}

{{- /* The tunnel server's objects. */ -}}
{{- define "clusterregistry.tunnelLabels" -}}
{{ include "clusterregistry.labels" . | replace "app.kubernetes.io/name: clusterregistry-controllers" "app.kubernetes.io/name: tunnel-server" }}
{{- end -}}

{{- /* A reader's tunnel flags (the controllers', fleet-api's), when the chart runs the tunnel server. */ -}}
{{- define "clusterregistry.tunnelArgs" -}}
{{- if .Values.tunnel.enabled }}
- --tunnel-server={{ printf "%s-tunnel" .Release.Name | trunc 63 | trimSuffix "-" }}.{{ .Release.Namespace }}.svc:{{ .Values.tunnel.frontendPort }}
- --tunnel-ca=/tunnel/ca.crt
- --tunnel-cert=/tunnel/tls.crt
- --tunnel-key=/tunnel/tls.key
{{- end }}
{{- end -}}

{{- define "clusterregistry.selector" -}}
app.kubernetes.io/name: clusterregistry-controllers
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{/* The ClusterRoles each controller needs (the names of deploy/'s files' roles). */}}
{{- define "clusterregistry.roles" -}}
{{- $roles := list "health" -}}
{{- if has "rotation" .Values.controllers }}{{ $roles = append $roles "health-rotation" }}{{ end -}}
{{- if has "clusterprofiles" .Values.controllers }}{{ $roles = append $roles "health-clusterprofiles" }}{{ end -}}
{{- if has "placements" .Values.controllers }}{{ $roles = append $roles "placements" }}{{ end -}}
{{- if has "releases" .Values.controllers }}{{ $roles = append $roles "releases" }}{{ end -}}
{{- toJson $roles -}}
{{- end -}}
