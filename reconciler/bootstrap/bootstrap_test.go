package bootstrap

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/google/go-cmp/cmp"

	"github.com/kubectl-registry/kubectl-registry/reconciler/api/v1alpha1"
)

func kubeSystem(uid types.UID) *corev1.Namespace {
	return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: metav1.NamespaceSystem, UID: uid}}
}

func clusterWithID(name string, id types.UID) *v1alpha1.Cluster {
	return &v1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: v1alpha1.ClusterSpec{ClusterID: id}}
}

// 10. Resolve finds the local identity.
func TestResolve(t *testing.T) {
	tests := []struct {
		name    string
		objs    []client.Object
		arg     string
		want    Identity
		wantErr []string // substrings of the error; nil: no error
		wantIs  error
	}{
		{
			name: "name given: that name, even without a CR",
			objs: []client.Object{kubeSystem(testID), clusterWithID("other", testID)},
			arg:  "given",
			want: Identity{ID: testID, Name: "given"},
		},
		{
			name: "no name: the Cluster claiming the kube-system UID",
			objs: []client.Object{kubeSystem(testID), clusterWithID("peer-a", "peer-a-id"), clusterWithID("mine", testID), clusterWithID("peer-b", "peer-b-id")},
			want: Identity{ID: testID, Name: "mine"},
		},
		{
			name: "no name, several claim it: the first by name",
			objs: []client.Object{kubeSystem(testID), clusterWithID("zulu", testID), clusterWithID("bravo", testID), clusterWithID("alpha", "peer-id"), clusterWithID("mike", testID)},
			want: Identity{ID: testID, Name: "bravo"},
		},
		{
			name:    "no name, none claims it",
			objs:    []client.Object{kubeSystem(testID), clusterWithID("peer-a", "peer-a-id")},
			wantErr: []string{"--cluster-name", string(testID)},
			wantIs:  ErrNoLocalCluster,
		},
		{
			name:    "no name, no Cluster at all",
			objs:    []client.Object{kubeSystem(testID)},
			wantErr: []string{"--cluster-name"},
			wantIs:  ErrNoLocalCluster,
		},
		{
			name:    "no kube-system namespace",
			objs:    []client.Object{clusterWithID("mine", testID)},
			arg:     "given",
			wantErr: []string{"kube-system"},
		},
		{
			name:    "kube-system without a UID",
			objs:    []client.Object{kubeSystem("")},
			wantErr: []string{"kube-system", "no UID"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := fake.NewClientBuilder().WithScheme(newScheme(t)).WithObjects(tc.objs...).Build()
			got, err := Resolve(context.Background(), c, tc.arg)
			if tc.wantErr == nil {
				if err != nil {
					t.Fatalf("Resolve: %v", err)
				}
				if diff := cmp.Diff(tc.want, got); diff != "" {
					t.Errorf("Resolve (-want +got):\n%s", diff)
				}
				return
			}
			if err == nil {
				t.Fatalf("Resolve = %+v, want an error", got)
			}
			for _, want := range tc.wantErr {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not mention %q", err, want)
				}
			}
			if tc.wantIs != nil && !errors.Is(err, tc.wantIs) {
				t.Errorf("error %v does not wrap %v", err, tc.wantIs)
			}
			if tc.wantIs == nil && errors.Is(err, ErrNoLocalCluster) {
				t.Errorf("error %v wraps ErrNoLocalCluster", err)
			}
		})
	}
}

func TestLocalClusterID(t *testing.T) {
	c := fake.NewClientBuilder().WithScheme(newScheme(t)).WithObjects(kubeSystem(testID)).Build()
	got, err := LocalClusterID(context.Background(), c)
	if err != nil || got != testID {
		t.Fatalf("LocalClusterID = %q, %v; want %q", got, err, testID)
	}
}

// 11. Options.Validate.
func TestOptionsValidate(t *testing.T) {
	valid := Options{Namespace: testNS, TokenLifetime: DefaultTokenLifetime}
	tests := []struct {
		name    string
		mutate  func(o *Options)
		wantErr string
	}{
		{"default lifetime", func(*Options) {}, ""},
		{"minimum lifetime", func(o *Options) { o.TokenLifetime = MinTokenLifetime }, ""},
		{"just below the minimum", func(o *Options) { o.TokenLifetime = MinTokenLifetime - time.Second }, "at least 10m0s, got 9m59s"},
		{"zero lifetime", func(o *Options) { o.TokenLifetime = 0 }, "at least 10m0s"},
		{"negative lifetime", func(o *Options) { o.TokenLifetime = -time.Hour }, "at least 10m0s"},
		{"no namespace", func(o *Options) { o.Namespace = "" }, "namespace is empty"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			o := valid
			tc.mutate(&o)
			err := o.Validate()
			switch {
			case tc.wantErr == "" && err != nil:
				t.Errorf("Validate: %v", err)
			case tc.wantErr != "" && err == nil:
				t.Errorf("Validate succeeded, want an error containing %q", tc.wantErr)
			case tc.wantErr != "" && !strings.Contains(err.Error(), tc.wantErr):
				t.Errorf("Validate error %q does not contain %q", err, tc.wantErr)
			}
		})
	}
}
