package members

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kubectl-registry/kubectl-registry/reconciler/api/v1alpha1"
)

// planReceived keeps, for every Ready peer X (read with a reader of its own or with its
// bootstrap credential), the reader credential X issued to this cluster (see package
// credentials): taken from X itself only, sealed as X sealed it to this cluster's key
// (opened only to connect, where its token is used with the server and CA pinned for
// X); written as v1alpha1.ReceivedReaderSecretName(X) with X's ownership mark, so that
// it is deleted with X's other copies when X leaves. A credential that is not sealed is
// not kept: every reader of this cluster's registry namespace could read it.
func planReceived(in Input, peers []View, localSecrets map[string]*corev1.Secret, gone Departures, disabled map[types.UID]bool) ([]Write, []string) {
	var ws []Write
	var conflicts []string
	for _, view := range peers {
		x := view.ClusterID
		if _, left := gone[x]; left || disabled[x] || x == "" || x == in.LocalID {
			continue
		}
		issued := issuedFor(view, in.LocalID)
		if issued == nil {
			continue
		}
		var local *v1alpha1.Cluster
		for i := range in.Local.Clusters {
			c := &in.Local.Clusters[i]
			if c.Spec.ClusterID == x && (local == nil || c.Name < local.Name) {
				local = c
			}
		}
		if local == nil {
			continue // not known here yet: its Cluster comes first
		}
		ref := local.Spec.AuthInfo.SecretRef
		if ref.Name == "" || (ref.Namespace != "" && ref.Namespace != in.Namespace) || localSecrets[ref.Name] == nil {
			continue // no server and CA pinned for X yet
		}
		sealed := issued.Data[v1alpha1.SealedKubeconfigKey]
		problem := ""
		if len(sealed) == 0 {
			problem = "it is not sealed to this cluster's key (a credential in clear would be readable by every reader of this cluster's registry namespace)"
		}
		data := map[string][]byte{v1alpha1.SealedKubeconfigKey: sealed}
		if notice := issued.Data[v1alpha1.SealedNoticeKey]; len(notice) > 0 {
			// The notice token, sealed too: what this cluster reads its departure with
			// once X revoked the credential above.
			data[v1alpha1.SealedNoticeKey] = notice
		}
		name := v1alpha1.ReceivedReaderSecretName(x)
		if problem != "" {
			conflicts = append(conflicts, fmt.Sprintf("reader credential %s issued by cluster %s not copied: %s", issued.Name, x, problem))
			continue
		}
		existing := localSecrets[name]
		if existing != nil && existing.Annotations[v1alpha1.OwnershipAnnotation] != string(x) {
			conflicts = append(conflicts, fmt.Sprintf("Secret %s/%s is not a copy of cluster %s's; its reader credential is not written over it", in.Namespace, name, x))
			continue
		}
		desired := &corev1.Secret{}
		desired.Namespace, desired.Name, desired.Type = in.Namespace, name, v1alpha1.SecretTypeClusterRegistry
		desired.Labels = map[string]string{
			"app.kubernetes.io/part-of": "kubectl-registry",
			v1alpha1.ReaderFromLabel:    v1alpha1.ReaderKey(x),
			v1alpha1.OwnershipLabel:     string(x),
		}
		desired.Annotations = map[string]string{v1alpha1.OwnershipAnnotation: string(x)}
		for _, k := range []string{v1alpha1.TokenExpiresAtAnnotation, v1alpha1.TokenIssuedAtAnnotation, v1alpha1.SealedToAnnotation} {
			if v, ok := issued.Annotations[k]; ok {
				desired.Annotations[k] = v
			}
		}
		desired.Data = data
		switch {
		case existing == nil:
			ws = append(ws, Write{Op: OpCreate, Object: desired, From: view.Name, Describes: x})
		case existing.Type != desired.Type:
			desired.UID = existing.UID
			ws = append(ws, Write{Op: OpReplace, Object: desired, From: view.Name, Describes: x})
		case !apiequality.Semantic.DeepEqual(existing.Data, desired.Data) || !sameMap(existing.Labels, desired.Labels) || !sameMap(existing.Annotations, desired.Annotations):
			s := existing.DeepCopy()
			s.Labels, s.Annotations, s.Data, s.StringData = desired.Labels, desired.Annotations, desired.Data, nil
			ws = append(ws, Write{Op: OpUpdate, Object: s, Base: existing, From: view.Name, Describes: x})
		}
	}
	return ws, conflicts
}

// issuedFor returns the reader credential the view's cluster issued to cluster id: its
// own Secret (no ownership mark) of that name and label, or nil.
func issuedFor(view View, id types.UID) *corev1.Secret {
	name := v1alpha1.IssuedReaderSecretName(id)
	for i := range view.Secrets {
		s := &view.Secrets[i]
		if s.Name == name && s.Labels[v1alpha1.ReaderForLabel] == v1alpha1.ReaderKey(id) &&
			s.Annotations[v1alpha1.OwnershipAnnotation] == "" && s.Type == v1alpha1.SecretTypeClusterRegistry {
			return s
		}
	}
	return nil
}
