package membership

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/kubectl-registry/kubectl-registry/reconciler/api/v1alpha1"
	"github.com/kubectl-registry/kubectl-registry/reconciler/credentials/issue"
	"github.com/kubectl-registry/kubectl-registry/reconciler/credentials/seal"
	"github.com/kubectl-registry/kubectl-registry/reconciler/kubeconfig"
	"github.com/kubectl-registry/kubectl-registry/reconciler/planner/members"
)

// TestReconcileNotices: the local cluster l reads none of its members a and c (they
// revoked what they issued it) and reads their departure notices, each from the server
// pinned for that member, with the token and name sealed to l's key in the credential
// that member issued: two notices of its departure make it forget the group, one does
// not, and a notice token sealed to another key is not used.
func TestReconcileNotices(t *testing.T) {
	const ns = v1alpha1.DefaultNamespace
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	if err := v1alpha1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	localKey, otherKey := mustKey(t), mustKey(t)
	servers := map[string]string{"l": "https://l.example:6443", "a": "https://a.example:6443", "c": "https://c.example:6443"}
	ids := map[string]types.UID{"l": "uid-l", "a": "uid-a", "c": "uid-c"}
	name := func(member string) string {
		return v1alpha1.DepartureNoticePrefix + fmt.Sprintf("%032x", len(member)+int(member[0]))
	}
	member := func(n string, to *seal.Key) []client.Object {
		kc, err := kubeconfig.Render(kubeconfig.Reader{ClusterName: n, Server: servers[n], Token: "shared-of-" + n})
		if err != nil {
			t.Fatal(err)
		}
		mark := map[string]string{v1alpha1.OwnershipAnnotation: string(ids[n])}
		objs := []client.Object{
			&v1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: n, Annotations: mark}, Spec: v1alpha1.ClusterSpec{ClusterID: ids[n],
				AuthInfo: v1alpha1.AuthInfo{SecretRef: v1alpha1.NamespacedName{Name: n, Namespace: ns}}}},
			&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: n, Annotations: mark}, Type: v1alpha1.SecretTypeClusterRegistry,
				Data: map[string][]byte{v1alpha1.KubeconfigKey: kc}},
		}
		if n == "l" {
			objs[0].SetAnnotations(nil)
			objs[1].SetAnnotations(nil)
			return objs
		}
		data, err := members.Notice{Token: "notice-token-of-" + n, Name: name(n)}.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		sealed, err := seal.Seal(to.PublicKey(), ids[n], ids["l"], data)
		if err != nil {
			t.Fatal(err)
		}
		return append(objs, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: v1alpha1.ReceivedReaderSecretName(ids[n]), Annotations: mark},
			Type: v1alpha1.SecretTypeClusterRegistry, Data: map[string][]byte{v1alpha1.SealedNoticeKey: sealed}})
	}
	record := string(ids["l"]) + "@" + now.Add(-time.Minute).Format(time.RFC3339)
	tests := []struct {
		name string
		// notices are what each member's API server answers (by server); sealedTo the key
		// each member sealed its notice credential to.
		notices  map[string]bool
		sealedTo map[string]*seal.Key
		forgets  bool
	}{
		{name: "two members of three record it: l forgets the group", notices: map[string]bool{"a": true, "c": true}, forgets: true},
		{name: "one member alone removes nothing", notices: map[string]bool{"a": true}},
		{name: "a notice credential sealed to another key is not used", notices: map[string]bool{"a": true, "c": true}, sealedTo: map[string]*seal.Key{"c": otherKey}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			objs := member("l", nil)
			for _, n := range []string{"a", "c"} {
				to := localKey
				if k := tt.sealedTo[n]; k != nil {
					to = k
				}
				objs = append(objs, member(n, to)...)
			}
			local := fake.NewClientBuilder().WithScheme(scheme).WithObjects(objs...).Build()
			var mu sync.Mutex
			var asked []string
			read := func(_ context.Context, server string, _ []byte, token string, _ kubeconfig.AddressPolicy, namespace, n string) (*corev1.ConfigMap, error) {
				mu.Lock()
				asked = append(asked, server+" "+token+" "+namespace+"/"+n)
				mu.Unlock()
				for m, s := range servers {
					if s != server || !tt.notices[m] || n != name(m) || token != "notice-token-of-"+m {
						continue
					}
					cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: n,
						Annotations: map[string]string{v1alpha1.PeerClusterIDAnnotation: string(ids["l"])}},
						Data: map[string]string{v1alpha1.DepartureKey: record}}
					return cm, nil
				}
				return nil, apierrors.NewForbidden(corev1.Resource("configmaps"), n, fmt.Errorf("not listed"))
			}
			r := &Reconciler{Client: local, Identity: issue.Identity{Name: "l", ID: ids["l"]}, Namespace: ns,
				Peers: views{{Name: "a", ClusterID: ids["a"], State: v1alpha1.ClusterStateInvalidAuthInfo}, {Name: "c", ClusterID: ids["c"], State: v1alpha1.ClusterStateInvalidAuthInfo}},
				Keys:  issue.NewKeys(localKey), ReadNotice: read, Now: func() time.Time { return now }}
			res, err := r.Reconcile(t.Context(), reconcile.Request{})
			if err != nil {
				t.Fatal(err)
			}
			if res.RequeueAfter != noticeEvery && !tt.forgets {
				t.Errorf("requeued after %s, want %s: the notices are read again", res.RequeueAfter, noticeEvery)
			}
			var cs v1alpha1.ClusterList
			if err := local.List(t.Context(), &cs); err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, c := range cs.Items {
				got = append(got, c.Name)
			}
			want := []string{"a", "c", "l"}
			if tt.forgets {
				want = []string{"l"}
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("Clusters of l (-want +got):\n%s", diff)
			}
			wantAsked := map[string]bool{}
			for _, m := range []string{"a", "c"} {
				if tt.sealedTo[m] == nil {
					wantAsked[servers[m]+" notice-token-of-"+m+" "+v1alpha1.ReadersNamespace(ns)+"/"+name(m)] = true
				}
			}
			gotAsked := map[string]bool{}
			for _, a := range asked {
				gotAsked[a] = true
			}
			if diff := cmp.Diff(wantAsked, gotAsked); diff != "" {
				t.Errorf("notices read (-want +got):\n%s", diff)
			}
		})
	}
}

func mustKey(t *testing.T) *seal.Key {
	t.Helper()
	k, err := seal.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	return k
}
