package members

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/conversion"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kubectl-registry/kubectl-registry/reconciler/api/v1alpha1"
	"github.com/kubectl-registry/kubectl-registry/reconciler/kubeconfig"
)

const ns = v1alpha1.DefaultNamespace

// The clusters of the tests. "l" is the local cluster; "a" and "c" are relays; "x" is the
// cluster whose objects are being copied; "b" and "y" are clusters the local cluster may
// not know.
const (
	idL types.UID = "uid-l"
	idA types.UID = "uid-a"
	idB types.UID = "uid-b"
	idC types.UID = "uid-c"
	idX types.UID = "uid-x"
	idY types.UID = "uid-y"
)

const (
	disabledKey     = v1alpha1.ClusterDisabledAnnotation
	lastAppliedKey  = corev1.LastAppliedConfigAnnotation
	legacyKey       = v1alpha1.LegacyPeerAnnotation
	ownershipKey    = v1alpha1.OwnershipAnnotation
	expiresAtKey    = v1alpha1.TokenExpiresAtAnnotation
	partOfLabel     = "app.kubernetes.io/part-of"
	teamLabel       = "team"
	otherNamespace  = "somewhere-else"
	kubeconfigKey   = v1alpha1.KubeconfigKey
	registrySecret  = v1alpha1.SecretTypeClusterRegistry
	opaqueSecret    = corev1.SecretTypeOpaque
	defaultExpiryAt = 10
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// at is the RFC 3339 time h hours after t0, as bootstrap writes it.
func at(h int) string { return t0.Add(time.Duration(h) * time.Hour).Format(time.RFC3339) }

type mod func(Object)

// cl is the Cluster CR named name describing id, as the cluster itself publishes it.
func cl(name string, id types.UID, mods ...mod) *v1alpha1.Cluster {
	c := &v1alpha1.Cluster{}
	c.Name = name
	c.Labels = map[string]string{teamLabel: "platform"}
	c.Spec = v1alpha1.ClusterSpec{
		ClusterID: id,
		AuthInfo:  v1alpha1.AuthInfo{SecretRef: v1alpha1.NamespacedName{Name: name, Namespace: ns}},
		KubernetesAPIEndpoints: []v1alpha1.KubernetesAPIEndpoint{
			{ServerAddress: "https://" + name + ".example:6443"},
		},
	}
	for _, m := range mods {
		m(c)
	}
	return c
}

// sec is the reader Secret named name whose token expires h hours after t0, as bootstrap
// publishes it.
func sec(name string, h int, mods ...mod) *corev1.Secret {
	s := &corev1.Secret{}
	s.Namespace, s.Name = ns, name
	s.Labels = map[string]string{partOfLabel: "kubectl-registry"}
	s.Annotations = map[string]string{expiresAtKey: at(h)}
	s.Type = registrySecret
	s.Data = map[string][]byte{kubeconfigKey: readerKubeconfig(name, "https://"+name+".example:6443", nil, t0.Add(time.Duration(h)*time.Hour), "")}
	for _, m := range mods {
		m(s)
	}
	return s
}

func annotate(k, v string) mod {
	return func(o Object) {
		a := o.GetAnnotations()
		if a == nil {
			a = map[string]string{}
		}
		a[k] = v
		o.SetAnnotations(a)
	}
}

func unannotate(k string) mod {
	return func(o Object) {
		a := o.GetAnnotations()
		delete(a, k)
		o.SetAnnotations(a)
	}
}

func label(k, v string) mod {
	return func(o Object) {
		l := o.GetLabels()
		if l == nil {
			l = map[string]string{}
		}
		l[k] = v
		o.SetLabels(l)
	}
}

// mark adds the ownership annotation and label of id: the object is a copy.
func mark(id types.UID) mod {
	return func(o Object) {
		annotate(ownershipKey, string(id))(o)
		label(v1alpha1.OwnershipLabel, string(id))(o)
	}
}

func rv(v string) mod     { return func(o Object) { o.SetResourceVersion(v) } }
func uid(u types.UID) mod { return func(o Object) { o.SetUID(u) } }

func server(addr string) mod {
	return func(o Object) {
		o.(*v1alpha1.Cluster).Spec.KubernetesAPIEndpoints[0].ServerAddress = addr
	}
}

func secretRef(name, namespace string) mod {
	return func(o Object) {
		o.(*v1alpha1.Cluster).Spec.AuthInfo.SecretRef = v1alpha1.NamespacedName{Name: name, Namespace: namespace}
	}
}

func stype(t corev1.SecretType) mod {
	return func(o Object) { o.(*corev1.Secret).Type = t }
}

// token gives the reader Secret another token, marked note, with the same server,
// CA and expiry.
func token(note string) mod {
	return func(o Object) {
		s := o.(*corev1.Secret)
		r, ok := kubeconfig.Read(s.Data[kubeconfigKey])
		if !ok {
			panic("unreadable test kubeconfig")
		}
		exp, _, _ := kubeconfig.TokenTimes(r.Token)
		s.Data[kubeconfigKey] = readerKubeconfig(s.Name, r.Server, r.CAData, exp, note)
	}
}

// noExpiry gives the reader Secret a token that states no expiry (not a JWT).
func noExpiry() mod {
	return func(o Object) {
		s := o.(*corev1.Secret)
		r, _ := kubeconfig.Read(s.Data[kubeconfigKey])
		data, err := kubeconfig.Render(kubeconfig.Reader{ClusterName: s.Name, Server: r.Server, CAData: r.CAData, Token: "opaque-token-of-" + s.Name})
		if err != nil {
			panic(err)
		}
		s.Data[kubeconfigKey] = data
	}
}

// readerServer gives the reader Secret another API server address (and CA).
func readerServer(server string, ca []byte) mod {
	return func(o Object) {
		s := o.(*corev1.Secret)
		r, _ := kubeconfig.Read(s.Data[kubeconfigKey])
		exp, _, _ := kubeconfig.TokenTimes(r.Token)
		s.Data[kubeconfigKey] = readerKubeconfig(s.Name, server, ca, exp, "moved")
	}
}

// readerKubeconfig renders a reader kubeconfig whose token is a JWT stating exp, issued
// a day before, marked note.
func readerKubeconfig(name, server string, ca []byte, exp time.Time, note string) []byte {
	data, err := kubeconfig.Render(kubeconfig.Reader{ClusterName: name, Server: server, CAData: ca, Token: fakeJWT(exp, exp.Add(-24*time.Hour), note)})
	if err != nil {
		panic(err)
	}
	return data
}

// fakeJWT is an unsigned token in the shape of a ServiceAccount token.
func fakeJWT(exp, iat time.Time, note string) string {
	enc := base64.RawURLEncoding
	claims, _ := json.Marshal(map[string]any{"exp": exp.Unix(), "iat": iat.Unix(), "sub": "system:serviceaccount:cluster-registry:cluster-registry-reader", "jti": note})
	return enc.EncodeToString([]byte(`{"alg":"RS256"}`)) + "." + enc.EncodeToString(claims) + ".c2ln"
}

func withStatus(state v1alpha1.ClusterState) mod {
	return func(o Object) { o.(*v1alpha1.Cluster).Status.State = state }
}

// split sorts objects into Cluster CRs and Secrets, copying them.
func split(objs []Object) ([]v1alpha1.Cluster, []corev1.Secret) {
	var cs []v1alpha1.Cluster
	var ss []corev1.Secret
	for _, o := range objs {
		switch o := o.(type) {
		case *v1alpha1.Cluster:
			cs = append(cs, *o.DeepCopy())
		case *corev1.Secret:
			ss = append(ss, *o.DeepCopy())
		default:
			panic(fmt.Sprintf("unexpected %T", o))
		}
	}
	return cs, ss
}

// peer is the view of a Ready peer holding objs.
func peer(name string, id types.UID, objs ...Object) View {
	v := View{Name: name, ClusterID: id}
	v.Clusters, v.Secrets = split(objs)
	return v
}

// own is what cluster name (ID id) publishes about itself: its Cluster CR and its reader
// Secret, without ownership marks.
func own(name string, id types.UID) []Object {
	return []Object{cl(name, id), sec(name, defaultExpiryAt)}
}

// copies is what a member holds about cluster name (ID id) after syncing it: marked copies.
func copies(name string, id types.UID) []Object {
	return []Object{cl(name, id, mark(id)), sec(name, defaultExpiryAt, mark(id))}
}

func objs(groups ...[]Object) []Object {
	var out []Object
	for _, g := range groups {
		out = append(out, g...)
	}
	return out
}

// input is the local cluster "l" holding its own Cluster and Secret plus local, seeing
// peers, with unreachable known but not Ready.
func input(local []Object, peers []View, unreachable ...types.UID) Input {
	in := Input{LocalID: idL, LocalName: "l", Namespace: ns, Peers: peers, Unreachable: unreachable}
	in.Local.Clusters, in.Local.Secrets = split(objs(own("l", idL), local))
	return in
}

// summary is a compact, readable form of a plan's writes.
func summary(res Result) []string {
	var out []string
	for _, w := range res.Writes {
		key := w.Object.GetName()
		if w.Object.GetNamespace() != "" {
			key = w.Object.GetNamespace() + "/" + key
		}
		out = append(out, fmt.Sprintf("%s %s %s from=%s describes=%s", w.Op, KindOf(w.Object), key, w.From, w.Describes))
	}
	return out
}

// conflictsMatching returns got with each message replaced by the corresponding wanted
// part when it contains it, so that cmp.Diff shows only the messages that do not match.
func conflictsMatching(got, want []string) []string {
	if len(got) == 0 {
		return nil
	}
	out := make([]string, len(got))
	for i, g := range got {
		out[i] = g
		if i < len(want) && want[i] != "" && strings.Contains(g, want[i]) {
			out[i] = want[i]
		}
	}
	return out
}

// render is the complete, comparable form of a plan.
func render(t *testing.T, res Result) []string {
	t.Helper()
	var out []string
	for i, w := range res.Writes {
		b, err := json.Marshal(w.Object)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, summary(res)[i]+" "+string(b))
	}
	for _, c := range res.Conflicts {
		out = append(out, "conflict: "+c)
	}
	return out
}

// apply returns the input as it is after the plan's writes succeed.
func apply(in Input, res Result) Input {
	out := in
	out.Local.Clusters = append([]v1alpha1.Cluster(nil), in.Local.Clusters...)
	out.Local.Secrets = append([]corev1.Secret(nil), in.Local.Secrets...)
	next := 1000
	for _, w := range res.Writes {
		next++
		if w.Op == OpDelete {
			switch w.Object.(type) {
			case *v1alpha1.Cluster:
				out.Local.Clusters = slices.DeleteFunc(out.Local.Clusters, func(c v1alpha1.Cluster) bool { return c.UID == w.Object.GetUID() && c.Name == w.Object.GetName() })
			case *corev1.Secret:
				out.Local.Secrets = slices.DeleteFunc(out.Local.Secrets, func(s corev1.Secret) bool { return s.UID == w.Object.GetUID() && s.Name == w.Object.GetName() })
			}
			continue
		}
		obj := w.Object.DeepCopyObject().(Object)
		switch w.Op {
		case OpCreate, OpReplace:
			obj.SetUID(types.UID("uid-" + strconv.Itoa(next)))
		}
		obj.SetResourceVersion(strconv.Itoa(next))
		switch o := obj.(type) {
		case *v1alpha1.Cluster:
			i := indexOf(len(out.Local.Clusters), func(i int) bool { return out.Local.Clusters[i].Name == o.Name })
			if i < 0 {
				out.Local.Clusters = append(out.Local.Clusters, *o)
			} else {
				o.Status = out.Local.Clusters[i].Status // an update does not write status
				out.Local.Clusters[i] = *o
			}
		case *corev1.Secret:
			i := indexOf(len(out.Local.Secrets), func(i int) bool { return out.Local.Secrets[i].Name == o.Name })
			if i < 0 {
				out.Local.Secrets = append(out.Local.Secrets, *o)
			} else {
				out.Local.Secrets[i] = *o
			}
		}
	}
	return out
}

func indexOf(n int, f func(int) bool) int {
	for i := 0; i < n; i++ {
		if f(i) {
			return i
		}
	}
	return -1
}

// shuffled returns a deep copy of in with the peers and every list in shuffled order.
func shuffled(in Input, r *rand.Rand) Input {
	out := in
	out.Local.Clusters = shuffle(r, clone(in.Local.Clusters))
	out.Local.Secrets = shuffle(r, clone(in.Local.Secrets))
	out.Unreachable = shuffle(r, append([]types.UID(nil), in.Unreachable...))
	out.Peers = nil
	for _, p := range in.Peers {
		p.Clusters = shuffle(r, clone(p.Clusters))
		p.Secrets = shuffle(r, clone(p.Secrets))
		out.Peers = append(out.Peers, p)
	}
	out.Peers = shuffle(r, out.Peers)
	return out
}

// clone deep-copies a list of API objects.
func clone[T any, PT interface {
	*T
	DeepCopy() *T
}](s []T) []T {
	var out []T
	for i := range s {
		out = append(out, *PT(&s[i]).DeepCopy())
	}
	return out
}

func shuffle[T any](r *rand.Rand, s []T) []T {
	r.Shuffle(len(s), func(i, j int) { s[i], s[j] = s[j], s[i] })
	return s
}

type planCase struct {
	name string
	in   Input
	// want is the summary of the writes, in order.
	want []string
	// conflicts are parts of the conflict messages, one per message, in order.
	conflicts []string
	// later is the summary of the writes of the next plan, run on the state the first
	// plan's writes produce; nil for a plan that settles in one round.
	later []string
}

func planCases() []planCase {
	// The steady state of a group {l, a, x}: every member holds the others' copies.
	steadyA := peer("a", idA, objs(own("a", idA), copies("x", idX))...)
	steadyX := peer("x", idX, objs(own("x", idX), copies("a", idA))...)
	steadyLocal := objs(copies("a", idA), copies("x", idX))

	return []planCase{
		// 5. Idempotence.
		{
			name: "steady group: nothing to write",
			in:   input(steadyLocal, []View{steadyA, steadyX}),
		},
		{
			name: "no peers: nothing to write",
			in:   input(steadyLocal, nil),
		},

		// 1. Learning.
		{
			name: "a cluster unknown locally is learnt from a relay with its Secret",
			in: input(copies("a", idA), []View{
				peer("a", idA, objs(own("a", idA), copies("b", idB))...),
			}),
			want: []string{
				"create Cluster b from=a describes=uid-b",
				"create Secret cluster-registry/b from=a describes=uid-b",
			},
		},
		{
			name: "an unknown cluster is learnt from the first peer by name",
			in: input(steadyLocal, []View{
				peer("x", idX, objs(own("x", idX), []Object{cl("b", idB, mark(idB), server("https://from-x")), sec("b", 7, mark(idB))})...),
				steadyA.with(cl("b", idB, mark(idB)), sec("b", 5, mark(idB))),
			}),
			want: []string{
				"create Cluster b from=a describes=uid-b",
				"create Secret cluster-registry/b from=a describes=uid-b",
			},
			// Once b is known, it is not Ready: the later token x holds is relayed.
			later: []string{"update Secret cluster-registry/b from=x describes=uid-b"},
		},
		{
			name: "a new member is learnt from itself and the relays' copies are ignored",
			in: input(steadyLocal, []View{
				steadyA.with(cl("b", idB, mark(idB), server("https://stale")), sec("b", 1, mark(idB))),
				peer("b", idB, own("b", idB)...),
				steadyX,
			}),
			want: []string{
				"create Cluster b from=b describes=uid-b",
				"create Secret cluster-registry/b from=b describes=uid-b",
			},
		},
		{
			name: "several clusters learnt at once are written in name order",
			in: input(nil, []View{
				peer("x", idX, objs(own("x", idX), copies("b", idB))...),
				peer("a", idA, objs(own("a", idA), copies("y", idY))...),
			}),
			want: []string{
				"create Cluster a from=a describes=uid-a",
				"create Secret cluster-registry/a from=a describes=uid-a",
				"create Cluster b from=x describes=uid-b",
				"create Secret cluster-registry/b from=x describes=uid-b",
				"create Cluster x from=x describes=uid-x",
				"create Secret cluster-registry/x from=x describes=uid-x",
				"create Cluster y from=a describes=uid-y",
				"create Secret cluster-registry/y from=a describes=uid-y",
			},
		},

		// 2. A Ready peer answers for itself.
		{
			name: "a Ready peer's own change is copied",
			in: input(steadyLocal, []View{
				steadyA,
				peer("x", idX, cl("x", idX, server("https://x-moved")), sec("x", 20)),
			}),
			want: []string{
				"update Cluster x from=x describes=uid-x",
				"update Secret cluster-registry/x from=x describes=uid-x",
			},
		},
		{
			name: "a relay's different copy of a Ready peer is ignored",
			in: input(steadyLocal, []View{
				peer("a", idA, objs(own("a", idA), []Object{cl("x", idX, mark(idX), server("https://stale")), sec("x", 99, mark(idX))})...),
				steadyX,
			}),
		},
		{
			name: "a Ready peer that does not publish itself is not replaced by a relay's copy",
			in: input(steadyLocal, []View{
				peer("a", idA, objs(own("a", idA), []Object{cl("x", idX, mark(idX), server("https://stale")), sec("x", 99, mark(idX))})...),
				peer("x", idX),
			}),
		},
		{
			name: "a Ready peer's own copy wins over another cluster's CR of the same name on a relay",
			in: input(steadyLocal, []View{
				// a holds a Cluster "x" describing y (a name clash); x itself renewed its token.
				peer("a", idA, objs(own("a", idA), []Object{cl("x", idY, mark(idY)), sec("x", 99, mark(idY))})...),
				peer("x", idX, cl("x", idX), sec("x", 20)),
			}),
			want: []string{"update Secret cluster-registry/x from=x describes=uid-x"},
		},

		// 3. The local cluster.
		{
			name: "a peer's different copy of the local cluster is ignored",
			in: input(steadyLocal, []View{
				steadyA.with(cl("l", idL, mark(idL), server("https://elsewhere")), sec("l", 99, mark(idL))),
				steadyX,
			}),
		},
		{
			name: "a peer's copy of the local cluster under another name is ignored",
			in: input(steadyLocal, []View{
				steadyA.with(cl("l-alias", idL, mark(idL))),
				steadyX,
			}),
		},
		{
			name: "a peer's Cluster with the local name but another ID is a conflict",
			in: input(steadyLocal, []View{
				steadyA.with(cl("l", idY, mark(idY)), sec("l", 99, mark(idY))),
				steadyX,
			}),
			conflicts: []string{"peer a has Cluster l for cluster uid-y, but l is the local cluster's name"},
		},
		{
			name: "a second local Cluster CR (another name, local ID) is never overwritten",
			in: input(objs(steadyLocal, []Object{cl("l2", idL)}), []View{
				steadyA.with(cl("l2", idY, mark(idY))),
				steadyX,
			}),
			conflicts: []string{"Cluster l2 is the local cluster's; not overwritten by cluster uid-y's"},
		},
		{
			name: "the local cluster's own reader Secret is not overwritten by a learnt cluster's",
			in: input(steadyLocal, []View{
				steadyA.with(cl("b", idB, mark(idB), secretRef("l", ns)), sec("l", 99, mark(idB))),
				steadyX,
			}),
			want:      []string{"create Cluster b from=a describes=uid-b"},
			conflicts: []string{"Secret cluster-registry/l is the local cluster's reader Secret; not overwritten by cluster uid-b's"},
		},
		{
			name: "the local cluster's own reader Secret is not adopted through a hand-made Cluster",
			in: input(objs(steadyLocal, []Object{cl("b", idB, secretRef("l", ns))}), []View{
				steadyA.with(cl("b", idB, mark(idB), secretRef("l", ns)), sec("l", 99, mark(idB))),
				steadyX,
			}),
			// b is known but not Ready: its Cluster is left as it is, and its Secret is not
			// the local cluster's.
			conflicts: []string{"Secret cluster-registry/l is the local cluster's reader Secret; not overwritten by cluster uid-b's"},
		},

		// 5. Hand-made swap and ownership conflicts.
		{
			name: "a hand-made Cluster and Secret of a Ready peer are adopted",
			in:   input(objs(copies("a", idA), own("x", idX)), []View{steadyA, steadyX}),
			want: []string{
				"update Cluster x from=x describes=uid-x",
				"update Secret cluster-registry/x from=x describes=uid-x",
			},
		},
		{
			name:      "a hand-made Cluster of another cluster ID is a conflict and its Secret is not touched",
			in:        input(objs(copies("a", idA), []Object{cl("x", idY), sec("x", defaultExpiryAt)}), []View{steadyA, steadyX}),
			conflicts: []string{"Cluster x was created locally for cluster uid-y; a peer has it for cluster uid-x: not overwritten"},
		},
		{
			name:      "a copy marked for another cluster is a conflict",
			in:        input(objs(copies("a", idA), []Object{cl("x", idY, mark(idY)), sec("x", defaultExpiryAt, mark(idY))}), []View{steadyA, steadyX}),
			conflicts: []string{"Cluster x is a copy of cluster uid-y's; a peer has it for cluster uid-x: not overwritten"},
		},
		{
			name: "a copy whose clusterID was edited locally is restored from its origin",
			in:   input(objs(copies("a", idA), []Object{cl("x", idY, mark(idX)), sec("x", defaultExpiryAt, mark(idX))}), []View{steadyA, steadyX}),
			want: []string{"update Cluster x from=x describes=uid-x"},
		},

		// 6. Secrets.
		{
			name: "an unmarked Secret referenced by the local Cluster of that cluster is adopted",
			in:   input(objs(copies("a", idA), []Object{cl("x", idX, mark(idX)), sec("x", defaultExpiryAt)}), []View{steadyA, steadyX}),
			want: []string{"update Secret cluster-registry/x from=x describes=uid-x"},
		},
		{
			name: "an unmarked unrelated Secret of the same name is a conflict",
			in: input(objs(copies("a", idA), copies("x", idX), []Object{sec("b", 3)}), []View{
				steadyA.with(copies("b", idB)...),
				steadyX,
			}),
			want:      []string{"create Cluster b from=a describes=uid-b"},
			conflicts: []string{"Secret cluster-registry/b was created locally; cluster uid-b's reader Secret of that name is not copied"},
			// Questionable (see the report): once the copy of b exists, it references the
			// Secret and the Secret is adopted on the next reconcile.
			later: []string{"update Secret cluster-registry/b from=a describes=uid-b"},
		},
		{
			name: "an unmarked Secret referenced only by another cluster's local Cluster is a conflict",
			in: input(objs(steadyLocal, []Object{cl("y", idY, secretRef("b", ns)), sec("b", 3)}), []View{
				steadyA.with(cl("b", idB, mark(idB), secretRef("", "")), copies("b", idB)[1]),
				steadyX,
				peer("y", idY, cl("y", idY, secretRef("b", ns))),
			}),
			want:      []string{"update Cluster y from=y describes=uid-y"},
			conflicts: []string{"Cluster b (cluster uid-b) offered by peer a has no reader Secret there: not learnt"},
		},
		{
			name: "an unmarked Secret referenced by another cluster's local Cluster is not adopted for a learnt one",
			in: input(objs(steadyLocal, []Object{cl("y", idY, secretRef("b", ns)), sec("b", 3)}), []View{
				steadyA.with(copies("b", idB)...),
				steadyX,
			}),
			want:      []string{"create Cluster b from=a describes=uid-b"},
			conflicts: []string{"Secret cluster-registry/b was created locally; cluster uid-b's reader Secret of that name is not copied"},
			// Questionable (see the report): once the copy of b exists, it references the
			// Secret and the Secret is adopted on the next reconcile.
			later: []string{"update Secret cluster-registry/b from=a describes=uid-b"},
		},
		{
			name:      "a Secret marked for another cluster is a conflict",
			in:        input(objs(copies("a", idA), []Object{cl("x", idX, mark(idX)), sec("x", defaultExpiryAt, mark(idY))}), []View{steadyA, steadyX}),
			conflicts: []string{"Secret cluster-registry/x is a copy of cluster uid-y's; not overwritten by cluster uid-x's"},
		},
		{
			name: "a Secret whose type changed is replaced",
			in:   input(objs(copies("a", idA), []Object{cl("x", idX, mark(idX)), sec("x", defaultExpiryAt, mark(idX), stype(opaqueSecret), uid("old-uid"), rv("7"))}), []View{steadyA, steadyX}),
			want: []string{"replace Secret cluster-registry/x from=x describes=uid-x"},
		},
		{
			name: "a Secret whose data changed is updated",
			in:   input(objs(copies("a", idA), []Object{cl("x", idX, mark(idX)), sec("x", defaultExpiryAt, mark(idX), token("edited"))}), []View{steadyA, steadyX}),
			want: []string{"update Secret cluster-registry/x from=x describes=uid-x"},
		},

		// 7. Unreachable clusters.
		{
			name: "an unreachable cluster's Cluster is left as it is and a later token is relayed",
			in: input(steadyLocal, []View{
				peer("a", idA, objs(own("a", idA), []Object{cl("x", idX, mark(idX), server("https://x-moved")), sec("x", 20, mark(idX))})...),
			}, idX),
			want: []string{"update Secret cluster-registry/x from=a describes=uid-x"},
		},
		{
			name: "an unreachable cluster's token expiring at the same time is not relayed",
			in: input(steadyLocal, []View{
				peer("a", idA, objs(own("a", idA), []Object{cl("x", idX, mark(idX), server("https://x-moved")), sec("x", defaultExpiryAt, mark(idX), token("other"))})...),
			}, idX),
		},
		{
			name: "an unreachable cluster's earlier token is not relayed",
			in: input(steadyLocal, []View{
				peer("a", idA, objs(own("a", idA), []Object{cl("x", idX, mark(idX)), sec("x", 5, mark(idX))})...),
			}, idX),
		},
		{
			name: "a relayed token without an expiry is not relayed",
			in: input(steadyLocal, []View{
				peer("a", idA, objs(own("a", idA), []Object{cl("x", idX, mark(idX)), sec("x", 50, mark(idX), noExpiry())})...),
			}, idX),
			conflicts: []string{"reader Secret x for cluster uid-x relayed by peer a refused: its token states no expiry"},
		},
		{
			name: "a relayed token with an expiry replaces a local copy without one",
			in: input(objs(copies("a", idA), []Object{cl("x", idX, mark(idX)), sec("x", 0, mark(idX), noExpiry())}), []View{
				peer("a", idA, objs(own("a", idA), copies("x", idX))...),
			}, idX),
			want: []string{"update Secret cluster-registry/x from=a describes=uid-x"},
		},
		{
			name: "the latest token among several relays is relayed",
			in: input(steadyLocal, []View{
				peer("a", idA, objs(own("a", idA), []Object{cl("x", idX, mark(idX)), sec("x", 5, mark(idX))})...),
				peer("c", idC, objs(own("c", idC), []Object{cl("x", idX, mark(idX)), sec("x", 30, mark(idX))})...),
			}, idX),
			want: []string{
				"create Cluster c from=c describes=uid-c",
				"create Secret cluster-registry/c from=c describes=uid-c",
				"update Secret cluster-registry/x from=c describes=uid-x",
			},
		},
		{
			name: "relays holding tokens of the same times, neither senior: the lowest cluster ID is relayed",
			in: input(objs(steadyLocal, copies("c", idC)), []View{
				peer("c", idC, objs(own("c", idC), []Object{cl("x", idX, mark(idX)), sec("x", 30, mark(idX), token("from c"))})...),
				peer("a", idA, objs(own("a", idA), []Object{cl("x", idX, mark(idX)), sec("x", 30, mark(idX), token("from a"))})...),
			}, idX),
			want: []string{"update Secret cluster-registry/x from=a describes=uid-x"},
		},
		{
			name: "a known cluster that is neither Ready nor unreachable is only relayed",
			in: input(steadyLocal, []View{
				peer("a", idA, objs(own("a", idA), []Object{cl("x", idX, mark(idX), server("https://x-moved")), sec("x", 20, mark(idX))})...),
			}),
			want: []string{"update Secret cluster-registry/x from=a describes=uid-x"},
		},
		{
			name: "an unreachable cluster's hand-made Cluster is left as it is and an earlier token is not relayed",
			in: input(objs(copies("a", idA), own("x", idX)), []View{
				peer("a", idA, objs(own("a", idA), []Object{cl("x", idX, mark(idX), server("https://x-moved")), sec("x", 5, mark(idX))})...),
			}, idX),
		},
		{
			name: "an unreachable cluster's hand-made Secret is adopted with a later token",
			in: input(objs(copies("a", idA), own("x", idX)), []View{
				peer("a", idA, objs(own("a", idA), []Object{cl("x", idX, mark(idX), server("https://x-moved")), sec("x", 20, mark(idX))})...),
			}, idX),
			want: []string{"update Secret cluster-registry/x from=a describes=uid-x"},
		},
		{
			name: "an unreachable cluster with no local Cluster is not created from a relay",
			in: input(copies("a", idA), []View{
				peer("a", idA, objs(own("a", idA), []Object{cl("x", idX, mark(idX))})...),
			}, idX),
		},
		{
			name: "a relay's copy of an unreachable cluster still conflicts with an unmarked Cluster of another ID",
			in: input(objs(copies("a", idA), []Object{cl("x", idY), sec("x", 1)}), []View{
				peer("a", idA, objs(own("a", idA), []Object{cl("x", idX, mark(idX)), sec("x", 20, mark(idX))})...),
			}, idX),
			conflicts: []string{"Cluster x was created locally for cluster uid-y; a peer has it for cluster uid-x: not overwritten"},
		},

		// 8. Local decisions.
		{
			name: "local decisions are kept and other local edits are undone",
			in: input(objs(copies("a", idA), []Object{
				cl("x", idX, mark(idX), annotate(disabledKey, "true"), annotate(lastAppliedKey, "{}"), annotate("note", "mine"), label("mine", "yes")),
				sec("x", defaultExpiryAt, mark(idX), annotate(lastAppliedKey, "{}"), label("mine", "yes")),
			}), []View{steadyA, steadyX}),
			want: []string{
				"update Cluster x from=x describes=uid-x",
				"update Secret cluster-registry/x from=x describes=uid-x",
			},
		},
		{
			name: "local decisions alone cause no write",
			in: input(objs(copies("a", idA), []Object{
				cl("x", idX, mark(idX), annotate(disabledKey, "true"), annotate(lastAppliedKey, "{}"), annotate(legacyKey, "true")),
				sec("x", defaultExpiryAt, mark(idX), annotate(lastAppliedKey, "{}")),
			}), []View{steadyA, steadyX}),
		},
		{
			name: "the source's local decisions are never copied",
			in: input(copies("a", idA), []View{
				steadyA,
				peer("x", idX, cl("x", idX, annotate(disabledKey, "true"), annotate(lastAppliedKey, "{x}")), sec("x", defaultExpiryAt, annotate(lastAppliedKey, "{x}"))),
			}),
			want: []string{
				"create Cluster x from=x describes=uid-x",
				"create Secret cluster-registry/x from=x describes=uid-x",
			},
		},
		{
			// A peer cannot name itself (or another) a legacy peer here: only this
			// cluster's admin does, on this cluster.
			name: "a change of the source's local decisions alone causes no write",
			in: input(steadyLocal, []View{
				steadyA,
				peer("x", idX, cl("x", idX, annotate(disabledKey, "true"), annotate(lastAppliedKey, "{x}"), annotate(legacyKey, "true")), sec("x", defaultExpiryAt, annotate(lastAppliedKey, "{x}"))),
			}),
		},
		{
			name: "the local copy's status is not a difference",
			in:   input(objs(copies("a", idA), []Object{cl("x", idX, mark(idX), withStatus(v1alpha1.ClusterStateReady)), sec("x", defaultExpiryAt, mark(idX))}), []View{steadyA, steadyX}),
		},

		// 9. Secret references.
		{
			name: "a Secret outside the registry namespace is not copied, nor the Cluster learnt without it",
			in: input(steadyLocal, []View{
				steadyA.with(cl("b", idB, mark(idB), secretRef("b", otherNamespace)), sec("b", 5, mark(idB))),
			}),
			conflicts: []string{"Cluster b (cluster uid-b) offered by peer a has no reader Secret there: not learnt"},
		},
		{
			name: "a secretRef without a namespace means the registry namespace",
			in: input(steadyLocal, []View{
				steadyA.with(cl("b", idB, mark(idB), secretRef("b", "")), sec("b", 5, mark(idB))),
			}),
			want: []string{
				"create Cluster b from=a describes=uid-b",
				"create Secret cluster-registry/b from=a describes=uid-b",
			},
		},
		{
			name: "a Cluster without a secretRef is not learnt from a peer: it cannot be verified",
			in: input(steadyLocal, []View{
				steadyA.with(cl("b", idB, mark(idB), secretRef("", "")), sec("b", 5, mark(idB))),
			}),
			conflicts: []string{"Cluster b (cluster uid-b) offered by peer a has no reader Secret there: not learnt"},
		},
		{
			name: "a Cluster whose Secret is missing on the peer is not learnt",
			in: input(steadyLocal, []View{
				steadyA.with(cl("b", idB, mark(idB))),
			}),
			conflicts: []string{"Cluster b (cluster uid-b) offered by peer a has no reader Secret there: not learnt"},
		},
		{
			name: "a Secret with another name is copied under that name",
			in: input(steadyLocal, []View{
				steadyA.with(cl("b", idB, mark(idB), secretRef("b-reader", ns)), sec("b-reader", 5, mark(idB))),
			}),
			want: []string{
				"create Cluster b from=a describes=uid-b",
				"create Secret cluster-registry/b-reader from=a describes=uid-b",
			},
		},
		{
			name: "a Cluster without a clusterID is ignored",
			in: input(steadyLocal, []View{
				steadyA.with(cl("b", "", mark(idB)), sec("b", 5, mark(idB))),
			}),
		},

		// 11. Nothing is deleted (but for departures, 12).
		{
			name: "copies no peer has any more are kept",
			in: input(objs(copies("a", idA), copies("x", idX), copies("b", idB)), []View{
				peer("a", idA, own("a", idA)...),
				peer("x", idX),
			}),
		},

		// 12. Departures ("kubectl registry leave").
		{
			name: "a departure one peer records deletes nothing",
			in: dinput(steadyLocal, []View{
				peer("a", idA, objs([]Object{cl("a", idA, left(idX, 1)), sec("a", defaultExpiryAt)}, copies("x", idX))...),
				steadyX,
			}),
			want: []string{"update Cluster a from=a describes=uid-a"},
		},
		{
			name: "a departure a majority records deletes the departed cluster's copies and is in force locally",
			in: dinput(steadyLocal, []View{
				peer("a", idA, objs([]Object{cl("a", idA, left(idX, 1)), sec("a", defaultExpiryAt)}, copies("x", idX))...),
				steadyX,
			}).withOwn(confirmed("uid-x@2")),
			want: []string{
				"update Cluster l from= describes=uid-l",
				"delete Cluster x from= describes=uid-x",
				"delete Secret cluster-registry/x from= describes=uid-x",
				"update Cluster a from=a describes=uid-a",
			},
		},
		{
			name: "a departed cluster is not learnt again from a peer that still has it",
			in:   dinput(copies("a", idA), []View{steadyA, steadyX}, idX).withOwn(left(idX, 1)),
		},
		{
			name: "a departed cluster's leftover Secret copy is deleted",
			in:   dinput(objs(copies("a", idA), []Object{sec("x", defaultExpiryAt, mark(idX))}), []View{steadyA}).withOwn(left(idX, 1)),
			want: []string{"delete Secret cluster-registry/x from= describes=uid-x"},
		},
		{
			name: "a member's later admission cancels the departure: the cluster is learnt again and the entry dropped",
			in: dinput(copies("a", idA), []View{
				peer("a", idA, objs([]Object{cl("a", idA, admitted("uid-x@2")), sec("a", defaultExpiryAt)}, copies("x", idX))...),
				peer("x", idX, cl("x", idX), sec("x", defaultExpiryAt)),
			}).withOwn(left(idX, 1)),
			want: []string{
				"update Cluster l from= describes=uid-l",
				"update Cluster a from=a describes=uid-a",
				"create Cluster x from=x describes=uid-x",
				"create Secret cluster-registry/x from=x describes=uid-x",
			},
		},
		{
			name: "the departed cluster's own later join does not cancel it",
			in: dinput(copies("a", idA), []View{
				steadyA,
				peer("x", idX, cl("x", idX, annotate(v1alpha1.JoinedAtAnnotation, at(2))), sec("x", defaultExpiryAt)),
			}).withOwn(left(idX, 1)),
		},
		{
			name: "an admission before the departure does not cancel it",
			in: dinput(objs(copies("a", idA), []Object{cl("x", idX, mark(idX)), sec("x", defaultExpiryAt, mark(idX))}), []View{
				peer("a", idA, objs([]Object{cl("a", idA, admitted("uid-x@1")), sec("a", defaultExpiryAt)}, copies("x", idX))...),
			}).withOwn(left(idX, 2)),
			want: []string{
				"delete Cluster x from= describes=uid-x",
				"delete Secret cluster-registry/x from= describes=uid-x",
				"update Cluster a from=a describes=uid-a",
			},
		},
		{
			name: "a departure decided here keeps its time",
			in: dinput(steadyLocal, []View{
				peer("a", idA, objs([]Object{cl("a", idA, left(idX, 3)), sec("a", defaultExpiryAt)}, copies("x", idX))...),
			}).withOwn(left(idX, 1)),
			want: []string{
				"delete Cluster x from= describes=uid-x",
				"delete Secret cluster-registry/x from= describes=uid-x",
				"update Cluster a from=a describes=uid-a",
			},
		},
		{
			name: "the local cluster a majority removed forgets the group and learns nothing",
			in: dinput(objs(steadyLocal, []Object{cl("b", idB, mark(idB))}), []View{
				peer("a", idA, objs([]Object{cl("a", idA, left(idL, 1)), sec("a", defaultExpiryAt)}, copies("x", idX), copies("y", idY))...),
				peer("b", idB, cl("b", idB, confirmed("uid-l@1"))),
				peer("x", idX, objs([]Object{cl("x", idX, left(idL, 1)), sec("x", defaultExpiryAt)}, copies("a", idA))...),
			}),
			want: []string{
				"update Cluster l from= describes=uid-l",
				"delete Cluster a from= describes=uid-a",
				"delete Secret cluster-registry/a from= describes=uid-a",
				"delete Cluster b from= describes=uid-b",
				"delete Cluster x from= describes=uid-x",
				"delete Secret cluster-registry/x from= describes=uid-x",
			},
		},
		{
			name: "a hand-made copy of a departed cluster is deleted; other local Secrets are kept",
			in:   dinput([]Object{cl("x", idX), sec("x", defaultExpiryAt), sec("mine", defaultExpiryAt, stype(opaqueSecret)), sec("other", defaultExpiryAt, mark(idA))}, nil).withOwn(left(idX, 1)),
			want: []string{
				"delete Cluster x from= describes=uid-x",
				"delete Secret cluster-registry/x from= describes=uid-x",
			},
		},
		{
			name: "the local reader Secret is kept even when a departed cluster's Cluster references it",
			in:   dinput([]Object{cl("x", idX, secretRef("l", ns))}, nil).withOwn(left(idX, 1)),
			want: []string{"delete Cluster x from= describes=uid-x"},
		},
		{
			name: "a Secret that is another cluster's copy is kept when a departed cluster's Cluster references it",
			in:   dinput([]Object{cl("x", idX, secretRef("a", ns)), sec("a", defaultExpiryAt, mark(idA))}, nil).withOwn(left(idX, 1)),
			want: []string{"delete Cluster x from= describes=uid-x"},
		},
		{
			name: "an unreadable departure entry is reported and ignored",
			in: dinput(steadyLocal, []View{
				peer("a", idA, objs([]Object{cl("a", idA, annotate(v1alpha1.LeftClustersAnnotation, "garbage, uid-x@yesterday")), sec("a", defaultExpiryAt)}, copies("x", idX))...),
				steadyX,
			}),
			want:      []string{"update Cluster a from=a describes=uid-a"},
			conflicts: []string{`Cluster a: entry "garbage" of`, `Cluster a: entry "uid-x@yesterday" of`},
		},
	}
}

// dinput is input with a UID on every local object, as the API server gives them.
func dinput(local []Object, peers []View, unreachable ...types.UID) Input {
	in := input(local, peers, unreachable...)
	for i := range in.Local.Clusters {
		in.Local.Clusters[i].UID = types.UID("uid-cluster-" + in.Local.Clusters[i].Name)
	}
	for i := range in.Local.Secrets {
		in.Local.Secrets[i].UID = types.UID("uid-secret-" + in.Local.Secrets[i].Name)
	}
	return in
}

// left lists id as departed h hours after t0 (the annotation "kubectl registry leave"
// writes).
func left(id types.UID, h int) mod {
	return annotate(v1alpha1.LeftClustersAnnotation, string(id)+"@"+at(h))
}

// withOwn returns the input with mods applied to the local cluster's own Cluster.
func (in Input) withOwn(mods ...mod) Input {
	in.Local.Clusters = clone(in.Local.Clusters)
	for i := range in.Local.Clusters {
		if c := &in.Local.Clusters[i]; c.Spec.ClusterID == in.LocalID {
			for _, m := range mods {
				m(c)
			}
		}
	}
	return in
}

// with returns the view holding also objs.
func (v View) with(objs ...Object) View {
	cs, ss := split(objs)
	v.Clusters = append(clone(v.Clusters), cs...)
	v.Secrets = append(clone(v.Secrets), ss...)
	return v
}

// inputEqual compares Inputs: semantically, as the API types want, and times by instant.
var inputEqual = conversion.EqualitiesOrDie(
	func(a, b metav1.Time) bool { return a.UTC() == b.UTC() },
	func(a, b time.Time) bool { return a.Equal(b) },
)

func TestPlan(t *testing.T) {
	for _, tc := range planCases() {
		t.Run(tc.name, func(t *testing.T) {
			before := clonedInput(tc.in)
			res := Plan(tc.in)
			if diff := cmp.Diff(tc.want, summary(res)); diff != "" {
				t.Errorf("writes (-want +got):\n%s", diff)
			}
			reported := append(slices.Clone(res.Conflicts), res.Refused...)
			if diff := cmp.Diff(tc.conflicts, conflictsMatching(reported, tc.conflicts)); diff != "" {
				t.Errorf("conflicts (-want +got):\n%s", diff)
			}
			if !inputEqual.DeepEqual(before, tc.in) {
				t.Errorf("Plan modified its input")
			}
			gone := departures(tc.in)
			_, localLeft := gone[tc.in.LocalID]
			for _, w := range res.Writes {
				// 11. Nothing is deleted but the copies of a departed cluster, or every copy
				// on a cluster that left (12); always guarded by the UID.
				switch w.Op {
				case OpCreate, OpUpdate, OpReplace:
				case OpDelete:
					if _, ok := gone[w.Describes]; !ok && !localLeft {
						t.Errorf("delete of %s, but cluster %s has not left", w.Object.GetName(), w.Describes)
					}
					if w.Object.GetUID() == "" {
						t.Errorf("delete of %s without a UID precondition", w.Object.GetName())
					}
					continue
				default:
					t.Errorf("unexpected op %q", w.Op)
				}
				if c, ok := w.Object.(*v1alpha1.Cluster); ok && c.Spec.ClusterID == tc.in.LocalID {
					// Only the list of departures of the local cluster's own Cluster is written.
					checkOnlyDepartures(t, tc.in, c)
					continue
				}
				if w.From == "" || w.Describes == "" {
					t.Errorf("write of %s lacks From or Describes: %+v", w.Object.GetName(), w)
				}
				// Every written object is a marked copy of the cluster it describes.
				if got := w.Object.GetAnnotations()[ownershipKey]; got != string(w.Describes) {
					t.Errorf("%s %s: ownership annotation %q, want %q", w.Op, w.Object.GetName(), got, w.Describes)
				}
				if got := w.Object.GetLabels()[v1alpha1.OwnershipLabel]; got != string(w.Describes) {
					t.Errorf("%s %s: ownership label %q, want %q", w.Op, w.Object.GetName(), got, w.Describes)
				}
				if c, ok := w.Object.(*v1alpha1.Cluster); ok && c.Spec.ClusterID == tc.in.LocalID {
					t.Errorf("%s of the local cluster's Cluster %s", w.Op, c.Name)
				}
				if s, ok := w.Object.(*corev1.Secret); ok && s.Namespace != tc.in.Namespace {
					t.Errorf("%s of Secret %s outside the registry namespace", w.Op, s.Namespace+"/"+s.Name)
				}
			}
			// The reconciler reads the peers' views from their caches without copies
			// (client.UnsafeDisableDeepCopy) and the client decodes the API server's
			// answer into each written object: no write may share a map or slice with the
			// input (byte slices and strings a decode replaces, never writes into). Write
			// over every written object in place, as a decode can, and the input must
			// still be as it was.
			for _, w := range res.Writes {
				scribble(reflect.ValueOf(w.Object))
			}
			if !inputEqual.DeepEqual(before, tc.in) {
				t.Errorf("a write shares memory with Plan's input: writing the object changed the input")
			}
		})
	}
}

// departures are the departures in force in an input.
func departures(in Input) Departures {
	d, _ := InForce(in.Now, in.LocalID, in.Local.Clusters, in.Peers...)
	return d
}

// checkOnlyDepartures fails unless c is the local Cluster of in with only its
// LeftClustersAnnotation changed.
func checkOnlyDepartures(t *testing.T, in Input, c *v1alpha1.Cluster) {
	t.Helper()
	for _, orig := range in.Local.Clusters {
		if orig.Name != c.Name {
			continue
		}
		a, b := orig.DeepCopy(), c.DeepCopy()
		for _, k := range []string{v1alpha1.LeftClustersAnnotation, v1alpha1.ConfirmedDeparturesAnnotation} {
			delete(a.Annotations, k)
			delete(b.Annotations, k)
		}
		if diff := cmp.Diff(a, b, cmpopts.EquateEmpty()); diff != "" {
			t.Errorf("write of the local Cluster %s changes more than its departures (-before +after):\n%s", c.Name, diff)
		}
		return
	}
	t.Errorf("write of the local Cluster %s, which does not exist", c.Name)
}

// TestPlanIdempotent runs every case's plan on the state its writes produce: nothing more
// is written, and the same conflicts stand.
func TestPlanIdempotent(t *testing.T) {
	for _, tc := range planCases() {
		t.Run(tc.name, func(t *testing.T) {
			in := tc.in
			res := Plan(in)
			in = apply(in, res)
			again := Plan(in)
			if tc.later != nil {
				if diff := cmp.Diff(tc.later, summary(again)); diff != "" {
					t.Fatalf("writes of the second round (-want +got):\n%s", diff)
				}
				res = again
				in = apply(in, again)
				again = Plan(in)
			}
			if diff := cmp.Diff([]string(nil), summary(again)); diff != "" {
				t.Errorf("writes after applying the plan (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(res.Conflicts, again.Conflicts); diff != "" {
				t.Errorf("conflicts after applying the plan (-first +second):\n%s", diff)
			}
		})
	}
}

// TestPlanDeterministic shuffles the peers and every list: the plan is the same.
func TestPlanDeterministic(t *testing.T) {
	for _, tc := range planCases() {
		t.Run(tc.name, func(t *testing.T) {
			want := render(t, Plan(tc.in))
			for seed := uint64(0); seed < 20; seed++ {
				in := shuffled(tc.in, rand.New(rand.NewPCG(seed, seed^0x5eed)))
				if diff := cmp.Diff(want, render(t, Plan(in))); diff != "" {
					t.Fatalf("seed %d: plan differs (-ordered +shuffled):\n%s", seed, diff)
				}
			}
		})
	}
}

func clonedInput(in Input) Input {
	out := in
	out.Local.Clusters = clone(in.Local.Clusters)
	out.Local.Secrets = clone(in.Local.Secrets)
	out.Unreachable = append([]types.UID(nil), in.Unreachable...)
	out.Peers = nil
	for _, p := range in.Peers {
		p.Clusters, p.Secrets = clone(p.Clusters), clone(p.Secrets)
		out.Peers = append(out.Peers, p)
	}
	return out
}

// onlyWrite returns the one write of res to obj of kind (Cluster or Secret).
func onlyWrite(t *testing.T, res Result, kind, name string) Write {
	t.Helper()
	var found []Write
	for _, w := range res.Writes {
		if KindOf(w.Object) == kind && w.Object.GetName() == name {
			found = append(found, w)
		}
	}
	if len(found) != 1 {
		t.Fatalf("%d writes of %s %s in %v", len(found), kind, name, summary(res))
	}
	return found[0]
}

// meta is the part of an object's metadata a copy decides.
type meta struct {
	Namespace, Name, ResourceVersion string
	UID                              types.UID
	Labels, Annotations              map[string]string
}

func metaOf(o Object) meta {
	return meta{
		Namespace: o.GetNamespace(), Name: o.GetName(), ResourceVersion: o.GetResourceVersion(), UID: o.GetUID(),
		Labels: o.GetLabels(), Annotations: o.GetAnnotations(),
	}
}

func TestPlanWrittenObjects(t *testing.T) {
	t.Run("created copies carry the source and the ownership marks", func(t *testing.T) {
		srcCluster := cl("b", idB, mark(idB), annotate("note", "from b"), annotate(disabledKey, "true"), annotate(lastAppliedKey, "{b}"),
			rv("55"), uid("uid-on-a"), withStatus(v1alpha1.ClusterStateReady))
		srcSecret := sec("b", 5, mark(idB), annotate(lastAppliedKey, "{b}"), rv("56"), uid("secret-uid-on-a"))
		in := input(copies("a", idA), []View{peer("a", idA, objs(own("a", idA), []Object{srcCluster, srcSecret})...)})
		res := Plan(in)

		c := onlyWrite(t, res, "Cluster", "b").Object.(*v1alpha1.Cluster)
		wantMeta := meta{
			Name:        "b",
			Labels:      map[string]string{teamLabel: "platform", v1alpha1.OwnershipLabel: string(idB)},
			Annotations: map[string]string{"note": "from b", ownershipKey: string(idB)},
		}
		if diff := cmp.Diff(wantMeta, metaOf(c)); diff != "" {
			t.Errorf("Cluster metadata (-want +got):\n%s", diff)
		}
		if diff := cmp.Diff(srcCluster.Spec, c.Spec); diff != "" {
			t.Errorf("Cluster spec (-source +copy):\n%s", diff)
		}
		if diff := cmp.Diff(v1alpha1.ClusterStatus{}, c.Status); diff != "" {
			t.Errorf("Cluster status is not copied (-want +got):\n%s", diff)
		}

		s := onlyWrite(t, res, "Secret", "b").Object.(*corev1.Secret)
		wantMeta = meta{
			Namespace:   ns,
			Name:        "b",
			Labels:      map[string]string{partOfLabel: "kubectl-registry", v1alpha1.OwnershipLabel: string(idB)},
			Annotations: map[string]string{expiresAtKey: at(5), ownershipKey: string(idB)},
		}
		if diff := cmp.Diff(wantMeta, metaOf(s)); diff != "" {
			t.Errorf("Secret metadata (-want +got):\n%s", diff)
		}
		if s.Type != registrySecret {
			t.Errorf("Secret type %q, want %q", s.Type, registrySecret)
		}
		if diff := cmp.Diff(srcSecret.Data, s.Data); diff != "" {
			t.Errorf("Secret data (-source +copy):\n%s", diff)
		}

		// The written objects share nothing with the input.
		c.Labels["changed"], c.Annotations["changed"] = "1", "1"
		c.Spec.KubernetesAPIEndpoints[0].ServerAddress = "changed"
		s.Labels["changed"], s.Annotations["changed"] = "1", "1"
		s.Data["changed"] = nil
		src := in.Peers[0]
		for _, pc := range src.Clusters {
			if pc.Name == "b" && (pc.Labels["changed"] != "" || pc.Annotations["changed"] != "" || pc.Spec.KubernetesAPIEndpoints[0].ServerAddress == "changed") {
				t.Errorf("the Cluster copy aliases the peer's Cluster")
			}
		}
		for _, ps := range src.Secrets {
			if ps.Name == "b" {
				if _, ok := ps.Data["changed"]; ok || ps.Labels["changed"] != "" || ps.Annotations["changed"] != "" {
					t.Errorf("the Secret copy aliases the peer's Secret")
				}
			}
		}
	})

	t.Run("updated copies keep the local object and its local decisions", func(t *testing.T) {
		local := []Object{
			cl("x", idX, mark(idX), rv("41"), uid("local-cluster-uid"), withStatus(v1alpha1.ClusterStateReady),
				annotate(disabledKey, "true"), annotate(lastAppliedKey, "{local}"), annotate("note", "local edit"), label("mine", "yes")),
			sec("x", defaultExpiryAt, mark(idX), rv("42"), uid("local-secret-uid"),
				annotate(lastAppliedKey, "{local}"), annotate("note", "local edit"), label("mine", "yes")),
		}
		srcCluster := cl("x", idX, server("https://x-moved"), annotate(disabledKey, "false"), annotate(lastAppliedKey, "{x}"), annotate("from", "x"))
		srcSecret := sec("x", 20, annotate(lastAppliedKey, "{x}"), annotate("from", "x"))
		in := input(objs(copies("a", idA), local), []View{
			peer("a", idA, own("a", idA)...),
			peer("x", idX, srcCluster, srcSecret),
		})
		res := Plan(in)

		c := onlyWrite(t, res, "Cluster", "x").Object.(*v1alpha1.Cluster)
		wantMeta := meta{
			Name:            "x",
			ResourceVersion: "41",
			UID:             "local-cluster-uid",
			Labels:          map[string]string{teamLabel: "platform", v1alpha1.OwnershipLabel: string(idX)},
			Annotations: map[string]string{
				"from": "x", ownershipKey: string(idX),
				disabledKey: "true", lastAppliedKey: "{local}",
			},
		}
		if diff := cmp.Diff(wantMeta, metaOf(c)); diff != "" {
			t.Errorf("Cluster metadata (-want +got):\n%s", diff)
		}
		if diff := cmp.Diff(srcCluster.Spec, c.Spec); diff != "" {
			t.Errorf("Cluster spec (-source +copy):\n%s", diff)
		}
		if c.Status.State != v1alpha1.ClusterStateReady {
			t.Errorf("the local status was not kept: %+v", c.Status)
		}

		s := onlyWrite(t, res, "Secret", "x").Object.(*corev1.Secret)
		wantMeta = meta{
			Namespace:       ns,
			Name:            "x",
			ResourceVersion: "42",
			UID:             "local-secret-uid",
			Labels:          map[string]string{partOfLabel: "kubectl-registry", v1alpha1.OwnershipLabel: string(idX)},
			Annotations: map[string]string{
				expiresAtKey: at(20), "from": "x", ownershipKey: string(idX),
				lastAppliedKey: "{local}",
			},
		}
		if diff := cmp.Diff(wantMeta, metaOf(s)); diff != "" {
			t.Errorf("Secret metadata (-want +got):\n%s", diff)
		}
		if diff := cmp.Diff(srcSecret.Data, s.Data); diff != "" {
			t.Errorf("Secret data (-source +copy):\n%s", diff)
		}
		if s.Type != registrySecret {
			t.Errorf("Secret type %q, want %q", s.Type, registrySecret)
		}
	})

	t.Run("an adopted hand-made Cluster gets the ownership marks", func(t *testing.T) {
		in := input(objs(copies("a", idA), []Object{cl("x", idX, rv("9")), sec("x", defaultExpiryAt, rv("10"))}),
			[]View{peer("a", idA, own("a", idA)...), peer("x", idX, own("x", idX)...)})
		res := Plan(in)
		c := onlyWrite(t, res, "Cluster", "x").Object.(*v1alpha1.Cluster)
		want := meta{
			Name: "x", ResourceVersion: "9",
			Labels:      map[string]string{teamLabel: "platform", v1alpha1.OwnershipLabel: string(idX)},
			Annotations: map[string]string{ownershipKey: string(idX)},
		}
		if diff := cmp.Diff(want, metaOf(c)); diff != "" {
			t.Errorf("Cluster metadata (-want +got):\n%s", diff)
		}
		s := onlyWrite(t, res, "Secret", "x").Object.(*corev1.Secret)
		if got := metaOf(s); got.ResourceVersion != "10" || got.Annotations[ownershipKey] != string(idX) || got.Labels[v1alpha1.OwnershipLabel] != string(idX) {
			t.Errorf("adopted Secret metadata: %+v", got)
		}
	})

	t.Run("a replaced Secret carries the old UID and the new type", func(t *testing.T) {
		in := input(objs(copies("a", idA), []Object{
			cl("x", idX, mark(idX)),
			sec("x", defaultExpiryAt, mark(idX), stype(opaqueSecret), uid("old-uid"), rv("7"), annotate(lastAppliedKey, "{local}")),
		}), []View{peer("a", idA, own("a", idA)...), peer("x", idX, cl("x", idX), sec("x", 20))})
		res := Plan(in)
		w := onlyWrite(t, res, "Secret", "x")
		if w.Op != OpReplace {
			t.Fatalf("op %q, want %q", w.Op, OpReplace)
		}
		s := w.Object.(*corev1.Secret)
		want := meta{
			Namespace: ns, Name: "x", UID: "old-uid",
			Labels:      map[string]string{partOfLabel: "kubectl-registry", v1alpha1.OwnershipLabel: string(idX)},
			Annotations: map[string]string{expiresAtKey: at(20), ownershipKey: string(idX), lastAppliedKey: "{local}"},
		}
		if diff := cmp.Diff(want, metaOf(s)); diff != "" {
			t.Errorf("Secret metadata (-want +got):\n%s", diff)
		}
		if s.Type != registrySecret {
			t.Errorf("Secret type %q, want %q", s.Type, registrySecret)
		}
		if diff := cmp.Diff(sec("x", 20).Data, s.Data); diff != "" {
			t.Errorf("Secret data (-source +copy):\n%s", diff)
		}
	})

	t.Run("a relayed token updates the Secret only", func(t *testing.T) {
		relayed := sec("x", 20, mark(idX))
		in := input(objs(copies("a", idA), []Object{cl("x", idX, mark(idX)), sec("x", defaultExpiryAt, mark(idX), rv("3"))}), []View{
			peer("a", idA, objs(own("a", idA), []Object{cl("x", idX, mark(idX), server("https://x-moved")), relayed})...),
		}, idX)
		res := Plan(in)
		if diff := cmp.Diff([]string{"update Secret cluster-registry/x from=a describes=uid-x"}, summary(res)); diff != "" {
			t.Fatalf("writes (-want +got):\n%s", diff)
		}
		s := res.Writes[0].Object.(*corev1.Secret)
		if s.ResourceVersion != "3" || s.Annotations[expiresAtKey] != at(20) {
			t.Errorf("relayed Secret: resourceVersion %q, expires-at %q", s.ResourceVersion, s.Annotations[expiresAtKey])
		}
		if diff := cmp.Diff(relayed.Data, s.Data); diff != "" {
			t.Errorf("Secret data (-relayed +copy):\n%s", diff)
		}
	})
}

// TestHandCopyIsAdopted: what join writes on a member (HandCopy of a cluster's own
// Cluster and Secret, as the seed's swap by hand) carries none of the marks and local
// decisions of the origin, and the membership sync adopts it from the cluster itself.
func TestHandCopyIsAdopted(t *testing.T) {
	origin := cl("x", idX, mark(idY), annotate(disabledKey, "true"), annotate(lastAppliedKey, "{}"))
	secret := sec("x", defaultExpiryAt, mark(idY))
	c, s := HandCopy(origin, secret, otherNamespace)
	for _, o := range []Object{c, s} {
		for _, k := range []string{ownershipKey, disabledKey, lastAppliedKey} {
			if _, ok := o.GetAnnotations()[k]; ok {
				t.Errorf("%s %s carries %s", KindOf(o), o.GetName(), k)
			}
		}
		if _, ok := o.GetLabels()[v1alpha1.OwnershipLabel]; ok {
			t.Errorf("%s %s carries the ownership label", KindOf(o), o.GetName())
		}
	}
	if diff := cmp.Diff([]any{otherNamespace, origin.Spec, secret.Data, "platform"}, []any{s.Namespace, c.Spec, s.Data, c.Labels[teamLabel]}); diff != "" {
		t.Errorf("copied content (-want +got):\n%s", diff)
	}
	if origin.Annotations[disabledKey] != "true" || secret.Labels[v1alpha1.OwnershipLabel] != string(idY) {
		t.Error("HandCopy changed the originals")
	}

	s.Namespace = ns
	steadyA := peer("a", idA, objs(own("a", idA), copies("x", idX))...)
	steadyX := peer("x", idX, objs(own("x", idX), copies("a", idA))...)
	in := input(objs(copies("a", idA), []Object{c, s}), []View{steadyA, steadyX})
	res := Plan(in)
	want := []string{"update Cluster x from=x describes=uid-x", "update Secret cluster-registry/x from=x describes=uid-x"}
	if diff := cmp.Diff(want, summary(res)); diff != "" {
		t.Errorf("the membership's writes over a hand copy (-want +got):\n%s\nconflicts: %v", diff, res.Conflicts)
	}
}

// scribble writes over everything v holds that a decoder writes in place: it adds a key
// to every map and overwrites every element of every slice (a JSON decoder reuses a
// slice's backing array and a map), following pointers and interfaces. Strings and byte
// slices are left: a decoder replaces them, never writes into them (the caches' pooled
// bytes rely on it). What it reaches that the input also holds shows as a change of the
// input.
func scribble(v reflect.Value) {
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface:
		if !v.IsNil() {
			scribble(v.Elem())
		}
	case reflect.Struct:
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				scribble(v.Field(i))
			}
		}
	case reflect.Slice:
		if v.Type().Elem().Kind() == reflect.Uint8 {
			return
		}
		for i := range v.Len() {
			if e := v.Index(i); e.Kind() == reflect.String {
				e.SetString(e.String() + "-scribbled")
			} else {
				scribble(e)
			}
		}
	case reflect.Map:
		if !v.IsNil() && v.Type().Key().Kind() == reflect.String {
			v.SetMapIndex(reflect.ValueOf("scribbled").Convert(v.Type().Key()), reflect.Zero(v.Type().Elem()))
		}
	}
}
