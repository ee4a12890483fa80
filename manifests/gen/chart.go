package main

import (
	"fmt"
	"regexp"
	"strings"

	"github.com/kubectl-registry/kubectl-registry/manifests"
)

// splitImage splits an image reference into its repository and tag.
func splitImage(image string) (repository, tag string, err error) {
	if strings.Contains(image, "@") {
		return "", "", fmt.Errorf("image %q: a digest cannot be a chart default, use a tag", image)
	}
	i := strings.LastIndex(image, ":")
	if i < 0 || strings.Contains(image[i:], "/") {
		return "", "", fmt.Errorf("image %q has no tag", image)
	}
	return image[:i], image[i+1:], nil
}

// semver is a version Helm accepts as a chart version.
var semver = regexp.MustCompile(`^v?(\d+\.\d+\.\d+(?:[-+][0-9A-Za-z.+-]*)?)$`)

// chartFiles returns the chart's files that are not manifests, by path in the chart.
// The defaults are install's: the image is manifests.DefaultImage, the chart's version
// and appVersion its tag (make dist stamps the release's).
func chartFiles() (map[string][]byte, error) {
	repository, tag, err := splitImage(manifests.DefaultImage)
	if err != nil {
		return nil, fmt.Errorf("the default image: %w", err)
	}
	version := "0.0.0"
	if m := semver.FindStringSubmatch(tag); m != nil {
		version = m[1]
	}
	header := yamlHeader("")
	return map[string][]byte{
		"Chart.yaml": []byte(header + fmt.Sprintf(chartYAML, ChartName, version, tag)),
		"values.yaml": []byte(header + fmt.Sprintf(valuesYAML,
			repository, tag, manifests.DefaultReplicas, manifests.MemberGrantsAll, manifests.MemberGrantsAll, manifests.MemberGrantsNone)),
		"values.schema.json":     []byte(fmt.Sprintf(valuesSchema, manifests.MemberGrantsAll, manifests.MemberGrantsNone)),
		"templates/_helpers.tpl": []byte(fmt.Sprintf("{{- /*\n%s*/ -}}\n", generatedBy("")) + helpers),
		"templates/NOTES.txt":    []byte(notes),
		".helmignore":            []byte(header + "*.orig\n*~\n"),
	}, nil
}

const chartYAML = `apiVersion: v2
name: %s
description: >-
  The kubectl-registry controller: it syncs Kubernetes resources across a hub-less group
  of clusters (Cluster, ClusterFeature, ResourceSyncRule of clusterregistry.k8s.cisco.com).
  The chart installs what "kubectl registry install" does; its values are install's flags.
type: application
version: %s
appVersion: %q
home: https://github.com/kubectl-registry/kubectl-registry
sources:
- https://github.com/kubectl-registry/kubectl-registry
keywords:
- multicluster
- cluster-registry
- sync
`

const valuesYAML = `#
# The values of the kubectl-registry chart are the flags of "kubectl registry install",
# with the same defaults; helm template / install with the same settings renders the
# objects "kubectl registry install --dry-run=client -o yaml" prints. The registry
# namespace (install's --namespace, default cluster-registry) is the release's namespace
# (helm --namespace); its readers namespace is <namespace>-readers.

# --cluster-name: the name of this cluster in the group, an RFC 1123 label. Needed the
# first time, when no Cluster describes this cluster yet. Empty passes no flag.
clusterName: ""

# --api-server-endpoint: the address peers reach this cluster's API server at (host,
# host:port or https URL; https:// is added to a host). The controller in a pod needs it
# unless the Cluster already lists an endpoint. Empty passes no flag.
apiServerEndpoint: ""

# --image is <repository>:<tag>.
image:
  repository: %q
  tag: %q

# --replicas: leader election keeps one active and the others ready to take over.
replicas: %d

# --monitoring: also render the monitoring pack, a ServiceMonitor, a PrometheusRule (the
# alerts) and the Grafana dashboard in a ConfigMap. Needs the Prometheus Operator's CRDs
# (monitoring.coreos.com/v1).
monitoring:
  enabled: false

# --member-grants: what the members' identities may write here (copies are written as
# the member they come from, and this cluster's RBAC authorizes them): %[5]q binds them
# to what the controller may write; %[6]q binds them to nothing, so each member writes
# only what a RoleBinding of this cluster grants its identity.
memberGrants: %[4]q

# Render the registry namespace (the release namespace), labelled, as install creates it.
# Set it to false when something else creates the namespace and Helm would refuse to
# adopt it, e.g. helm install --create-namespace or Flux's install.createNamespace.
createNamespace: true
`

const valuesSchema = `{
  "$schema": "http://json-schema.org/draft-07/schema#",
  "title": "Values of the kubectl-registry chart: the flags of kubectl registry install",
  "type": "object",
  "properties": {
    "clusterName": {
      "description": "--cluster-name: the name of this cluster in the group, an RFC 1123 label; empty passes no flag",
      "type": "string",
      "maxLength": 63,
      "pattern": "^([a-z0-9]([-a-z0-9]*[a-z0-9])?)?$"
    },
    "apiServerEndpoint": {
      "description": "--api-server-endpoint: the address peers reach this cluster's API server at (host, host:port or https URL); empty passes no flag",
      "type": "string",
      "pattern": "^\\S*$"
    },
    "image": {
      "description": "--image is <repository>:<tag>",
      "type": "object",
      "properties": {
        "repository": {"type": "string", "minLength": 1, "pattern": "^\\S+$"},
        "tag": {"type": "string", "minLength": 1, "pattern": "^\\S+$"}
      },
      "required": ["repository", "tag"],
      "additionalProperties": false
    },
    "replicas": {
      "description": "--replicas: replicas of the controller, at least 1",
      "type": "integer",
      "minimum": 1
    },
    "monitoring": {
      "description": "--monitoring: render the ServiceMonitor, PrometheusRule and dashboard",
      "type": "object",
      "properties": {
        "enabled": {"type": "boolean"}
      },
      "additionalProperties": false
    },
    "memberGrants": {
      "description": "--member-grants: what the members' identities may write here",
      "type": "string",
      "enum": [%q, %q]
    },
    "createNamespace": {
      "description": "render the registry namespace (the release namespace)",
      "type": "boolean"
    },
    "global": {
      "type": "object"
    }
  },
  "additionalProperties": false
}
`

const helpers = `{{/*
The controller image, install's --image: <repository>:<tag>.
*/}}
{{- define "kubectl-registry.image" -}}
{{- printf "%s:%s" .Values.image.repository (toString .Values.image.tag) -}}
{{- end -}}

{{/*
--api-server-endpoint as install passes it: https:// is added to a host or host:port,
and brackets to a bare IPv6 address.
*/}}
{{- define "kubectl-registry.apiServerEndpoint" -}}
{{- $endpoint := trim .Values.apiServerEndpoint -}}
{{- if contains "://" $endpoint -}}
{{- $endpoint -}}
{{- else if regexMatch "^[0-9A-Fa-f]*:[0-9A-Fa-f]*:[0-9A-Fa-f:.]*$" $endpoint -}}
{{- printf "https://[%s]" $endpoint -}}
{{- else -}}
{{- printf "https://%s" $endpoint -}}
{{- end -}}
{{- end -}}
`

const notes = `The kubectl-registry controller runs in namespace {{ .Release.Namespace }} ({{ .Values.replicas }} replica(s), image {{ include "kubectl-registry.image" . }}).
{{- if not .Values.clusterName }}

No clusterName was given: the controller waits until a Cluster describes this cluster.
Set clusterName (install's --cluster-name) unless one does.
{{- end }}
{{- if not .Values.apiServerEndpoint }}

No apiServerEndpoint was given: peers can reach this cluster only if its Cluster lists an
endpoint. Set apiServerEndpoint (install's --api-server-endpoint) unless it does.
{{- end }}

See the cluster's state with:
  kubectl registry status
and join it to a group with:
  kubectl registry join --help
`
