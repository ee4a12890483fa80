package clustermeta

import (
	"sort"

	corev1 "k8s.io/api/core/v1"

	"github.com/kubectl-registry/kubectl-registry/reconciler/api/v1alpha1"
)

// Detect computes the metadata of the cluster whose nodes are nodes and whose API
// server reports serverVersion (its gitVersion). The result depends only on the set of
// nodes, not on their order; nodes is not modified. See the package documentation for
// the rules.
func Detect(nodes []corev1.Node, serverVersion string) v1alpha1.ClusterMetadata {
	md := v1alpha1.ClusterMetadata{Version: serverVersion}

	kubelets := make([]string, 0, len(nodes))
	proxies := make([]string, 0, len(nodes))
	regions := make([]string, 0, len(nodes))
	zones := make([]string, 0, len(nodes))
	providers := make([]string, 0, len(nodes))
	distributions := make([]string, 0, len(nodes))
	for i := range nodes {
		node := &nodes[i]
		kubelets = append(kubelets, node.Status.NodeInfo.KubeletVersion)
		//lint:ignore SA1019 the API's kubeProxyVersions (the seed's) reports it while nodes still do
		proxies = append(proxies, node.Status.NodeInfo.KubeProxyVersion)
		regions = append(regions, nodeRegion(node))
		zones = append(zones, nodeZone(node))
		provider := NodeProvider(node)
		providers = append(providers, provider)
		distributions = append(distributions, nodeDistribution(node, provider))
	}

	md.KubeletVersions = sortedDistinct(kubelets)
	md.KubeProxyVersions = sortedDistinct(proxies)
	md.Provider = majority(providers)
	if d := VersionDistribution(serverVersion); d != "" {
		md.Distribution = d
	} else {
		md.Distribution = majority(distributions)
	}

	regionList, zoneList := sortedDistinct(regions), sortedDistinct(zones)
	if regionList != nil || zoneList != nil {
		md.Locality = &v1alpha1.Locality{
			Region:  majority(regions),
			Regions: regionList,
			Zones:   zoneList,
		}
	}
	return md
}

// nodeRegion is the node's region label, the stable one first.
func nodeRegion(node *corev1.Node) string {
	if v := node.Labels[corev1.LabelTopologyRegion]; v != "" {
		return v
	}
	return node.Labels[corev1.LabelFailureDomainBetaRegion]
}

// nodeZone is the node's zone label, the stable one first.
func nodeZone(node *corev1.Node) string {
	if v := node.Labels[corev1.LabelTopologyZone]; v != "" {
		return v
	}
	return node.Labels[corev1.LabelFailureDomainBetaZone]
}

// sortedDistinct returns the distinct non-empty values, sorted; nil when there are none.
func sortedDistinct(values []string) []string {
	var out []string
	seen := make(map[string]struct{}, len(values))
	for _, v := range values {
		if v == "" {
			continue
		}
		if _, ok := seen[v]; ok {
			continue
		}
		seen[v] = struct{}{}
		out = append(out, v)
	}
	sort.Strings(out)
	return out
}

// majority returns the non-empty value that occurs most often in votes, the
// lexicographically smallest among equally frequent ones; "" when there is no
// non-empty value. Empty values are abstentions.
func majority(votes []string) string {
	counts := make(map[string]int, len(votes))
	for _, v := range votes {
		if v != "" {
			counts[v]++
		}
	}
	best, bestCount := "", 0
	for _, v := range sortedDistinct(votes) {
		if c := counts[v]; c > bestCount {
			best, bestCount = v, c
		}
	}
	return best
}
