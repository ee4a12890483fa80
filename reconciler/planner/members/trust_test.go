package members

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kubectl-registry/kubectl-registry/reconciler/api/v1alpha1"
	"github.com/kubectl-registry/kubectl-registry/reconciler/kubeconfig"
)

// testCA returns a PEM certificate, another CA than the test kubeconfigs' (none).
func testCA(t *testing.T) []byte {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "attacker"}, NotBefore: t0, NotAfter: t0.Add(time.Hour), IsCA: true, BasicConstraintsValid: true}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

// created sets the creation time of a local object h hours after t0.
func created(h int) mod {
	return func(o Object) { o.SetCreationTimestamp(metav1.NewTime(t0.Add(time.Duration(h) * time.Hour))) }
}

// TestPlanTrust: what a member offers about another member is checked against what this
// cluster pinned and its own clock; relays are verified before they are written.
func TestPlanTrust(t *testing.T) {
	ca := testCA(t)
	now := t0.Add(11 * time.Hour) // the local copy of x's token (h=10) expired an hour ago
	steadyLocal := objs(copies("a", idA), copies("x", idX))
	type write struct {
		Summary string
		Verify  bool
	}
	for _, tc := range []struct {
		name    string
		in      Input
		bad     []string // BadRelays, as "peer/secret" prefixes
		want    []write
		refused []string // substrings, in order
	}{
		{
			name: "a relayed newer token for the pinned server is written once verified",
			in: input(steadyLocal, []View{
				peer("a", idA, objs(own("a", idA), []Object{cl("x", idX, mark(idX)), sec("x", 30, mark(idX))})...),
			}, idX),
			want: []write{{"update Secret cluster-registry/x from=a describes=uid-x", true}},
		},
		{
			name: "a relay naming another server brings only its token, for the pinned server (the forged relay)",
			in: input(steadyLocal, []View{
				peer("a", idA, objs(own("a", idA), []Object{cl("x", idX, mark(idX)), sec("x", 30, mark(idX), readerServer("https://attacker.example:6443", nil))})...),
			}, idX),
			want: []write{{"update Secret cluster-registry/x from=a describes=uid-x", true}},
		},
		{
			name: "a relay naming another CA brings only its token, for the pinned CA",
			in: input(steadyLocal, []View{
				peer("a", idA, objs(own("a", idA), []Object{cl("x", idX, mark(idX)), sec("x", 30, mark(idX), readerServer("https://x.example:6443", ca))})...),
			}, idX),
			want: []write{{"update Secret cluster-registry/x from=a describes=uid-x", true}},
		},
		{
			name: "a relayed token dated 9999 is refused",
			in: input(steadyLocal, []View{
				peer("a", idA, objs(own("a", idA), []Object{cl("x", idX, mark(idX)), sec("x", 10000, mark(idX))})...),
			}, idX),
			refused: []string{"relayed by peer a refused: its token claims to expire at"},
		},
		{
			name: "a refused relay does not hide a good one",
			in: input(steadyLocal, []View{
				peer("a", idA, objs(own("a", idA), []Object{cl("x", idX, mark(idX)), sec("x", 10000, mark(idX))})...),
				peer("c", idC, objs(own("c", idC), []Object{cl("x", idX, mark(idX)), sec("x", 30, mark(idX))})...),
			}, idX),
			want: []write{
				{"create Cluster c from=c describes=uid-c", false},
				{"create Secret cluster-registry/c from=c describes=uid-c", false},
				{"update Secret cluster-registry/x from=c describes=uid-x", true},
			},
			refused: []string{"relayed by peer a refused: its token claims to expire at"},
		},
		{
			name: "a relay whose token did not authenticate is skipped for the next best",
			in: input(objs(steadyLocal, copies("c", idC)), []View{
				peer("a", idA, objs(own("a", idA), []Object{cl("x", idX, mark(idX)), sec("x", 40, mark(idX), token("forged"))})...),
				peer("c", idC, objs(own("c", idC), []Object{cl("x", idX, mark(idX)), sec("x", 30, mark(idX))})...),
			}, idX),
			bad:  []string{"a/x/"},
			want: []write{{"update Secret cluster-registry/x from=c describes=uid-x", true}},
		},
		{
			// The issue-time annotation is the relaying member's to write: a lie makes its
			// relay the best of tokens stamped the same second, never an unverified write.
			name: "a relay that lies its issue time is still written only once verified",
			in: input(objs(steadyLocal, copies("c", idC)), []View{
				peer("a", idA, objs(own("a", idA), []Object{cl("x", idX, mark(idX)), sec("x", 30, mark(idX), token("revoked"), annotate(v1alpha1.TokenIssuedAtAnnotation, "9999-01-01T00:00:00.999999999Z"))})...),
				peer("c", idC, objs(own("c", idC), []Object{cl("x", idX, mark(idX)), sec("x", 30, mark(idX), annotate(v1alpha1.TokenIssuedAtAnnotation, t0.Format(time.RFC3339Nano)))})...),
			}, idX),
			want: []write{{"update Secret cluster-registry/x from=a describes=uid-x", true}},
		},
		{
			name: "a relay that lies its issue time and does not authenticate is skipped for the next best",
			in: input(objs(steadyLocal, copies("c", idC)), []View{
				peer("a", idA, objs(own("a", idA), []Object{cl("x", idX, mark(idX)), sec("x", 30, mark(idX), token("revoked"), annotate(v1alpha1.TokenIssuedAtAnnotation, "9999-01-01T00:00:00.999999999Z"))})...),
				peer("c", idC, objs(own("c", idC), []Object{cl("x", idX, mark(idX)), sec("x", 30, mark(idX), annotate(v1alpha1.TokenIssuedAtAnnotation, t0.Format(time.RFC3339Nano)))})...),
			}, idX),
			bad:  []string{"a/x/"},
			want: []write{{"update Secret cluster-registry/x from=c describes=uid-x", true}},
		},
		{
			name: "the cluster's own view may not move its pinned server either (join --server is kept); its token is taken",
			in: input(steadyLocal, []View{
				peer("a", idA, own("a", idA)...),
				peer("x", idX, cl("x", idX), sec("x", 30, readerServer("https://x-moved.example:6443", nil))),
			}),
			want: []write{{"update Secret cluster-registry/x from=x describes=uid-x", false}},
		},
		{
			name: "a new member is learnt from the senior peer, whatever the names",
			in: input(objs(
				[]Object{cl("a", idA, mark(idA), created(5)), sec("a", defaultExpiryAt, mark(idA))},
				[]Object{cl("z", idB, mark(idB), created(1)), sec("z", defaultExpiryAt, mark(idB))},
			), []View{
				peer("a", idA, objs(own("a", idA), []Object{cl("y", idY, mark(idY)), sec("y", 30, mark(idY), token("from a"))})...),
				peer("z", idB, objs(own("z", idB), []Object{cl("y", idY, mark(idY)), sec("y", 30, mark(idY), token("from z"))})...),
			}),
			want: []write{
				{"create Cluster y from=z describes=uid-y", true},
				{"create Secret cluster-registry/y from=z describes=uid-y", true},
			},
		},
		{
			name: "a disabled member is quarantined: no relay of it is taken",
			in: input(objs(copies("a", idA), []Object{cl("x", idX, mark(idX), annotate(disabledKey, "true")), sec("x", defaultExpiryAt, mark(idX))}), []View{
				peer("a", idA, objs(own("a", idA), []Object{cl("x", idX, mark(idX)), sec("x", 30, mark(idX))})...),
			}),
		},
		{
			name: "a departure dated ahead of this cluster's clock is refused",
			in: input(steadyLocal, []View{
				peer("a", idA, cl("a", idA, annotate(v1alpha1.LeftClustersAnnotation, string(idX)+"@9999-01-01T00:00:00Z")), sec("a", defaultExpiryAt)),
				peer("x", idX, own("x", idX)...),
			}),
			want:    []write{{"update Cluster a from=a describes=uid-a", false}},
			refused: []string{"Cluster a: departure of uid-x at 9999-01-01T00:00:00Z is ahead of this cluster's clock"},
		},
		{
			name: "a departure recorded on a peer's copy of a third member is not that member's record",
			in: input(steadyLocal, []View{
				peer("a", idA, objs(own("a", idA), []Object{cl("c", idC, mark(idC), annotate(v1alpha1.LeftClustersAnnotation, string(idX)+"@"+at(10))), sec("c", defaultExpiryAt, mark(idC))})...),
				peer("x", idX, own("x", idX)...),
			}),
			want: []write{{"create Cluster c from=a describes=uid-c", true}, {"create Secret cluster-registry/c from=a describes=uid-c", true}},
		},
		{
			name: "one member's record of a departure is not enough: nothing is deleted",
			in: input(steadyLocal, []View{
				peer("a", idA, cl("a", idA, annotate(v1alpha1.LeftClustersAnnotation, string(idX)+"@"+at(7))), sec("a", defaultExpiryAt)),
				peer("x", idX, own("x", idX)...),
			}),
			want: []write{{"update Cluster a from=a describes=uid-a", false}},
		},
		{
			name: "a removed member dating its own join, or admitting itself, stays removed",
			in: input(steadyLocal, []View{
				peer("a", idA, cl("a", idA, annotate(v1alpha1.ConfirmedDeparturesAnnotation, string(idX)+"@"+at(9))), sec("a", defaultExpiryAt)),
				peer("x", idX, cl("x", idX, annotate(v1alpha1.JoinedAtAnnotation, at(10)), annotate(v1alpha1.AdmittedClustersAnnotation, string(idX)+"@"+at(10))), sec("x", defaultExpiryAt)),
			}).withOwn(annotate(v1alpha1.ConfirmedDeparturesAnnotation, string(idX)+"@"+at(9))),
			want: []write{
				{"update Cluster l from= describes=uid-l", false},
				{"delete Cluster x from= describes=uid-x", false},
				{"delete Secret cluster-registry/x from= describes=uid-x", false},
				{"update Cluster a from=a describes=uid-a", false},
			},
			refused: []string{"Cluster x: an admission of cluster uid-x recorded on its own Cluster: refused"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.in.Now = now
			if len(tc.bad) > 0 {
				tc.in.BadRelays = map[string]bool{}
				for _, v := range tc.in.Peers {
					for i := range v.Secrets {
						k := RelayKey(v.Name, &v.Secrets[i])
						for _, b := range tc.bad {
							if strings.HasPrefix(k, b) {
								tc.in.BadRelays[k] = true
							}
						}
					}
				}
			}
			res := Plan(tc.in)
			var got []write
			for i, s := range summary(res) {
				got = append(got, write{s, res.Writes[i].Verify})
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("writes (-want +got):\n%s", diff)
			}
			// Whatever is offered, x's reader Secret is written for its pinned server and CA,
			// and what a write is verified with is what it writes.
			for _, w := range res.Writes {
				s, ok := w.Object.(*corev1.Secret)
				if !ok || s.Name != "x" || w.Op == OpDelete {
					continue
				}
				r, ok := kubeconfig.Read(s.Data[v1alpha1.KubeconfigKey])
				if !ok || r.Server != "https://x.example:6443" || len(r.CAData) != 0 {
					t.Errorf("Secret x written for server %q (CA %d bytes), not the pinned https://x.example:6443", r.Server, len(r.CAData))
				}
				if w.Verify && string(w.Credential.Data[v1alpha1.KubeconfigKey]) != string(s.Data[v1alpha1.KubeconfigKey]) {
					t.Error("the Secret verified is not the Secret written")
				}
			}
			if diff := cmp.Diff(tc.refused, conflictsMatching(res.Refused, tc.refused)); diff != "" {
				t.Errorf("refused (-want +got):\n%s", diff)
			}
			_ = types.UID("")
		})
	}
}
