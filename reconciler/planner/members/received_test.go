package members

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubectl-registry/kubectl-registry/reconciler/api/v1alpha1"
	"github.com/kubectl-registry/kubectl-registry/reconciler/kubeconfig"
)

// issued is the reader credential cluster x (its server https://x.example:6443) issued
// to cluster forID, as x publishes it; note marks its token.
func issued(forID types.UID, note string, mods ...mod) *corev1.Secret {
	all := append([]mod{
		label(v1alpha1.ReaderForLabel, v1alpha1.ReaderKey(forID)),
		readerServer("https://x.example:6443", nil), token(note),
	}, mods...)
	return sec(v1alpha1.IssuedReaderSecretName(forID), defaultExpiryAt, all...)
}

// received is the local Secret holding the credential x issued to l, as Plan writes it.
func received(note string, mods ...mod) *corev1.Secret {
	s := issued(idL, note, mark(idX), label(v1alpha1.ReaderFromLabel, v1alpha1.ReaderKey(idX)), unannotate(expiresAtKey))
	s.Name = v1alpha1.ReceivedReaderSecretName(idX)
	delete(s.Labels, v1alpha1.ReaderForLabel)
	s.Annotations[expiresAtKey] = at(defaultExpiryAt)
	s.Data[kubeconfigKey] = issued(idL, note).Data[kubeconfigKey]
	for _, m := range mods {
		m(s)
	}
	return s
}

// TestPlanReceived: a member keeps the reader credential each Ready peer issued to it,
// taken from that peer itself only, rendered for the server and CA pinned for it.
func TestPlanReceived(t *testing.T) {
	recv := v1alpha1.ReceivedReaderSecretName(idX)
	tests := []struct {
		name      string
		in        Input
		want      []string
		token     string // the token note the written credential holds
		server    string
		conflicts []string
	}{
		{
			name:   "the credential x issued to l is kept as l's copy",
			in:     input(copies("x", idX), []View{peer("x", idX, objs(own("x", idX), []client.Object{issued(idL, "for-l")})...)}),
			want:   []string{"create Secret " + ns + "/" + recv + " from=x describes=uid-x"},
			token:  "for-l",
			server: "https://x.example:6443",
		},
		{
			name: "a credential x issued to another member is not taken",
			in:   input(copies("x", idX), []View{peer("x", idX, objs(own("x", idX), []client.Object{issued(idA, "for-a")})...)}),
		},
		{
			name: "a credential for l relayed by another member is not taken",
			in: input(objs(copies("x", idX), copies("a", idA)), []View{
				peer("a", idA, objs(own("a", idA), copies("x", idX), []client.Object{issued(idL, "relayed", mark(idX))})...),
			}),
		},
		{
			name: "a credential of a cluster not known yet waits for its Cluster",
			in:   input(nil, []View{peer("x", idX, objs(own("x", idX), []client.Object{issued(idL, "for-l")})...)}),
		},
		{
			name:   "a credential naming another server is rendered for the pinned one",
			in:     input(copies("x", idX), []View{peer("x", idX, objs(own("x", idX), []client.Object{issued(idL, "moved", readerServer("https://evil.example:6443", nil))})...)}),
			want:   []string{"create Secret " + ns + "/" + recv + " from=x describes=uid-x"},
			token:  "moved",
			server: "https://x.example:6443",
		},
		{
			name: "an unchanged credential is not written",
			in:   input(objs(copies("x", idX), []client.Object{received("for-l")}), []View{peer("x", idX, objs(own("x", idX), []client.Object{issued(idL, "for-l")})...)}),
		},
		{
			name:   "a renewed credential updates l's copy",
			in:     input(objs(copies("x", idX), []client.Object{received("old")}), []View{peer("x", idX, objs(own("x", idX), []client.Object{issued(idL, "new")})...)}),
			want:   []string{"update Secret " + ns + "/" + recv + " from=x describes=uid-x"},
			token:  "new",
			server: "https://x.example:6443",
		},
		{
			name:      "a local Secret of that name made by hand is not overwritten",
			in:        input(objs(copies("x", idX), []client.Object{sec(recv, defaultExpiryAt)}), []View{peer("x", idX, objs(own("x", idX), []client.Object{issued(idL, "for-l")})...)}),
			conflicts: []string{"is not a copy of cluster uid-x's"},
		},
		{
			name: "the credential of a cluster that left is deleted with its other copies",
			in: func() Input {
				in := input(objs(copies("x", idX), []client.Object{received("for-l")}), []View{peer("x", idX, objs(own("x", idX), []client.Object{issued(idL, "for-l")})...)})
				in.Local.Clusters[0].Annotations = map[string]string{v1alpha1.LeftClustersAnnotation: string(idX) + "@" + at(-1)}
				in.Now = t0
				return in
			}(),
			want: []string{"delete Secret " + ns + "/" + recv + " from= describes=uid-x"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := Plan(tt.in)
			var got []string
			var written *corev1.Secret
			for i, s := range summary(res) {
				if strings.Contains(s, v1alpha1.ReceivedReaderSecretPrefix) {
					got = append(got, s)
					written, _ = res.Writes[i].Object.(*corev1.Secret)
				}
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("received credential writes (-want +got):\n%s", diff)
			}
			var conflicts []string
			for _, c := range res.Conflicts {
				if strings.Contains(c, v1alpha1.ReceivedReaderSecretPrefix) || strings.Contains(c, "reader credential") {
					conflicts = append(conflicts, c)
				}
			}
			if diff := cmp.Diff(tt.conflicts, conflictsMatching(conflicts, tt.conflicts)); diff != "" {
				t.Errorf("conflicts (-want +got):\n%s", diff)
			}
			if tt.token == "" {
				return
			}
			r, ok := kubeconfig.Read(written.Data[kubeconfigKey])
			if !ok {
				t.Fatal("the written credential's kubeconfig is unreadable")
			}
			if r.Server != tt.server || !strings.Contains(r.Token, "") || written.Annotations[ownershipKey] != string(idX) ||
				written.Labels[v1alpha1.ReaderFromLabel] != v1alpha1.ReaderKey(idX) || written.Type != registrySecret {
				t.Errorf("written credential: server %q, ownership %q, from %q, type %q", r.Server, written.Annotations[ownershipKey], written.Labels[v1alpha1.ReaderFromLabel], written.Type)
			}
			if want := fakeJWT(t0.Add(defaultExpiryAt*3600e9), t0.Add(defaultExpiryAt*3600e9-24*3600e9), tt.token); r.Token != want {
				t.Errorf("written credential holds another token than the one issued (note %q)", tt.token)
			}
		})
	}
}

// TestPlanReceivedSealed: a credential x sealed to l is kept sealed, as x wrote it: l
// opens it only to connect.
func TestPlanReceivedSealed(t *testing.T) {
	recv := v1alpha1.ReceivedReaderSecretName(idX)
	sealedIssued := issued(idL, "for-l", annotate(v1alpha1.SealedToAnnotation, "fp"), func(o client.Object) {
		o.(*corev1.Secret).Data = map[string][]byte{v1alpha1.SealedKubeconfigKey: []byte("sealed bytes")}
	})
	res := Plan(input(copies("x", idX), []View{peer("x", idX, objs(own("x", idX), []client.Object{sealedIssued})...)}))
	var written *corev1.Secret
	for _, w := range res.Writes {
		if w.Object.GetName() == recv {
			written = w.Object.(*corev1.Secret)
		}
	}
	if written == nil {
		t.Fatalf("no write of %s: %v (conflicts %v)", recv, summary(res), res.Conflicts)
	}
	if diff := cmp.Diff(map[string][]byte{v1alpha1.SealedKubeconfigKey: []byte("sealed bytes")}, written.Data); diff != "" {
		t.Errorf("written data (-want +got):\n%s", diff)
	}
	if got := written.Annotations[v1alpha1.SealedToAnnotation]; got != "fp" {
		t.Errorf("sealed-to %q, want fp", got)
	}

	// An empty sealed value is no credential: it is not written.
	empty := issued(idL, "for-l", func(o client.Object) {
		o.(*corev1.Secret).Data = map[string][]byte{v1alpha1.SealedKubeconfigKey: nil}
	})
	res = Plan(input(copies("x", idX), []View{peer("x", idX, objs(own("x", idX), []client.Object{empty})...)}))
	for _, s := range summary(res) {
		if strings.Contains(s, recv) {
			t.Errorf("an empty credential was written: %s", s)
		}
	}
}
