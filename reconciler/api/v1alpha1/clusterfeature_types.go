package v1alpha1

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// ClusterFeatureSpec defines the feature a cluster offers.
type ClusterFeatureSpec struct {
	// FeatureName is the name ResourceSyncRules match in clusterFeatureMatch: a label
	// key, i.e. an optional DNS subdomain prefix and "/", then a name of alphanumerics,
	// '-', '_' and '.' that starts and ends with an alphanumeric.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=316
	// +kubebuilder:validation:Pattern=`^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$`
	FeatureName string `json:"featureName"`
}

// ClusterFeatureStatus is the observed state of a ClusterFeature (empty, as in the seed).
type ClusterFeatureStatus struct{}

// ClusterFeature marks the cluster it is stored in as offering a feature, which makes it
// a source for ResourceSyncRules whose clusterFeatureMatch selects the feature. Its
// labels are matched by clusterFeatureMatch's matchLabels and matchExpressions.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:path=clusterfeatures,scope=Cluster,shortName=cf,categories=clusterregistry
// +kubebuilder:printcolumn:name="Feature",type="string",JSONPath=".spec.featureName"
// +kubebuilder:printcolumn:name="Age",type="date",JSONPath=".metadata.creationTimestamp"
type ClusterFeature struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   ClusterFeatureSpec   `json:"spec"`
	Status ClusterFeatureStatus `json:"status,omitempty"`
}

// ClusterFeatureList is a list of ClusterFeatures.
//
// +kubebuilder:object:root=true
type ClusterFeatureList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ClusterFeature `json:"items"`
}

func init() {
	SchemeBuilder.Register(&ClusterFeature{}, &ClusterFeatureList{})
}
