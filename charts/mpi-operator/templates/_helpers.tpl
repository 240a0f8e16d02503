{{/* The name of every object; upstream's by default. */}}
{{- define "mpi-operator.fullname" -}}
{{- .Values.fullnameOverride | default "mpi-operator" | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "mpi-operator.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- .Values.serviceAccount.name | default (include "mpi-operator.fullname" .) -}}
{{- else -}}
{{- .Values.serviceAccount.name | default "default" -}}
{{- end -}}
{{- end -}}

{{/* Upstream's labels, which are also the Deployment's (immutable) selector. */}}
{{- define "mpi-operator.selectorLabels" -}}
app: mpi-operator
app.kubernetes.io/component: mpijob
app.kubernetes.io/name: mpi-operator
kustomize.component: mpi-operator
{{- end -}}

{{- define "mpi-operator.labels" -}}
{{ include "mpi-operator.selectorLabels" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- end -}}

{{/* The namespace the operator watches; empty means all. */}}
{{- define "mpi-operator.watchNamespace" -}}
{{- if .Values.operator.namespace -}}
{{- .Values.operator.namespace -}}
{{- else if eq .Values.rbac.scope "namespace" -}}
{{- .Release.Namespace -}}
{{- end -}}
{{- end -}}

{{- define "mpi-operator.image" -}}
{{- if .Values.image.digest -}}
{{ .Values.image.repository }}@{{ .Values.image.digest }}
{{- else -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end -}}
{{- end -}}

{{/*
What the operator calls in the namespaces it watches; deploy/base/cluster-role.yaml grants the
same (tests/unit/test_chart.py compares them).
*/}}
{{- define "mpi-operator.namespacedRules" -}}
# Informer (list, watch), the CRD check at start-up (list) and status writes (PUT /status);
# delete once runPolicy.ttlSecondsAfterFinished has passed.
- apiGroups: [kubeflow.org]
  resources: [mpijobs]
  verbs: [list, watch, delete]
- apiGroups: [kubeflow.org]
  resources: [mpijobs/status]
  verbs: [update]
# blockOwnerDeletion on children (OwnerReferencesPermissionEnforcement).
- apiGroups: [kubeflow.org]
  resources: [mpijobs/finalizers]
  verbs: [update]
# The nodes, for the hostfile's order by network domain and each domain's room (all namespaces watched).
- apiGroups: [""]
  resources: [nodes]
  verbs: [list, watch]
- apiGroups: [""]
  resources: [pods]
  verbs: [get, list, watch, create, update, delete]
- apiGroups: [""]
  resources: [configmaps, secrets, serviceaccounts, services]
  verbs: [get, list, watch, create, update]
# A KubectlExec launcher's exec access, revoked once the job stops running.
- apiGroups: [rbac.authorization.k8s.io]
  resources: [roles, rolebindings]
  verbs: [get, list, watch, create, update, delete]
# Held only so the operator may grant it to a launcher (RBAC forbids granting more).
- apiGroups: [""]
  resources: [pods/exec]
  verbs: [create]
- apiGroups: [""]
  resources: [events]
  verbs: [create, patch]
- apiGroups: [batch]
  resources: [jobs]
  verbs: [get, list, watch, create, update]
# Resume clears the launcher Job's status.startTime.
- apiGroups: [batch]
  resources: [jobs/status]
  verbs: [update]
{{- end -}}

{{/*
The gang strategy operator.gangScheduling selects, as gang.select_gang_scheduler does: volcano,
koordinator (koord-scheduler), native (scheduling.k8s.io/podgroup), coscheduling (any other
scheduler name), or empty (off).
*/}}
{{- define "mpi-operator.gangStrategy" -}}
{{- $name := .Values.operator.gangScheduling -}}
{{- if eq $name "volcano" -}}
volcano
{{- else if eq $name "koord-scheduler" -}}
koordinator
{{- else if eq $name "scheduling.k8s.io/podgroup" -}}
native
{{- else if $name -}}
coscheduling
{{- end -}}
{{- end -}}

{{/* The gang's own objects, in the watched namespaces; deploy/components/gang-* grant the same. */}}
{{- define "mpi-operator.gangNamespacedRules" -}}
{{- $strategy := include "mpi-operator.gangStrategy" . -}}
{{- if eq $strategy "volcano" }}
- apiGroups: [scheduling.volcano.sh]
  resources: [podgroups]
  verbs: [get, list, watch, create, update, delete]
{{- else if eq $strategy "native" }}
- apiGroups: [scheduling.k8s.io]
  resources: [podgroups]
  verbs: [get, list, watch, create, update, delete]
{{- else if eq $strategy "coscheduling" }}
# patch: the stamp that wakes a waiting gang when capacity appears.
- apiGroups: [scheduling.x-k8s.io]
  resources: [podgroups]
  verbs: [get, list, watch, create, update, patch, delete]
{{- end }}
{{- end -}}

{{/* Cluster-scoped kinds, read only with a gang scheduler: PriorityClasses order a gang's
minResources; Volcano's queues say why it waits; nodes added or grown are when a waiting
coscheduling gang may fit. */}}
{{- define "mpi-operator.gangClusterRules" -}}
{{- $strategy := include "mpi-operator.gangStrategy" . -}}
{{- if $strategy }}
- apiGroups: [scheduling.k8s.io]
  resources: [priorityclasses]
  verbs: [list, watch]
{{- end }}
{{- if eq $strategy "volcano" }}
- apiGroups: [scheduling.volcano.sh]
  resources: [queues]
  verbs: [list, watch]
{{- else if eq $strategy "coscheduling" }}
- apiGroups: [""]
  resources: [nodes]
  verbs: [list, watch]
{{- end }}
{{- end -}}

{{/* How the gang scheduler groups nodes (Volcano's HyperNodes name the tier of a job's network
domain, Koordinator's ClusterNetworkTopology its layer): read beside every node's labels, so
only by an operator of every namespace. */}}
{{- define "mpi-operator.gangLayoutRules" -}}
{{- $strategy := include "mpi-operator.gangStrategy" . -}}
{{- if eq $strategy "volcano" }}
- apiGroups: [topology.volcano.sh]
  resources: [hypernodes]
  verbs: [list, watch]
{{- else if eq $strategy "koordinator" }}
- apiGroups: [scheduling.koordinator.sh]
  resources: [clusternetworktopologies]
  verbs: [list, watch]
{{- end }}
{{- end -}}

{{/* Leader election on one Lease, granted in --lock-namespace only. */}}
{{- define "mpi-operator.leaseRules" -}}
- apiGroups: [coordination.k8s.io]
  resources: [leases]
  verbs: [get, create, update]
{{- end -}}
