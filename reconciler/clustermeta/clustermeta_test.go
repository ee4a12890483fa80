package clustermeta

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubectl-registry/kubectl-registry/reconciler/api/v1alpha1"
)

// node builds a Node for the tables; opts fill in what a case needs.
func node(name string, opts ...func(*corev1.Node)) corev1.Node {
	n := corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}
	for _, o := range opts {
		o(&n)
	}
	return n
}

func providerID(id string) func(*corev1.Node) {
	return func(n *corev1.Node) { n.Spec.ProviderID = id }
}

func label(k, v string) func(*corev1.Node) {
	return func(n *corev1.Node) {
		if n.Labels == nil {
			n.Labels = map[string]string{}
		}
		n.Labels[k] = v
	}
}

func annotation(k, v string) func(*corev1.Node) {
	return func(n *corev1.Node) {
		if n.Annotations == nil {
			n.Annotations = map[string]string{}
		}
		n.Annotations[k] = v
	}
}

func kubelet(v string) func(*corev1.Node) {
	return func(n *corev1.Node) { n.Status.NodeInfo.KubeletVersion = v }
}

func kubeProxy(v string) func(*corev1.Node) {
	//lint:ignore SA1019 Detect still reads it (see there)
	return func(n *corev1.Node) { n.Status.NodeInfo.KubeProxyVersion = v }
}

// kindImage gives a node the runtime and OS of a kindest/node image.
func kindImage(os string) func(*corev1.Node) {
	return func(n *corev1.Node) {
		n.Status.NodeInfo.ContainerRuntimeVersion = "containerd://2.1.3"
		n.Status.NodeInfo.OSImage = os
	}
}

func TestNodeProvider(t *testing.T) {
	tests := []struct {
		name string
		node corev1.Node
		want string
	}{
		{"no providerID", node("n"), ""},
		{"blank providerID", node("n", providerID("  ")), ""},
		{"aws", node("n", providerID("aws:///eu-central-1a/i-0123456789abcdef0")), ProviderAmazon},
		{"aws upper-case scheme", node("n", providerID("AWS:///eu-central-1a/i-0123456789abcdef0")), ProviderAmazon},
		{"aws fargate", node("n", providerID("aws:///eu-central-1b/abc/fargate-ip-1-2-3-4")), ProviderAmazon},
		{"gce", node("n", providerID("gce://proj/us-central1-a/vm")), ProviderGoogle},
		{"azure", node("n", providerID("azure:///subscriptions/s/resourceGroups/rg/providers/Microsoft.Compute/virtualMachines/vm")), ProviderAzure},
		{"vsphere", node("n", providerID("vsphere://4237c2a1-9b8d-7e6f-5a4b-3c2d1e0f9a8b")), ProviderVSphere},
		{"vsphere with IKS label is cisco", node("n", providerID("vsphere://4218"), label("iks.intersight.cisco.com/version", "6062")), ProviderCisco},
		{"vsphere with empty IKS label", node("n", providerID("vsphere://4218"), label("iks.intersight.cisco.com/version", "")), ProviderVSphere},
		{"IKS label without vsphere", node("n", providerID("aws:///a/i-1"), label("iks.intersight.cisco.com/version", "6062")), ProviderAmazon},
		{"kind docker", node("kind-control-plane", providerID("kind://docker/kind/kind-control-plane")), ProviderKind},
		{"kind podman", node("dev-worker", providerID("kind://podman/dev/dev-worker")), ProviderKind},
		{"openstack", node("n", providerID("openstack:///8d7c6b5a-4f3e")), ProviderOpenStack},
		{"digitalocean", node("n", providerID("digitalocean://412345678")), ProviderDigitalOcean},
		{"ibm", node("n", providerID("ibm://acct///cluster/worker")), ProviderIBM},
		{"alicloud", node("n", providerID("alicloud://cn-hangzhou.i-bp1234")), ProviderAlibaba},
		{"alibaba", node("n", providerID("alibaba://cn-hangzhou.i-bp1234")), ProviderAlibaba},
		{"oci scheme", node("n", providerID("oci://ocid1.instance.oc1.phx.abc")), ProviderOracle},
		{"bare ocid", node("n", providerID("ocid1.instance.oc1.iad.abc")), ProviderOracle},
		{"hcloud", node("n", providerID("hcloud://12345678")), ProviderHetzner},
		{"hrobot", node("n", providerID("hrobot://123456")), ProviderHetzner},
		{"linode", node("n", providerID("linode://54321")), ProviderLinode},
		{"equinixmetal", node("n", providerID("equinixmetal://0f1e2d3c")), ProviderEquinixMetal},
		{"packet", node("n", providerID("packet://0f1e2d3c")), ProviderEquinixMetal},
		{"k3s is no infrastructure", node("n", providerID("k3s://n")), ""},
		{"rke2 is no infrastructure", node("n", providerID("rke2://n")), ""},
		{"unknown scheme", node("n", providerID("example://n")), ""},
		{"no scheme", node("n", providerID("i-0123456789abcdef0")), ""},
		{"empty scheme", node("n", providerID("://x")), ""},

		// The kind heuristic, for nodes without providerID.
		{"kind control plane without providerID", node("kind-control-plane", kindImage("Debian GNU/Linux 12 (bookworm)")), ProviderKind},
		{"kind second control plane", node("ha-control-plane2", kindImage("Debian GNU/Linux 11 (bullseye)")), ProviderKind},
		{"kind worker on old Ubuntu image", node("kind-worker3", kindImage("Ubuntu 21.10")), ProviderKind},
		{"kind-like name, docker runtime", node("kind-worker", func(n *corev1.Node) {
			n.Status.NodeInfo.ContainerRuntimeVersion = "docker://20.10.24"
			n.Status.NodeInfo.OSImage = "Debian GNU/Linux 12 (bookworm)"
		}), ""},
		{"kind-like name, other OS", node("kind-worker", kindImage("Rocky Linux 9.5 (Blue Onyx)")), ""},
		{"kind image, other name", node("cp-1", kindImage("Debian GNU/Linux 12 (bookworm)")), ""},
		{"kind image, cluster-api style name", node("c1-control-plane-x7k2p", kindImage("Ubuntu 22.04.4 LTS")), ""},
		{"bare suffix is no kind name", node("-control-plane", kindImage("Debian GNU/Linux 12 (bookworm)")), ""},
		{"providerID beats the kind heuristic", node("kind-control-plane", providerID("aws:///a/i-1"), kindImage("Debian GNU/Linux 12 (bookworm)")), ProviderAmazon},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := NodeProvider(&tc.node); got != tc.want {
				t.Errorf("NodeProvider = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestNodeDistribution(t *testing.T) {
	tests := []struct {
		name string
		node corev1.Node
		want string
	}{
		{"nothing", node("n"), ""},
		{"plain kubeadm", node("n", kubelet("v1.32.1"), annotation("kubeadm.alpha.kubernetes.io/cri-socket", "unix:///run/containerd/containerd.sock")), ""},

		{"eks nodegroup label", node("n", label("eks.amazonaws.com/nodegroup", "ng-1")), DistributionEKS},
		{"eks fargate", node("n", label("eks.amazonaws.com/compute-type", "fargate")), DistributionEKS},
		{"eks compute-type auto", node("n", label("eks.amazonaws.com/compute-type", "auto")), DistributionEKS},
		{"eks kubelet (self-managed node)", node("n", kubelet("v1.30.4-eks-a737599")), DistributionEKS},
		{"eks label with empty value", node("n", label("eks.amazonaws.com/nodegroup", "")), ""},

		{"gke label", node("n", label("cloud.google.com/gke-nodepool", "default-pool")), DistributionGKE},
		{"gke kubelet", node("n", kubelet("v1.30.5-gke.1014001")), DistributionGKE},

		{"aks cluster label", node("n", label("kubernetes.azure.com/cluster", "MC_rg_aks_westeurope")), DistributionAKS},
		{"aks agentpool on azure", node("n", providerID("azure:///subscriptions/s/x"), label("agentpool", "nodepool1")), DistributionAKS},
		{"agentpool label off azure", node("n", providerID("aws:///a/i-1"), label("agentpool", "nodepool1")), ""},
		{"agentpool label without provider", node("n", label("agentpool", "nodepool1")), ""},

		{"kind providerID", node("kind-worker", providerID("kind://docker/kind/kind-worker")), DistributionKind},
		{"kind heuristic", node("kind-control-plane", kindImage("Debian GNU/Linux 12 (bookworm)")), DistributionKind},

		{"k3s kubelet", node("n", kubelet("v1.30.6+k3s1")), DistributionK3S},
		{"k3s instance type", node("n", label("node.kubernetes.io/instance-type", "k3s")), DistributionK3S},
		{"k3s annotation", node("n", annotation("k3s.io/node-args", `["server"]`)), DistributionK3S},
		{"k3s providerID", node("n", providerID("k3s://n")), DistributionK3S},
		{"k3s on aws with cloud provider", node("n", providerID("aws:///a/i-1"), kubelet("v1.30.6+k3s1")), DistributionK3S},

		{"rke2 kubelet", node("n", kubelet("v1.29.10+rke2r1")), DistributionRKE2},
		{"rke2 annotation", node("n", annotation("rke2.io/node-args", `["agent"]`)), DistributionRKE2},
		{"rke2 instance type", node("n", label("node.kubernetes.io/instance-type", "rke2")), DistributionRKE2},
		{"rke2 providerID", node("n", providerID("rke2://n")), DistributionRKE2},
		{"rke2 node with rke annotations", node("n", kubelet("v1.29.10+rke2r1"), annotation("rke.cattle.io/external-ip", "1.2.3.4")), DistributionRKE2},

		{"rke external ip", node("n", annotation("rke.cattle.io/external-ip", "1.2.3.4")), DistributionRKE},
		{"rke internal ip", node("n", annotation("rke.cattle.io/internal-ip", "10.0.0.4")), DistributionRKE},

		{"openshift label", node("n", label("node.openshift.io/os_id", "rhcos")), DistributionOpenShift},
		{"openshift annotation", node("n", annotation("machineconfiguration.openshift.io/currentConfig", "rendered-worker-0b9a")), DistributionOpenShift},
		{"openshift on aws beats the cloud", node("n", providerID("aws:///a/i-1"), label("node.openshift.io/os_id", "rhcos"), label("eks.amazonaws.com/nodegroup", "x")), DistributionOpenShift},
		{"openshift on azure with agentpool", node("n", providerID("azure:///x"), label("agentpool", "worker"), label("node.openshift.io/os_id", "rhcos")), DistributionOpenShift},

		{"iks", node("n", providerID("vsphere://4218"), label("iks.intersight.cisco.com/version", "6062")), DistributionIKS},

		{"pke", node("n", label("nodepool.banzaicloud.io/name", "pool1"), annotation("kubeadm.alpha.kubernetes.io/cri-socket", "unix:///run/containerd/containerd.sock")), DistributionPKE},
		{"pke label without kubeadm", node("n", label("nodepool.banzaicloud.io/name", "pool1")), ""},
		// The seed's Banzai-managed EKS fixture: node pool label, no kubeadm annotation.
		{"banzai eks", node("n", providerID("aws:///a/i-1"), label("nodepool.banzaicloud.io/name", "pool1"), kubelet("v1.17.11-eks-cfdc40")), DistributionEKS},

		{"k0s kubelet", node("n", kubelet("v1.30.1+k0s")), DistributionK0S},
		{"microk8s", node("n", label("microk8s.io/cluster", "true")), DistributionMicroK8s},
		{"minikube", node("minikube", label("minikube.k8s.io/name", "minikube")), DistributionMinikube},
		{"docker desktop", node("docker-desktop", kubelet("v1.31.4")), DistributionDockerDesktop},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := NodeDistribution(&tc.node); got != tc.want {
				t.Errorf("NodeDistribution = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestVersionDistribution(t *testing.T) {
	tests := map[string]string{
		"":                       "",
		"v1.30.0":                "",
		"v1.29.8+632b078":        "",
		"v1.30.4-eks-a737599":    DistributionEKS,
		"v1.28.5-eks-1-28-13":    DistributionEKS,
		"v1.30.5-gke.1014001":    DistributionGKE,
		"v1.30.6+k3s1":           DistributionK3S,
		"v1.29.10+rke2r1":        DistributionRKE2,
		"v1.30.1+k0s":            DistributionK0S,
		"v0.0.0-master+$Format:": "",
	}
	for version, want := range tests {
		if got := VersionDistribution(version); got != want {
			t.Errorf("VersionDistribution(%q) = %q, want %q", version, got, want)
		}
	}
}

// TestDetect covers the votes, tie-breaks and list rules across nodes.
func TestDetect(t *testing.T) {
	aws := providerID("aws:///a/i-1")
	gce := providerID("gce://p/z/vm")
	tests := []struct {
		name          string
		nodes         []corev1.Node
		serverVersion string
		want          v1alpha1.ClusterMetadata
	}{
		{
			name: "nil nodes, empty version",
			want: v1alpha1.ClusterMetadata{},
		},
		{
			name:          "no nodes: the server version still decides the distribution",
			serverVersion: "v1.30.4-eks-a737599",
			want:          v1alpha1.ClusterMetadata{Version: "v1.30.4-eks-a737599", Distribution: DistributionEKS},
		},
		{
			name:  "provider majority",
			nodes: []corev1.Node{node("a", gce), node("b", aws), node("c", aws)},
			want:  v1alpha1.ClusterMetadata{Provider: ProviderAmazon},
		},
		{
			name:  "provider tie goes to the smallest name",
			nodes: []corev1.Node{node("a", gce), node("b", aws)},
			want:  v1alpha1.ClusterMetadata{Provider: ProviderAmazon},
		},
		{
			name:  "nodes without a provider abstain",
			nodes: []corev1.Node{node("a"), node("b"), node("c", gce)},
			want:  v1alpha1.ClusterMetadata{Provider: ProviderGoogle},
		},
		{
			name: "distribution majority",
			nodes: []corev1.Node{
				node("a", kubelet("v1.30.6+k3s1")),
				node("b", annotation("rke.cattle.io/external-ip", "1.2.3.4")),
				node("c", annotation("rke.cattle.io/external-ip", "1.2.3.5")),
			},
			want: v1alpha1.ClusterMetadata{
				Distribution:    DistributionRKE,
				KubeletVersions: []string{"v1.30.6+k3s1"},
			},
		},
		{
			name: "distribution tie goes to the smallest name",
			nodes: []corev1.Node{
				node("a", annotation("rke.cattle.io/external-ip", "1.2.3.4")),
				node("b", label("microk8s.io/cluster", "true")),
			},
			want: v1alpha1.ClusterMetadata{Distribution: DistributionMicroK8s},
		},
		{
			name: "nodes without a distribution abstain",
			nodes: []corev1.Node{
				node("a"), node("b"),
				node("c", label("cloud.google.com/gke-nodepool", "pool")),
			},
			want: v1alpha1.ClusterMetadata{Distribution: DistributionGKE},
		},
		{
			name: "a server version marker outranks the node votes",
			nodes: []corev1.Node{
				node("a", annotation("rke.cattle.io/external-ip", "1.2.3.4")),
				node("b", annotation("rke.cattle.io/external-ip", "1.2.3.5")),
			},
			serverVersion: "v1.30.6+k3s1",
			want:          v1alpha1.ClusterMetadata{Version: "v1.30.6+k3s1", Distribution: DistributionK3S},
		},
		{
			name: "a server version without marker leaves it to the nodes",
			nodes: []corev1.Node{
				node("a", label("node.openshift.io/os_id", "rhcos")),
			},
			serverVersion: "v1.29.8+632b078",
			want:          v1alpha1.ClusterMetadata{Version: "v1.29.8+632b078", Distribution: DistributionOpenShift},
		},
		{
			name: "versions: distinct, sorted, empty skipped",
			nodes: []corev1.Node{
				node("a", kubelet("v1.31.3"), kubeProxy("")),
				node("b", kubelet("v1.30.7"), kubeProxy("v1.30.7")),
				node("c", kubelet("v1.31.3"), kubeProxy("")),
				node("d", kubelet(""), kubeProxy("v1.30.7")),
			},
			want: v1alpha1.ClusterMetadata{
				KubeletVersions:   []string{"v1.30.7", "v1.31.3"},
				KubeProxyVersions: []string{"v1.30.7"},
			},
		},
		{
			name:  "versions: nil when every node leaves them empty",
			nodes: []corev1.Node{node("a"), node("b")},
			want:  v1alpha1.ClusterMetadata{},
		},
		{
			name: "region majority beats the smallest name",
			nodes: []corev1.Node{
				node("a", label(corev1.LabelTopologyRegion, "us-west-2"), label(corev1.LabelTopologyZone, "us-west-2b")),
				node("b", label(corev1.LabelTopologyRegion, "us-east-1"), label(corev1.LabelTopologyZone, "us-east-1c")),
				node("c", label(corev1.LabelTopologyRegion, "us-west-2"), label(corev1.LabelTopologyZone, "us-west-2a")),
			},
			want: v1alpha1.ClusterMetadata{Locality: &v1alpha1.Locality{
				Region:  "us-west-2",
				Regions: []string{"us-east-1", "us-west-2"},
				Zones:   []string{"us-east-1c", "us-west-2a", "us-west-2b"},
			}},
		},
		{
			name: "region tie goes to the smallest name",
			nodes: []corev1.Node{
				node("a", label(corev1.LabelTopologyRegion, "westeurope")),
				node("b", label(corev1.LabelTopologyRegion, "northeurope")),
			},
			want: v1alpha1.ClusterMetadata{Locality: &v1alpha1.Locality{
				Region:  "northeurope",
				Regions: []string{"northeurope", "westeurope"},
			}},
		},
		{
			name: "the stable labels win over the legacy ones",
			nodes: []corev1.Node{node("a",
				label(corev1.LabelTopologyRegion, "eu-central-1"), label(corev1.LabelTopologyZone, "eu-central-1a"),
				label(corev1.LabelFailureDomainBetaRegion, "eu-west-1"), label(corev1.LabelFailureDomainBetaZone, "eu-west-1a"),
			)},
			want: v1alpha1.ClusterMetadata{Locality: &v1alpha1.Locality{
				Region: "eu-central-1", Regions: []string{"eu-central-1"}, Zones: []string{"eu-central-1a"},
			}},
		},
		{
			name: "the legacy labels are the fallback, also for an empty stable label",
			nodes: []corev1.Node{node("a",
				label(corev1.LabelTopologyRegion, ""),
				label(corev1.LabelFailureDomainBetaRegion, "eu-west-1"), label(corev1.LabelFailureDomainBetaZone, "eu-west-1a"),
			)},
			want: v1alpha1.ClusterMetadata{Locality: &v1alpha1.Locality{
				Region: "eu-west-1", Regions: []string{"eu-west-1"}, Zones: []string{"eu-west-1a"},
			}},
		},
		{
			name:  "zones without regions",
			nodes: []corev1.Node{node("a", label(corev1.LabelTopologyZone, "rack-2")), node("b", label(corev1.LabelTopologyZone, "rack-1"))},
			want:  v1alpha1.ClusterMetadata{Locality: &v1alpha1.Locality{Zones: []string{"rack-1", "rack-2"}}},
		},
		{
			name:  "nodes without a region abstain from the region vote",
			nodes: []corev1.Node{node("a"), node("b"), node("c", label(corev1.LabelTopologyRegion, "fra1"))},
			want:  v1alpha1.ClusterMetadata{Locality: &v1alpha1.Locality{Region: "fra1", Regions: []string{"fra1"}}},
		},
		{
			name:  "no locality without regions and zones",
			nodes: []corev1.Node{node("a", label(corev1.LabelTopologyRegion, ""), label(corev1.LabelTopologyZone, ""))},
			want:  v1alpha1.ClusterMetadata{},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := Detect(tc.nodes, tc.serverVersion)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Detect mismatch (-want +got):\n%s", diff)
			}
		})
	}
}
