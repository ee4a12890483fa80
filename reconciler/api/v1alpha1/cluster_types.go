package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// AuthInfo tells a peer how to get credentials for the cluster.
type AuthInfo struct {
	// SecretRef names the Secret (type k8s.cisco.com/cluster-registry-secret) whose
	// "kubeconfig" key holds a reader kubeconfig for the cluster.
	// +optional
	SecretRef NamespacedName `json:"secretRef,omitempty"`
}

// NamespacedName is types.NamespacedName with JSON tags.
type NamespacedName struct {
	// +optional
	Name string `json:"name,omitempty"`
	// +optional
	Namespace string `json:"namespace,omitempty"`
}

// KubernetesAPIEndpoint is one address of the cluster's API server.
type KubernetesAPIEndpoint struct {
	// ClientNetwork is the name of the network of the clients that should use this
	// address; empty means any network.
	// +optional
	ClientNetwork string `json:"clientNetwork,omitempty"`
	// ServerAddress is the address of the API server for clients of ClientNetwork: a
	// hostname, hostname:port, IP, IP:port or https URL.
	// +optional
	ServerAddress string `json:"serverAddress,omitempty"`
	// CABundle holds the PEM certificate authorities to verify the server with.
	// +optional
	CABundle []byte `json:"caBundle,omitempty"`
}

// ClusterSpec defines the desired state of a Cluster.
type ClusterSpec struct {
	// ClusterID is the UID of the cluster's kube-system namespace.
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=128
	ClusterID types.UID `json:"clusterID"`
	// AuthInfo tells peers how to get credentials for the cluster.
	// +optional
	AuthInfo AuthInfo `json:"authInfo,omitempty"`
	// KubernetesAPIEndpoints are the addresses of the cluster's API server, per
	// client network.
	// +optional
	KubernetesAPIEndpoints []KubernetesAPIEndpoint `json:"kubernetesApiEndpoints,omitempty"`
}

// ClusterType says whether a Cluster CR describes the cluster it is stored in.
// +kubebuilder:validation:Enum=Local;Peer
type ClusterType string

// The cluster types.
const (
	ClusterTypeLocal ClusterType = "Local"
	ClusterTypePeer  ClusterType = "Peer"
)

// ClusterState is the summary state of a Cluster.
// +kubebuilder:validation:Enum=Ready;Failed;Disabled;MissingAuthInfo;InvalidAuthInfo
type ClusterState string

// The cluster states of the seed API.
const (
	ClusterStateReady           ClusterState = "Ready"
	ClusterStateFailed          ClusterState = "Failed"
	ClusterStateDisabled        ClusterState = "Disabled"
	ClusterStateMissingAuthInfo ClusterState = "MissingAuthInfo"
	ClusterStateInvalidAuthInfo ClusterState = "InvalidAuthInfo"
)

// ClusterConditionType is the type of a ClusterCondition.
type ClusterConditionType string

// The cluster condition types of the seed API.
const (
	// ClusterConditionLocalCluster is True on the Cluster CR describing the cluster it
	// is stored in.
	ClusterConditionLocalCluster ClusterConditionType = "LocalCluster"
	// ClusterConditionLocalConflict is True when more than one Cluster CR claims the
	// local cluster ID.
	ClusterConditionLocalConflict ClusterConditionType = "LocalConflict"
	// ClusterConditionMetadataSet is True once the cluster's metadata is in the status.
	ClusterConditionMetadataSet ClusterConditionType = "ClusterMetadataSet"
	// ClusterConditionReady is True when the cluster is reachable and usable.
	ClusterConditionReady ClusterConditionType = "Ready"
	// ClusterConditionClustersSynced is True when this cluster's and the peer's views
	// of the group agree.
	ClusterConditionClustersSynced ClusterConditionType = "ClustersSynced"
	// ClusterConditionReaderKeyReady is about the key pair the credentials issued to a
	// cluster are sealed to (see ReaderPublicKeyAnnotation). On the local Cluster it is
	// True once the key pair is in its Secret (ReaderKeySecretName) and its public key is
	// advertised, False with ReasonReaderKeySecretFailed or ReasonReaderKeyInvalid when
	// not. On a peer's Cluster it says what the public key the peer advertises on its own
	// Cluster, as its API server serves it, is worth to this cluster as an issuer: True
	// when the credential issued to the peer is sealed to it, False with
	// ReasonReaderKeyInvalid or ReasonNoReaderKey (nothing is issued to the peer: it reads
	// only this cluster's membership); absent until the peer's own Cluster has been read.
	ClusterConditionReaderKeyReady ClusterConditionType = "ReaderKeyReady"
	// ClusterConditionRelaysAgree, on the local Cluster, is False when a cluster this
	// cluster knows only through relays is relayed differently by the members that
	// relay it (another name, ID, API server, CA or public key): it is not learnt until
	// they agree or an admin of this cluster joins it here (ReasonConflictingRelays,
	// naming the cluster and each relay).
	ClusterConditionRelaysAgree ClusterConditionType = "RelaysAgree"
	// ClusterConditionReaderCredentialReady, on a peer's Cluster, says which credential
	// this cluster reads the peer with: True (ReasonIssuedCredential) with the reader the
	// peer issued this cluster, or (ReasonLegacyPeer) with the reader Secret its Cluster
	// names, the peer being a legacy one; False (ReasonBootstrapCredential) with the
	// peer's shared reader token, a bootstrap credential that reads the peer's Clusters
	// and the credential issued to this cluster and no object: the peer has not issued
	// this cluster a reader yet, rejected the one it issued (revoked it), or the one it
	// issued does not open with this cluster's key; the message says which. Absent while
	// the peer is not connected (disabled, no reader Secret).
	ClusterConditionReaderCredentialReady ClusterConditionType = "ReaderCredentialReady"
	// ClusterConditionWithinSizing, on the local Cluster, says whether this controller
	// runs within the sizing docs/controller.md gives for the group's size: True
	// (ReasonWithinSizing), or False with the first limit it is over
	// (ReasonMembershipNearCap, ReasonMemoryBelowSizing, ReasonCPUBelowSizing) and what to
	// raise. Written by controllers of this version on; the seed's never write it.
	ClusterConditionWithinSizing ClusterConditionType = "WithinSizing"
)

// Reasons of cluster conditions.
const (
	ReasonLocalClusterFound    = "LocalClusterFound"
	ReasonPeerCluster          = "PeerCluster"
	ReasonLocalIDConflict      = "LocalClusterIDConflict"
	ReasonNoConflict           = "NoConflict"
	ReasonMetadataCollected    = "MetadataCollected"
	ReasonMetadataFailed       = "MetadataCollectionFailed"
	ReasonClusterReachable     = "ClusterReachable"
	ReasonClusterUnreachable   = "ClusterUnreachable"
	ReasonClusterDisabled      = "ClusterDisabled"
	ReasonMissingAuthInfo      = "MissingAuthInfo"
	ReasonInvalidAuthInfo      = "InvalidAuthInfo"
	ReasonClusterIDMismatch    = "ClusterIDMismatch"
	ReasonClustersInSync       = "ClustersInSync"
	ReasonClustersOutOfSync    = "ClustersOutOfSync"
	ReasonClusterNotConnected  = "ClusterNotConnected"
	ReasonControllerNotRunning = "ControllerNotRunning"

	// ReasonReaderKeyAdvertised (ReaderKeyReady True): the cluster has a valid key pair
	// and advertises its public key.
	ReasonReaderKeyAdvertised = "ReaderKeyAdvertised"
	// ReasonReaderKeySecretFailed (ReaderKeyReady False, local Cluster): the key pair's
	// Secret cannot be made or read, or its public key cannot be advertised on the local
	// Cluster (an API error: a missing readers namespace, missing rights); the message
	// says which. While no key is advertised, peers issue this cluster no credential (it
	// reads only their membership); while the key cannot be read, the ones sealed to it
	// are not used.
	ReasonReaderKeySecretFailed = "ReaderKeySecretFailed"
	// ReasonReaderKeyInvalid (ReaderKeyReady False): on the local Cluster, the key
	// pair's Secret holds no valid private key (deleting it makes a new key pair); on a
	// peer's Cluster, the public key the peer advertises is malformed, and this cluster
	// issues the peer no credential until the peer advertises a valid one.
	ReasonReaderKeyInvalid = "ReaderKeyInvalid"
	// ReasonNoReaderKey (ReaderKeyReady False, peer's Cluster): the peer advertises no
	// public key: this cluster issues it no credential (one in clear would be readable by
	// every reader of the registry namespace).
	ReasonNoReaderKey = "NoReaderKey"
	// ReasonRelaysAgree (RelaysAgree True): every cluster learnt only through relays was
	// relayed alike.
	ReasonRelaysAgree = "RelaysAgree"
	// ReasonConflictingRelays (RelaysAgree False): see ClusterConditionRelaysAgree.
	ReasonConflictingRelays = "ConflictingRelays"
	// ReasonIssuedCredential (ReaderCredentialReady True): the peer is read with the
	// reader credential it issued this cluster.
	ReasonIssuedCredential = "IssuedCredential"
	// ReasonBootstrapCredential (ReaderCredentialReady False): the peer is read with its
	// shared reader token, a bootstrap credential; see
	// ClusterConditionReaderCredentialReady.
	ReasonBootstrapCredential = "BootstrapCredential"
	// ReasonWithinSizing (WithinSizing True): the container's limits are at least what the
	// sizing gives for the group's size, or there are none.
	ReasonWithinSizing = "WithinSizing"
	// ReasonMembershipNearCap (WithinSizing False): the group's members are over 80 % of
	// --max-peer-membership-objects; a peer offering more than the cap is refused.
	ReasonMembershipNearCap = "MembershipNearCap"
	// ReasonMemoryBelowSizing (WithinSizing False): the container's memory limit is below
	// the sizing's for the number of peers.
	ReasonMemoryBelowSizing = "MemoryBelowSizing"
	// ReasonCPUBelowSizing (WithinSizing False): the container's CPU limit is below the
	// sizing's CPU for the number of peers.
	ReasonCPUBelowSizing = "CPUBelowSizing"
)

// ClusterCondition is one condition of a Cluster.
type ClusterCondition struct {
	// Type of the condition.
	Type ClusterConditionType `json:"type"`
	// Status of the condition: True, False or Unknown.
	Status corev1.ConditionStatus `json:"status"`
	// LastHeartbeatTime is the last time the condition was checked.
	// +optional
	LastHeartbeatTime metav1.Time `json:"lastHeartbeatTime,omitempty"`
	// LastTransitionTime is the last time the condition changed status.
	// +optional
	LastTransitionTime metav1.Time `json:"lastTransitionTime,omitempty"`
	// Reason is a brief CamelCase reason for the last status change.
	// +optional
	Reason string `json:"reason,omitempty"`
	// Message is a human-readable message about the last status change.
	// +optional
	Message string `json:"message,omitempty"`
}

// ClusterMetadata describes the cluster, as read from its nodes and API server.
type ClusterMetadata struct {
	// Provider is the infrastructure provider, e.g. amazon, google, azure.
	// +optional
	Provider string `json:"provider,omitempty"`
	// Distribution is the Kubernetes distribution, e.g. EKS, GKE, AKS, KIND, K3S, RKE, OPENSHIFT.
	// +optional
	Distribution string `json:"distribution,omitempty"`
	// KubeProxyVersions are the distinct kube-proxy versions of the nodes, sorted.
	// +optional
	KubeProxyVersions []string `json:"kubeProxyVersions,omitempty"`
	// KubeletVersions are the distinct kubelet versions of the nodes, sorted.
	// +optional
	KubeletVersions []string `json:"kubeletVersions,omitempty"`
	// Version is the version of the API server.
	// +optional
	Version string `json:"version,omitempty"`
	// Locality is where the cluster runs.
	// +optional
	Locality *Locality `json:"locality,omitempty"`
}

// Locality is where a cluster runs.
type Locality struct {
	// Region is the region of the cluster; the most common node region.
	// +optional
	Region string `json:"region,omitempty"`
	// Regions are the distinct regions of the nodes, sorted.
	// +optional
	Regions []string `json:"regions,omitempty"`
	// Zones are the distinct zones of the nodes, sorted.
	// +optional
	Zones []string `json:"zones,omitempty"`
}

// ClusterStatus is the observed state of a Cluster.
type ClusterStatus struct {
	// State summarises the cluster's status.
	// +optional
	State ClusterState `json:"state,omitempty"`
	// Message explains State.
	// +optional
	Message string `json:"message,omitempty"`
	// Type is Local for the CR describing the cluster it is stored in, Peer otherwise.
	// +optional
	Type ClusterType `json:"type,omitempty"`
	// Leader is true while the local controller holds leadership (seed field).
	// +optional
	Leader bool `json:"leader,omitempty"`
	// ControllerVersion is the version of the kubectl-registry controller of the cluster:
	// on the local Cluster its own, on a peer's the one that peer reports on its own
	// Cluster. Empty for a controller that does not report one (the seed's, or a version
	// older than the field).
	// +optional
	ControllerVersion string `json:"controllerVersion,omitempty"`

	ClusterMetadata `json:",inline"`

	// Conditions of the cluster.
	// +optional
	Conditions []ClusterCondition `json:"conditions,omitempty"`
}

// Cluster represents a Kubernetes cluster of the group.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:path=clusters,scope=Cluster,categories=clusterregistry
// +kubebuilder:printcolumn:name="ID",type="string",JSONPath=".spec.clusterID"
// +kubebuilder:printcolumn:name="State",type="string",JSONPath=".status.state"
// +kubebuilder:printcolumn:name="Type",type="string",JSONPath=".status.type"
// +kubebuilder:printcolumn:name="Synced",type="string",JSONPath=".status.conditions[?(@.type==\"ClustersSynced\")].status"
// +kubebuilder:printcolumn:name="Version",type="string",JSONPath=".status.version",priority=1
// +kubebuilder:printcolumn:name="Provider",type="string",JSONPath=".status.provider",priority=1
// +kubebuilder:printcolumn:name="Distribution",type="string",JSONPath=".status.distribution",priority=1
// +kubebuilder:printcolumn:name="Region",type="string",JSONPath=".status.locality.region",priority=1
// +kubebuilder:printcolumn:name="Message",type="string",JSONPath=".status.message",priority=1
// +kubebuilder:printcolumn:name="Age",type="date",JSONPath=".metadata.creationTimestamp"
type Cluster struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +required
	Spec   ClusterSpec   `json:"spec"`
	Status ClusterStatus `json:"status,omitempty"`
}

// Disabled reports whether the cluster-disabled annotation is set on this copy of the
// Cluster: it stops all work with that cluster here. The one place the annotation is
// read.
func (c *Cluster) Disabled() bool {
	return c.Annotations[ClusterDisabledAnnotation] == "true"
}

// ClusterList is a list of Clusters.
//
// +kubebuilder:object:root=true
type ClusterList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Cluster `json:"items"`
}

func init() {
	SchemeBuilder.Register(&Cluster{}, &ClusterList{})
}
