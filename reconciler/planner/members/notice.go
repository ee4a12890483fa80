package members

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kubectl-registry/kubectl-registry/reconciler/api/v1alpha1"
)

// NoticeView turns the departure notice cm, read from member peer (name, ID) with the
// notice token it sealed to this cluster (localID), into the member's record for Decide:
// a view holding only the member's own Cluster, recording this cluster's departure at
// the notice's time. The notice must be about this cluster (v1alpha1.DepartureKey
// "<localID>@<time>", v1alpha1.PeerClusterIDAnnotation localID) and the member's own
// object (no ownership mark). A notice is a record like the member's own Cluster: it
// counts once, for that member, towards the majority Decide asks for; it teaches nothing
// else (the view is a bootstrap one, with no Secret).
func NoticeView(name string, peer, localID types.UID, cm *corev1.ConfigMap) (View, error) {
	if cm == nil {
		return View{}, fmt.Errorf("no departure notice from cluster %s", name)
	}
	if cm.Annotations[v1alpha1.OwnershipAnnotation] != "" || cm.Labels[v1alpha1.OwnershipLabel] != "" {
		return View{}, fmt.Errorf("departure notice %s of cluster %s is a copy: ignored", cm.Name, name)
	}
	if id := types.UID(cm.Annotations[v1alpha1.PeerClusterIDAnnotation]); id != localID {
		return View{}, fmt.Errorf("departure notice %s of cluster %s is for cluster %q, not this cluster", cm.Name, name, id)
	}
	d, bad := ParseDepartures(cm.Data[v1alpha1.DepartureKey])
	at, ok := d[localID]
	if len(bad) > 0 || len(d) != 1 || !ok {
		return View{}, fmt.Errorf("departure notice %s of cluster %s holds %q, not one record of this cluster's departure", cm.Name, name, cm.Data[v1alpha1.DepartureKey])
	}
	c := v1alpha1.Cluster{}
	c.Name = name
	c.Spec.ClusterID = peer
	c.Annotations = map[string]string{v1alpha1.ConfirmedDeparturesAnnotation: Departures{localID: at}.Format()}
	return View{Name: name, ClusterID: peer, Bootstrap: true, Clusters: []v1alpha1.Cluster{c}}, nil
}
