package members

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kubectl-registry/kubectl-registry/reconciler/api/v1alpha1"
)

// issued is the reader credential cluster x issued to cluster forID, as x publishes it:
// sealed (its sealed bytes name note).
func issued(forID types.UID, note string, mods ...mod) *corev1.Secret {
	all := append([]mod{
		label(v1alpha1.ReaderForLabel, v1alpha1.ReaderKey(forID)),
		annotate(v1alpha1.SealedToAnnotation, "fp"), sealedData(note),
	}, mods...)
	return sec(v1alpha1.IssuedReaderSecretName(forID), defaultExpiryAt, all...)
}

// sealedData makes a Secret's data the sealed credential named note.
func sealedData(note string) mod {
	return func(o Object) {
		o.(*corev1.Secret).Data = map[string][]byte{v1alpha1.SealedKubeconfigKey: []byte("sealed " + note)}
	}
}

// received is the local Secret holding the credential x issued to l, as Plan writes it.
func received(note string, mods ...mod) *corev1.Secret {
	s := issued(idL, note, mark(idX), label(v1alpha1.ReaderFromLabel, v1alpha1.ReaderKey(idX)))
	s.Name = v1alpha1.ReceivedReaderSecretName(idX)
	delete(s.Labels, v1alpha1.ReaderForLabel)
	for _, m := range mods {
		m(s)
	}
	return s
}

// bootstrap marks a view as read with the peer's bootstrap credential.
func bootstrap(v View) View {
	v.Bootstrap = true
	return v
}

// TestPlanReceived: a member keeps, sealed, the reader credential each Ready peer issued
// to it, taken from that peer itself only, whether it reads the peer with a credential
// of its own or with the bootstrap one; never one in clear.
func TestPlanReceived(t *testing.T) {
	recv := v1alpha1.ReceivedReaderSecretName(idX)
	tests := []struct {
		name      string
		in        Input
		want      []string
		note      string // the sealed credential the written copy holds
		conflicts []string
	}{
		{
			name: "the credential x issued to l is kept as l's copy",
			in:   input(copies("x", idX), []View{peer("x", idX, objs(own("x", idX), []Object{issued(idL, "for-l")})...)}),
			want: []string{"create Secret " + ns + "/" + recv + " from=x describes=uid-x"},
			note: "for-l",
		},
		{
			name: "read with the bootstrap credential, x's credential for l is kept too",
			in:   input(copies("x", idX), []View{bootstrap(peer("x", idX, []Object{issued(idL, "for-l")}...))}),
			want: []string{"create Secret " + ns + "/" + recv + " from=x describes=uid-x"},
			note: "for-l",
		},
		{
			name: "a credential x issued to another member is not taken",
			in:   input(copies("x", idX), []View{peer("x", idX, objs(own("x", idX), []Object{issued(idA, "for-a")})...)}),
		},
		{
			name: "a credential for l relayed by another member is not taken",
			in: input(objs(copies("x", idX), copies("a", idA)), []View{
				peer("a", idA, objs(own("a", idA), copies("x", idX), []Object{issued(idL, "relayed", mark(idX))})...),
			}),
		},
		{
			name: "a credential of a cluster not known yet waits for its Cluster",
			in:   input(nil, []View{peer("x", idX, objs(own("x", idX), []Object{issued(idL, "for-l")})...)}),
		},
		{
			name: "a credential in clear is not kept: this cluster's readers could read it",
			in: input(copies("x", idX), []View{peer("x", idX, objs(own("x", idX), []Object{issued(idL, "clear", unannotate(v1alpha1.SealedToAnnotation),
				readerServer("https://x.example:6443", nil), token("clear"), func(o Object) { delete(o.(*corev1.Secret).Data, v1alpha1.SealedKubeconfigKey) })})...)}),
			conflicts: []string{"it is not sealed to this cluster's key"},
		},
		{
			name: "an unchanged credential is not written",
			in:   input(objs(copies("x", idX), []Object{received("for-l")}), []View{peer("x", idX, objs(own("x", idX), []Object{issued(idL, "for-l")})...)}),
		},
		{
			name: "a renewed credential updates l's copy",
			in:   input(objs(copies("x", idX), []Object{received("old")}), []View{peer("x", idX, objs(own("x", idX), []Object{issued(idL, "new")})...)}),
			want: []string{"update Secret " + ns + "/" + recv + " from=x describes=uid-x"},
			note: "new",
		},
		{
			name:      "a local Secret of that name made by hand is not overwritten",
			in:        input(objs(copies("x", idX), []Object{sec(recv, defaultExpiryAt)}), []View{peer("x", idX, objs(own("x", idX), []Object{issued(idL, "for-l")})...)}),
			conflicts: []string{"is not a copy of cluster uid-x's"},
		},
		{
			name: "the credential of a cluster that left is deleted with its other copies",
			in: func() Input {
				in := input(objs(copies("x", idX), []Object{received("for-l")}), []View{peer("x", idX, objs(own("x", idX), []Object{issued(idL, "for-l")})...)})
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
			if tt.note == "" {
				return
			}
			if diff := cmp.Diff(map[string][]byte{v1alpha1.SealedKubeconfigKey: []byte("sealed " + tt.note)}, written.Data); diff != "" {
				t.Errorf("written credential data (-want +got):\n%s", diff)
			}
			if written.Annotations[ownershipKey] != string(idX) || written.Labels[v1alpha1.ReaderFromLabel] != v1alpha1.ReaderKey(idX) || written.Type != registrySecret {
				t.Errorf("written credential: ownership %q, from %q, type %q", written.Annotations[ownershipKey], written.Labels[v1alpha1.ReaderFromLabel], written.Type)
			}
		})
	}
}

// TestPlanReceivedSealed: a credential x sealed to l is kept sealed, as x wrote it: l
// opens it only to connect.
func TestPlanReceivedSealed(t *testing.T) {
	recv := v1alpha1.ReceivedReaderSecretName(idX)
	sealedIssued := issued(idL, "for-l", annotate(v1alpha1.SealedToAnnotation, "fp"), func(o Object) {
		o.(*corev1.Secret).Data = map[string][]byte{v1alpha1.SealedKubeconfigKey: []byte("sealed bytes")}
	})
	res := Plan(input(copies("x", idX), []View{peer("x", idX, objs(own("x", idX), []Object{sealedIssued})...)}))
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
	empty := issued(idL, "for-l", func(o Object) {
		o.(*corev1.Secret).Data = map[string][]byte{v1alpha1.SealedKubeconfigKey: nil}
	})
	res = Plan(input(copies("x", idX), []View{peer("x", idX, objs(own("x", idX), []Object{empty})...)}))
	for _, s := range summary(res) {
		if strings.Contains(s, recv) {
			t.Errorf("an empty credential was written: %s", s)
		}
	}
}

// TestPlanBootstrapView: a peer read with its bootstrap credential teaches nothing (its
// Clusters are not learnt from, as they would be from a view of its own), and counts as
// not Ready: a relay of a newer token for it is taken, as for an unreachable peer.
func TestPlanBootstrapView(t *testing.T) {
	knowsA := objs(own("x", idX), copies("a", idA))
	for _, tt := range []struct {
		name string
		view View
		want []string
	}{
		{"a view of its own: a is learnt", peer("x", idX, knowsA...), []string{
			"create Cluster a from=x describes=uid-a", "create Secret " + ns + "/a from=x describes=uid-a"}},
		{"the bootstrap view: nothing is learnt", bootstrap(peer("x", idX, knowsA...)), nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, summary(Plan(input(copies("x", idX), []View{tt.view})))); diff != "" {
				t.Errorf("writes (-want +got):\n%s", diff)
			}
		})
	}

	// y relays a newer token of x: taken while x is read with its bootstrap credential
	// only, not while x answers with a view of its own.
	newer := []Object{cl("x", idX, mark(idX)), sec("x", defaultExpiryAt+1, mark(idX))}
	y := peer("y", idY, objs(own("y", idY), newer)...)
	local := objs(copies("x", idX), copies("y", idY))
	for _, tt := range []struct {
		name string
		x    View
		want []string
	}{
		{"x answers with a view of its own: its own copy counts", peer("x", idX, own("x", idX)...), nil},
		{"x is read with its bootstrap credential: the relay renews its token", bootstrap(peer("x", idX, own("x", idX)...)), []string{
			"update Secret " + ns + "/x from=y describes=uid-x"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var got []string
			for _, s := range summary(Plan(input(local, []View{tt.x, y}))) {
				if strings.Contains(s, "describes=uid-x") {
					got = append(got, s)
				}
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("writes about x (-want +got):\n%s", diff)
			}
		})
	}
}
