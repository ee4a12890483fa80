package clustermeta

import (
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// Distribution names, uppercase as the seed (cluster-registry-controller) writes them.
const (
	DistributionEKS           = "EKS"
	DistributionGKE           = "GKE"
	DistributionAKS           = "AKS"
	DistributionKind          = "KIND"
	DistributionIKS           = "IKS"
	DistributionPKE           = "PKE"
	DistributionK3S           = "K3S"
	DistributionRKE           = "RKE"
	DistributionRKE2          = "RKE2"
	DistributionOpenShift     = "OPENSHIFT"
	DistributionK0S           = "K0S"
	DistributionMicroK8s      = "MICROK8S"
	DistributionMinikube      = "MINIKUBE"
	DistributionDockerDesktop = "DOCKER-DESKTOP"
)

// Version markers: substrings of a gitVersion (API server or kubelet) that name a
// distribution.
const (
	versionMarkerRKE2 = "+rke2"
	versionMarkerK3S  = "+k3s"
	versionMarkerK0S  = "+k0s"
	versionMarkerEKS  = "-eks-"
	versionMarkerGKE  = "-gke."
)

// versionMarkers is ordered: the first marker found wins.
var versionMarkers = []struct{ marker, distribution string }{
	{versionMarkerRKE2, DistributionRKE2},
	{versionMarkerK3S, DistributionK3S},
	{versionMarkerK0S, DistributionK0S},
	{versionMarkerEKS, DistributionEKS},
	{versionMarkerGKE, DistributionGKE},
}

// VersionDistribution returns the distribution an API server version names, "" when
// it names none ("v1.30.4-eks-a737599" is EKS, "v1.30.0" names none).
func VersionDistribution(version string) string {
	for _, m := range versionMarkers {
		if strings.Contains(version, m.marker) {
			return m.distribution
		}
	}
	return ""
}

// Labels and annotations that identify distributions.
const (
	labelOpenShiftOSID          = "node.openshift.io/os_id"
	annotationOpenShiftMCConfig = "machineconfiguration.openshift.io/currentConfig"
	annotationRKE2NodeArgs      = "rke2.io/node-args"
	annotationK3SNodeArgs       = "k3s.io/node-args"
	annotationRKEExternalIP     = "rke.cattle.io/external-ip"
	annotationRKEInternalIP     = "rke.cattle.io/internal-ip"
	labelMicroK8sCluster        = "microk8s.io/cluster"
	labelMinikubeName           = "minikube.k8s.io/name"
	labelEKSNodegroup           = "eks.amazonaws.com/nodegroup"
	labelEKSComputeType         = "eks.amazonaws.com/compute-type"
	labelGKENodepool            = "cloud.google.com/gke-nodepool"
	labelAKSCluster             = "kubernetes.azure.com/cluster"
	labelAKSAgentpool           = "agentpool"
	labelPKENodepool            = "nodepool.banzaicloud.io/name"
	annotationKubeadmCRISocket  = "kubeadm.alpha.kubernetes.io/cri-socket"
	nodeNameDockerDesktop       = "docker-desktop"
)

// distributionRules are tried in order; a node votes for the first that matches. The
// package documentation holds the same table.
var distributionRules = []struct {
	distribution string
	match        func(n *corev1.Node, provider string) bool
}{
	{DistributionOpenShift, func(n *corev1.Node, _ string) bool {
		return hasLabel(n, labelOpenShiftOSID) || hasAnnotation(n, annotationOpenShiftMCConfig)
	}},
	{DistributionRKE2, func(n *corev1.Node, _ string) bool {
		return kubeletHas(n, versionMarkerRKE2) || hasAnnotation(n, annotationRKE2NodeArgs) ||
			n.Labels[corev1.LabelInstanceTypeStable] == "rke2" || providerIDScheme(n.Spec.ProviderID) == "rke2"
	}},
	{DistributionK3S, func(n *corev1.Node, _ string) bool {
		return kubeletHas(n, versionMarkerK3S) || hasAnnotation(n, annotationK3SNodeArgs) ||
			n.Labels[corev1.LabelInstanceTypeStable] == "k3s" || providerIDScheme(n.Spec.ProviderID) == "k3s"
	}},
	{DistributionRKE, func(n *corev1.Node, _ string) bool {
		return hasAnnotation(n, annotationRKEExternalIP) || hasAnnotation(n, annotationRKEInternalIP)
	}},
	{DistributionK0S, func(n *corev1.Node, _ string) bool {
		return kubeletHas(n, versionMarkerK0S)
	}},
	{DistributionMicroK8s, func(n *corev1.Node, _ string) bool {
		return hasLabel(n, labelMicroK8sCluster)
	}},
	{DistributionMinikube, func(n *corev1.Node, _ string) bool {
		return hasLabel(n, labelMinikubeName)
	}},
	{DistributionDockerDesktop, func(n *corev1.Node, _ string) bool {
		return n.Name == nodeNameDockerDesktop
	}},
	{DistributionEKS, func(n *corev1.Node, _ string) bool {
		return hasLabel(n, labelEKSNodegroup) || hasLabel(n, labelEKSComputeType) || kubeletHas(n, versionMarkerEKS)
	}},
	{DistributionGKE, func(n *corev1.Node, _ string) bool {
		return hasLabel(n, labelGKENodepool) || kubeletHas(n, versionMarkerGKE)
	}},
	{DistributionAKS, func(n *corev1.Node, provider string) bool {
		return hasLabel(n, labelAKSCluster) || (hasLabel(n, labelAKSAgentpool) && provider == ProviderAzure)
	}},
	{DistributionIKS, func(n *corev1.Node, _ string) bool {
		return hasLabel(n, labelIKSVersion)
	}},
	{DistributionPKE, func(n *corev1.Node, _ string) bool {
		return hasLabel(n, labelPKENodepool) && hasAnnotation(n, annotationKubeadmCRISocket)
	}},
	{DistributionKind, func(_ *corev1.Node, provider string) bool {
		return provider == ProviderKind
	}},
}

// NodeDistribution returns the distribution one node votes for, "" when it matches no
// rule. It does not look at the API server version; see Detect for that.
func NodeDistribution(node *corev1.Node) string {
	return nodeDistribution(node, NodeProvider(node))
}

// nodeDistribution is NodeDistribution with the node's provider already known.
func nodeDistribution(node *corev1.Node, provider string) string {
	for _, r := range distributionRules {
		if r.match(node, provider) {
			return r.distribution
		}
	}
	return ""
}

func hasLabel(n *corev1.Node, key string) bool      { return n.Labels[key] != "" }
func hasAnnotation(n *corev1.Node, key string) bool { return n.Annotations[key] != "" }
func kubeletHas(n *corev1.Node, marker string) bool {
	return strings.Contains(n.Status.NodeInfo.KubeletVersion, marker)
}
