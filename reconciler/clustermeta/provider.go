package clustermeta

import (
	"regexp"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// Provider names, lowercase as the seed (cluster-registry-controller) writes them.
const (
	ProviderAmazon       = "amazon"
	ProviderGoogle       = "google"
	ProviderAzure        = "azure"
	ProviderVSphere      = "vsphere"
	ProviderKind         = "kind"
	ProviderCisco        = "cisco"
	ProviderOpenStack    = "openstack"
	ProviderDigitalOcean = "digitalocean"
	ProviderIBM          = "ibm"
	ProviderAlibaba      = "alibaba"
	ProviderOracle       = "oracle"
	ProviderHetzner      = "hetzner"
	ProviderLinode       = "linode"
	ProviderEquinixMetal = "equinixmetal"
)

// providerByScheme maps the lowercase scheme of a providerID to its provider. Schemes
// not listed (k3s, rke2, and any other) name no infrastructure provider.
var providerByScheme = map[string]string{
	"aws":          ProviderAmazon,
	"gce":          ProviderGoogle,
	"azure":        ProviderAzure,
	"vsphere":      ProviderVSphere,
	"kind":         ProviderKind,
	"openstack":    ProviderOpenStack,
	"digitalocean": ProviderDigitalOcean,
	"ibm":          ProviderIBM,
	"alicloud":     ProviderAlibaba,
	"alibaba":      ProviderAlibaba,
	"oci":          ProviderOracle,
	"hcloud":       ProviderHetzner,
	"hrobot":       ProviderHetzner,
	"linode":       ProviderLinode,
	"equinixmetal": ProviderEquinixMetal,
	"packet":       ProviderEquinixMetal,
}

// labelIKSVersion marks the nodes of a Cisco Intersight Kubernetes Service cluster.
const labelIKSVersion = "iks.intersight.cisco.com/version"

// NodeProvider returns the infrastructure provider of one node, "" when unknown. See
// the package documentation for the rules.
func NodeProvider(node *corev1.Node) string {
	id := strings.TrimSpace(node.Spec.ProviderID)
	if id == "" {
		if looksLikeKindNode(node) {
			return ProviderKind
		}
		return ""
	}
	provider := providerFromID(id)
	if provider == ProviderVSphere && node.Labels[labelIKSVersion] != "" {
		// The seed reports IKS clusters, which run on vSphere, as provider "cisco".
		return ProviderCisco
	}
	return provider
}

// providerFromID maps a non-empty providerID to a provider.
func providerFromID(id string) string {
	scheme := providerIDScheme(id)
	if scheme == "" {
		// Oracle's cloud controller manager has also written the bare instance OCID.
		if strings.HasPrefix(strings.ToLower(id), "ocid1.") {
			return ProviderOracle
		}
		return ""
	}
	return providerByScheme[scheme]
}

// providerIDScheme returns the lowercase scheme of a providerID ("aws" for
// "aws:///eu-central-1a/i-0123"), "" when it has none.
func providerIDScheme(id string) string {
	scheme, _, ok := strings.Cut(id, "://")
	if !ok {
		return ""
	}
	return strings.ToLower(strings.TrimSpace(scheme))
}

// kindNodeName matches the names kind gives its nodes: <cluster>-control-plane,
// <cluster>-control-plane2, <cluster>-worker, <cluster>-worker3, ...
var kindNodeName = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?-(control-plane|worker)[0-9]*$`)

// looksLikeKindNode reports whether a node without providerID was made by kind: its
// name is one kind gives, it runs containerd and the kindest/node OS (Debian, or
// Ubuntu in early releases).
func looksLikeKindNode(node *corev1.Node) bool {
	info := node.Status.NodeInfo
	return kindNodeName.MatchString(node.Name) &&
		strings.HasPrefix(info.ContainerRuntimeVersion, "containerd://") &&
		(strings.HasPrefix(info.OSImage, "Debian GNU/Linux") || strings.HasPrefix(info.OSImage, "Ubuntu"))
}
