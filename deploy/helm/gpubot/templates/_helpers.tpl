{{/* Labels on every object. */}}
{{- define "gpubot.labels" -}}
app.kubernetes.io/name: gpubot
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{/* What the Deployment and Service select on. */}}
{{- define "gpubot.selector" -}}
app.kubernetes.io/name: gpubot
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{/* The image reference: repository, then @digest or :tag. */}}
{{- define "gpubot.image" -}}
{{- if .Values.image.digest -}}
{{ .Values.image.repository }}@{{ .Values.image.digest }}
{{- else -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end -}}
{{- end -}}

{{/* The Secret holding the Slack tokens. */}}
{{- define "gpubot.secretName" -}}
{{- if .Values.slack.existingSecret -}}
{{ .Values.slack.existingSecret }}
{{- else if and .Values.slack.botToken .Values.slack.appToken -}}
gpubot-slack
{{- else -}}
{{ fail "gpubot needs its Slack tokens: set slack.existingSecret to a Secret with SLACK_BOT_TOKEN and SLACK_APP_TOKEN, or both slack.botToken and slack.appToken" }}
{{- end -}}
{{- end -}}

{{/* The team namespaces of the configuration, sorted, one per line: a
team's namespace: key, or its name, as gpubot rbac does. */}}
{{- define "gpubot.teamNamespaces" -}}
{{- $cfg := required "config (gpubot.yaml) is required" .Values.config | fromYaml -}}
{{- if hasKey $cfg "Error" -}}
{{ fail (printf "config is not YAML: %s" $cfg.Error) }}
{{- end -}}
{{- $ns := list -}}
{{- range $cfg.teams -}}
{{- $ns = append $ns (.namespace | default .name) -}}
{{- end -}}
{{- $ns | uniq | sortAlpha | join "\n" -}}
{{- end -}}
