// Package clustermeta computes the metadata the registry controller writes into the
// status of its local Cluster CR: infrastructure provider, Kubernetes distribution,
// API server version, kubelet and kube-proxy versions, and locality.
//
// The package is pure: Detect reads nothing but its arguments and returns the same
// output for the same nodes in any order (every list is sorted and de-duplicated,
// every vote is broken by a fixed rule), so a status computed from it never churns.
//
// # Versions
//
//	Version            the API server's gitVersion, as given
//	KubeletVersions    distinct non-empty nodeInfo.kubeletVersion, sorted; nil when none
//	KubeProxyVersions  distinct non-empty nodeInfo.kubeProxyVersion, sorted; nil when none
//	                   (recent kubelets leave that field empty)
//
// # Locality
//
// A node's region is its topology.kubernetes.io/region label, or, when that is empty,
// its failure-domain.beta.kubernetes.io/region label; zones likewise with .../zone.
// Regions and Zones are the distinct values, sorted. Region is the region most nodes
// are in, ties going to the lexicographically smallest. Locality is nil when no node
// has a region or a zone.
//
// # Provider
//
// Each node votes for the provider read from spec.providerID (scheme compared
// case-insensitively):
//
//	providerID                          provider
//	----------------------------------  ------------
//	aws://...                           amazon
//	gce://...                           google
//	azure://...                         azure
//	vsphere://... and label             cisco  (seed: Cisco Intersight IKS on vSphere)
//	  iks.intersight.cisco.com/version
//	vsphere://...                       vsphere
//	kind://...                          kind
//	openstack://...                     openstack
//	digitalocean://...                  digitalocean
//	ibm://...                           ibm
//	alicloud://..., alibaba://...       alibaba
//	oci://..., ocid1....                oracle
//	hcloud://..., hrobot://...          hetzner
//	linode://...                        linode
//	equinixmetal://..., packet://...    equinixmetal
//	k3s://..., rke2://..., other        ""  (no infrastructure provider known)
//	empty, and the node looks like a    kind
//	  kind node (see below)
//	empty otherwise                     ""  (no vote)
//
// A node "looks like a kind node" when it has no providerID (older kind releases
// set none), its name ends in -control-plane or -worker optionally followed by digits (the
// names kind gives), its container runtime is containerd and its OS image is Debian or
// Ubuntu (the kindest/node base images). Kind clusters that set providerID never need
// this heuristic.
//
// Provider is the value most nodes vote for; nodes without a vote abstain (a node that
// joined before the cloud controller set its providerID does not flip the provider),
// ties go to the lexicographically smallest name. No votes: "".
//
// # Distribution
//
// When the API server's version names a distribution, that decides, since the control
// plane is the distribution (it also works for a cluster without nodes):
//
//	server version contains   distribution
//	-----------------------   ------------
//	+rke2                     RKE2       (v1.29.10+rke2r1)
//	+k3s                      K3S        (v1.30.6+k3s1)
//	+k0s                      K0S        (v1.30.1+k0s)
//	-eks-                     EKS        (v1.30.4-eks-a737599)
//	-gke.                     GKE        (v1.30.5-gke.1014001)
//
// Otherwise each node votes for the first rule it matches, in this order (a label
// counts only with a non-empty value, an annotation likewise):
//
//	#   distribution    node matches when
//	--  --------------  ---------------------------------------------------------------
//	1   OPENSHIFT       label node.openshift.io/os_id, or annotation
//	                    machineconfiguration.openshift.io/currentConfig
//	2   RKE2            kubelet version contains +rke2, or annotation rke2.io/node-args,
//	                    or label node.kubernetes.io/instance-type=rke2, or providerID rke2://
//	3   K3S             kubelet version contains +k3s, or annotation k3s.io/node-args,
//	                    or label node.kubernetes.io/instance-type=k3s, or providerID k3s://
//	4   RKE             annotation rke.cattle.io/external-ip or rke.cattle.io/internal-ip
//	                    (RKE1)
//	5   K0S             kubelet version contains +k0s
//	6   MICROK8S        label microk8s.io/cluster
//	7   MINIKUBE        label minikube.k8s.io/name
//	8   DOCKER-DESKTOP  node name docker-desktop
//	9   EKS             label eks.amazonaws.com/nodegroup or eks.amazonaws.com/compute-type,
//	                    or kubelet version contains -eks-
//	10  GKE             label cloud.google.com/gke-nodepool, or kubelet version contains -gke.
//	11  AKS             label kubernetes.azure.com/cluster, or label agentpool on a node
//	                    whose provider is azure
//	12  IKS             label iks.intersight.cisco.com/version (Cisco Intersight)
//	13  PKE             label nodepool.banzaicloud.io/name and annotation
//	                    kubeadm.alpha.kubernetes.io/cri-socket (Banzai Cloud PKE)
//	14  KIND            the node's provider is kind
//	-   ""              nothing matched: the node abstains
//
// The self-managed distributions come before the managed ones because they also run
// on cloud machines; OpenShift comes first because ROSA and ARO nodes carry cloud
// provider IDs. Distribution is the value most nodes vote for, ties going to the
// lexicographically smallest name; no votes: "".
package clustermeta
