package members

import (
	"bytes"
	"fmt"
	"maps"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kubectl-registry/kubectl-registry/reconciler/api/v1alpha1"
	"github.com/kubectl-registry/kubectl-registry/reconciler/kubeconfig/document"
)

// refSecret returns the Secret of view that c references in the registry namespace ns, or
// nil.
func refSecret(view View, c *v1alpha1.Cluster, ns string) *corev1.Secret {
	ref := c.Spec.AuthInfo.SecretRef
	if ref.Name == "" || (ref.Namespace != "" && ref.Namespace != ns) {
		return nil
	}
	for i := range view.Secrets {
		if view.Secrets[i].Name == ref.Name {
			return &view.Secrets[i]
		}
	}
	return nil
}

// kubeconfigs reads reader kubeconfigs (document.Read), each content once: every peer
// relays the same reader Secrets, so a plan among N peers meets each up to N times (at
// 100 peers, re-reading them was 8 % of a member's CPU at a restart). It lives for one
// plan, and holds what that plan's input holds; a nil kubeconfigs reads every time.
type kubeconfigs map[string]kubeconfigRead

// kubeconfigRead is what document.Read returned for one content.
type kubeconfigRead struct {
	r  document.Reader
	ok bool
}

// read is document.Read of data, once per content. The Reader is shared between the
// callers that read the same content: they only read it.
func (k kubeconfigs) read(data []byte) (document.Reader, bool) {
	if k == nil {
		return document.Read(data)
	}
	if got, ok := k[string(data)]; ok {
		return got.r, got.ok
	}
	r, ok := document.Read(data)
	k[string(data)] = kubeconfigRead{r: r, ok: ok}
	return r, ok
}

// newer reports whether the token of src is newer than the token of existing: it states a
// later expiry, or the same and a later issue. Two tokens issued in the same second (a
// token for a recreated ServiceAccount right after one for the old) state the same
// times; the issue time the bootstrapper annotates, with nanoseconds, then tells them
// apart: the whole time, not its sub-second part, since the bootstrapper's clock and the
// API server's seconds do not turn together (a token annotated 10:00:00.9 and one
// annotated 10:00:01.2 may both state iat 10:00:01). That annotation is written by a
// member and could lie, but a relayed token is written only after it has authenticated
// against the pinned server, so a lie gains nothing.
func (k kubeconfigs) newer(src, existing *corev1.Secret) bool {
	se, si := k.tokenTimes(src)
	ee, ei := k.tokenTimes(existing)
	switch {
	case !se.Equal(ee):
		return se.After(ee)
	case !si.Equal(ei):
		return si.After(ei)
	}
	return issuedAt(src).After(issuedAt(existing))
}

// issuedAt is the issue time annotated on a reader Secret, with its nanoseconds, or the
// zero time (earlier than any).
func issuedAt(s *corev1.Secret) time.Time {
	if s == nil {
		return time.Time{}
	}
	t, err := time.Parse(time.RFC3339Nano, s.Annotations[v1alpha1.TokenIssuedAtAnnotation])
	if err != nil {
		return time.Time{}
	}
	return t
}

// tokenTimes returns what the token of a reader Secret states of its expiry and issue.
func (k kubeconfigs) tokenTimes(s *corev1.Secret) (exp, iat time.Time) {
	r, ok := k.read(s.Data[v1alpha1.KubeconfigKey])
	if !ok {
		return time.Time{}, time.Time{}
	}
	exp, iat, _ = document.TokenTimes(r.Token)
	return exp, iat
}

// checkRelay returns why a reader Secret offered by a peer other than the cluster it is
// for is refused, or "": its kubeconfig must be one the controller accepts, and its
// token must state an expiry no further ahead than MaxTokenLifetime; a renewal (renewal)
// must state one, or it cannot be newer.
func (k kubeconfigs) checkRelay(s *corev1.Secret, now time.Time, renewal bool) string {
	r, ok := k.read(s.Data[v1alpha1.KubeconfigKey])
	if !ok {
		return "its kubeconfig is not one the controller accepts"
	}
	exp, _, ok := document.TokenTimes(r.Token)
	switch {
	case !ok && renewal:
		return "its token states no expiry"
	case !ok:
		return ""
	case !now.IsZero() && exp.After(now.Add(MaxTokenLifetime)):
		return fmt.Sprintf("its token claims to expire at %s, more than %s ahead", exp.Format(time.RFC3339), MaxTokenLifetime)
	}
	return ""
}

// pinned returns src as it may replace the local reader Secret existing: the API server
// address and CA a cluster is reached at are pinned by the first reader Secret this
// cluster had for it (written by join, possibly with an address its admin chose, or
// learnt), and only a join run here (or deleting the local Secret) changes them. An
// offered Secret brings only its token: when it names another server or CA, its token is
// rendered into a kubeconfig for the pinned ones (named name). problem says why src
// cannot be used at all.
func (k kubeconfigs) pinned(existing, src *corev1.Secret, name string) (_ *corev1.Secret, problem string) {
	got, ok := k.read(src.Data[v1alpha1.KubeconfigKey])
	if !ok {
		return src, "its kubeconfig is not one the controller accepts"
	}
	if existing == nil {
		return src, ""
	}
	pin, ok := k.read(existing.Data[v1alpha1.KubeconfigKey])
	if !ok || got.Server == pin.Server && bytes.Equal(got.CAData, pin.CAData) {
		return src, "" // nothing usable is pinned, or the same server and CA
	}
	if got.Token == "" {
		return src, "it names another API server or CA than the pinned ones and holds no token to use with them"
	}
	data, err := document.Render(document.Reader{ClusterName: name, Server: pin.Server, CAData: pin.CAData, Token: got.Token})
	if err != nil {
		return src, fmt.Sprintf("rendering its token for the pinned server: %v", err)
	}
	out := src.DeepCopy()
	out.Data = maps.Clone(src.Data)
	out.Data[v1alpha1.KubeconfigKey] = data
	return out, ""
}

func (k kubeconfigs) planSecret(existing, src *corev1.Secret, x types.UID, ns string, adoptable, relayOnly bool) (*write, string) {
	if existing != nil {
		mark := existing.Annotations[v1alpha1.OwnershipAnnotation]
		switch {
		case mark == "" && !adoptable:
			return nil, fmt.Sprintf("Secret %s/%s was created locally; cluster %s's reader Secret of that name is not copied", ns, existing.Name, x)
		case mark != "" && mark != string(x):
			return nil, fmt.Sprintf("Secret %s/%s is a copy of cluster %s's; not overwritten by cluster %s's", ns, existing.Name, mark, x)
		}
		if relayOnly {
			if !k.newer(src, existing) {
				return nil, ""
			}
		}
	}
	var existingAnnotations map[string]string
	if existing != nil {
		existingAnnotations = existing.Annotations
	}
	labels, annotations := copyMeta(src, existingAnnotations, x)
	desired := &corev1.Secret{}
	desired.Namespace, desired.Name = ns, src.Name
	desired.Labels, desired.Annotations = labels, annotations
	desired.Type = src.Type
	desired.Data = maps.Clone(src.Data)
	if existing == nil {
		return &write{op: OpCreate, obj: desired}, ""
	}
	if existing.Type == src.Type && apiequality.Semantic.DeepEqual(existing.Data, src.Data) &&
		sameMap(existing.Labels, labels) && sameMap(existing.Annotations, annotations) {
		return nil, ""
	}
	if existing.Type != src.Type {
		desired.UID = existing.UID
		return &write{op: OpReplace, obj: desired}, ""
	}
	s := existing.DeepCopy()
	s.Labels, s.Annotations, s.Data, s.StringData = labels, annotations, maps.Clone(src.Data), nil
	return &write{op: OpUpdate, obj: s, base: existing}, ""
}
