package join

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/kubectl-registry/kubectl-registry/plugin/internal/kube"
	"github.com/kubectl-registry/kubectl-registry/reconciler/api/v1alpha1"
)

func testScheme(t *testing.T) *runtime.Scheme {
	t.Helper()
	return kube.NewScheme()
}

// fromSide is side a with its copies built, as after the preflight's source checks.
func fromSide(t *testing.T) *side {
	t.Helper()
	c, err := buildCopies(localCluster("a", "id-a", "https://10.0.0.1:6443"), readerSecret(t, "a", "https://10.0.0.1:6443"), v1alpha1.DefaultNamespace, "")
	if err != nil {
		t.Fatal(err)
	}
	return &side{name: "a", flags: "--context a", id: "id-a", copies: c}
}

func TestCheckTarget(t *testing.T) {
	from := fromSide(t)
	localB := localCluster("b", "id-b", "https://10.0.0.2:6443")
	localB.ManagedFields, localB.ResourceVersion = nil, ""
	ns := v1alpha1.DefaultNamespace

	adoptedCluster := from.copies.Cluster.DeepCopy()
	adoptedCluster.Annotations[v1alpha1.OwnershipAnnotation] = "id-a"
	adoptedSecret := from.copies.Secret.DeepCopy()
	adoptedSecret.Annotations[v1alpha1.OwnershipAnnotation] = "id-a"
	oldToken := adoptedSecret.DeepCopy()
	oldToken.Data[v1alpha1.KubeconfigKey] = []byte("old")

	clusterNamed := func(name, id, secret string) *v1alpha1.Cluster {
		return &v1alpha1.Cluster{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: v1alpha1.ClusterSpec{ClusterID: types.UID(id),
				AuthInfo: v1alpha1.AuthInfo{SecretRef: v1alpha1.NamespacedName{Name: secret}}},
		}
	}
	secretWith := func(mutate func(*corev1.Secret)) *corev1.Secret {
		s := from.copies.Secret.DeepCopy()
		mutate(s)
		return s
	}

	tests := []struct {
		name     string
		objs     []client.Object
		want     []string
		wantErrs []string
	}{
		{name: "nothing there yet", objs: []client.Object{localB}, want: []string{"secret/a created", clusterResource + "/a created"}},
		{
			name: "adopted copies with the same content",
			objs: []client.Object{localB, adoptedCluster, adoptedSecret},
			want: []string{"secret/a unchanged", clusterResource + "/a unchanged"},
		},
		{
			name: "a renewed token",
			objs: []client.Object{localB, adoptedCluster, oldToken},
			want: []string{"secret/a configured", clusterResource + "/a unchanged"},
		},
		{
			name:     "a Cluster of that name for another cluster",
			objs:     []client.Object{localB, clusterNamed("a", "id-x", "x")},
			wantErrs: []string{"name clash on context b: its Cluster a describes another cluster (clusterID id-x), not a (clusterID id-a)"},
		},
		{
			name:     "the local Cluster has the same name",
			objs:     []client.Object{clusterNamed("a", "id-b", "b")},
			wantErrs: []string{"context b and context a are both named a in the registry"},
		},
		{
			name:     "the cluster is known under another name",
			objs:     []client.Object{localB, clusterNamed("old-a", "id-a", "old-a")},
			wantErrs: []string{"context b already knows context a (clusterID id-a) as Cluster old-a, not a"},
		},
		{
			name:     "the Secret belongs to another Cluster",
			objs:     []client.Object{localB, clusterNamed("x", "id-x", "a")},
			wantErrs: []string{"name clash on context b: the Secret cluster-registry/a is the reader Secret of its Cluster x"},
		},
		{
			name:     "the Secret is a copy from another cluster",
			objs:     []client.Object{localB, secretWith(func(s *corev1.Secret) { s.Annotations[v1alpha1.OwnershipAnnotation] = "id-x" })},
			wantErrs: []string{"the Secret cluster-registry/a is a copy from cluster id-x, not a"},
		},
		{
			name:     "the Secret has another type",
			objs:     []client.Object{localB, secretWith(func(s *corev1.Secret) { s.Type = corev1.SecretTypeOpaque })},
			wantErrs: []string{`has type "Opaque"`, "delete it there first (kubectl delete secret -n cluster-registry a --context b)"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cl := fake.NewClientBuilder().WithScheme(testScheme(t)).WithObjects(tt.objs...).Build()
			to := &side{name: "b", flags: "--context b", id: "id-b", client: cl}
			var list v1alpha1.ClusterList
			if err := cl.List(context.Background(), &list); err != nil {
				t.Fatal(err)
			}
			to.clusters = list.Items
			items, err := to.checkTarget(context.Background(), from, ns)
			if len(tt.wantErrs) > 0 {
				if err == nil {
					t.Fatalf("no error, want %q", tt.wantErrs)
				}
				for _, w := range tt.wantErrs {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("error %q does not contain %q", err, w)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, it := range items {
				got = append(got, resourceName(it.desired)+" "+it.outcome)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

// TestWriteFailure checks the report of a write that fails after the first side was
// written, and that a Cluster is never written without its Secret.
func TestWriteFailure(t *testing.T) {
	var applied []string
	recorder := func(side string, fail string) client.Client {
		return interceptor.NewClient(fake.NewClientBuilder().WithScheme(testScheme(t)).Build(), interceptor.Funcs{
			Apply: func(_ context.Context, _ client.WithWatch, obj runtime.ApplyConfiguration, _ ...client.ApplyOption) error {
				u := obj.(interface{ GetKind() string })
				n := obj.(interface{ GetName() string })
				name := u.GetKind() + "/" + n.GetName() + " on " + side
				if name == fail {
					return errors.New("connection reset")
				}
				applied = append(applied, name)
				return nil
			},
		})
	}
	a := fromSide(t)
	b := &side{name: "b", id: "id-b"}
	bc, err := buildCopies(localCluster("b", "id-b", "https://10.0.0.2:6443"), readerSecret(t, "b", "https://10.0.0.2:6443"), v1alpha1.DefaultNamespace, "")
	if err != nil {
		t.Fatal(err)
	}
	b.copies = bc
	a.client = recorder("a", "Secret/b on a")
	b.client = recorder("b", "")
	p := plan{writes: []sideWrites{
		{on: b, from: a, items: []item{{desired: a.copies.Secret, outcome: "created"}, {desired: a.copies.Cluster, outcome: "created"}}},
		{on: a, from: b, items: []item{{desired: b.copies.Secret, outcome: "created"}, {desired: b.copies.Cluster, outcome: "created"}}},
	}}
	streams, _, out, _ := genericiooptions.NewTestIOStreams()
	o := NewOptions(nil, streams)
	err = o.write(context.Background(), p)
	if err == nil {
		t.Fatal("no error")
	}
	want := "writing secret/b on context a: connection reset\n" +
		"written: secret/a created on b, cluster.clusterregistry.k8s.cisco.com/a created on b\n" +
		"not written: secret/b on a, cluster.clusterregistry.k8s.cisco.com/b on a\n" +
		"run the same join again to finish: it changes only what is missing"
	if diff := cmp.Diff(want, err.Error()); diff != "" {
		t.Errorf("error (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"Secret/a on b", "Cluster/a on b"}, applied); diff != "" {
		t.Errorf("applied (-want +got):\n%s", diff)
	}
	wantOut := "secret/a created on b\ncluster.clusterregistry.k8s.cisco.com/a created on b\n"
	if out.String() != wantOut {
		t.Errorf("stdout %q, want %q", out.String(), wantOut)
	}
}

func TestWaitTimeout(t *testing.T) {
	failed := &v1alpha1.Cluster{
		ObjectMeta: metav1.ObjectMeta{Name: "b"},
		Status:     v1alpha1.ClusterStatus{State: v1alpha1.ClusterStateFailed, Message: "dial tcp: connection refused"},
	}
	ready := &v1alpha1.Cluster{
		ObjectMeta: metav1.ObjectMeta{Name: "a"},
		Status: v1alpha1.ClusterStatus{State: v1alpha1.ClusterStateReady, Conditions: []v1alpha1.ClusterCondition{
			{Type: v1alpha1.ClusterConditionClustersSynced, Status: corev1.ConditionTrue},
		}},
	}
	build := func(objs ...client.Object) client.Client {
		return fake.NewClientBuilder().WithScheme(testScheme(t)).WithObjects(objs...).WithStatusSubresource(objs...).Build()
	}
	a := &side{name: "a", client: build(failed)}
	b := &side{name: "b", client: build(ready)}
	streams, _, out, errOut := genericiooptions.NewTestIOStreams()
	o := NewOptions(nil, streams)
	o.Timeout, o.PollInterval = 300*time.Millisecond, 20*time.Millisecond
	err := o.wait(context.Background(), []waitTarget{{on: b, cluster: "a", synced: true}, {on: a, cluster: "b", synced: true}})
	want := `timed out after 300ms waiting for the controllers: on a, cluster b is "Failed" (dial tcp: connection refused).`
	if err == nil || !strings.HasPrefix(err.Error(), want) {
		t.Errorf("error %v, want %q", err, want)
	}
	if got, want := out.String(), "cluster.clusterregistry.k8s.cisco.com/a Ready and synced on b\n"; got != want {
		t.Errorf("stdout %q, want %q", got, want)
	}
	// One progress line per change, not per poll.
	if got, want := errOut.String(), "waiting: on a, cluster b is \"Failed\" (dial tcp: connection refused)\n"; got != want {
		t.Errorf("stderr %q, want %q", got, want)
	}
}
