package credentials

import (
	"errors"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kubectl-registry/kubectl-registry/reconciler/api/v1alpha1"
)

// TestHeldByLegacyPeer: what a legacy peer holds of this cluster is read from its Cluster
// of this cluster and the Secret it names, and the LegacyPeer condition warns a week
// before that copy expires, and once it has.
func TestHeldByLegacyPeer(t *testing.T) {
	now := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	const local = types.UID("id-local")
	ofLocal := v1alpha1.Cluster{}
	ofLocal.Name = "local"
	ofLocal.Spec.ClusterID = local
	ofLocal.Spec.AuthInfo.SecretRef.Namespace, ofLocal.Spec.AuthInfo.SecretRef.Name = "cluster-registry", "local"
	other := v1alpha1.Cluster{}
	other.Name, other.Spec.ClusterID = "other", "id-other"
	hostile := *ofLocal.DeepCopy()
	hostile.Spec.AuthInfo.SecretRef.Name = strings.Repeat("x", 1<<20)
	noNamespace := *ofLocal.DeepCopy()
	noNamespace.Spec.AuthInfo.SecretRef.Namespace = ""
	holding := func(exp time.Time) func(ns, name string) (*corev1.Secret, error) {
		return func(ns, name string) (*corev1.Secret, error) {
			if ns != "cluster-registry" || name != "local" {
				return nil, apierrors.NewNotFound(schema.GroupResource{Resource: "secrets"}, name)
			}
			return secret(name, "https://local.example:6443", exp), nil
		}
	}
	tests := []struct {
		name        string
		clusters    []v1alpha1.Cluster
		get         func(ns, name string) (*corev1.Secret, error)
		wantExpires time.Time
		wantMessage string
	}{
		{"a month left", []v1alpha1.Cluster{other, ofLocal}, holding(now.Add(30 * 24 * time.Hour)), now.Add(30 * 24 * time.Hour),
			"The credential the peer holds (Secret cluster-registry/local there) expires at 2026-12-28T12:00:00Z."},
		{"six days left", []v1alpha1.Cluster{ofLocal}, holding(now.Add(6 * 24 * time.Hour)), now.Add(6 * 24 * time.Hour),
			"expires at 2026-12-04T12:00:00Z, within 168h0m0s: copy the current one to it before then"},
		{"expired", []v1alpha1.Cluster{ofLocal}, holding(now.Add(-time.Hour)), now.Add(-time.Hour),
			"expired at 2026-11-28T11:00:00Z: the peer cannot read this cluster"},
		{"no Cluster of this cluster", []v1alpha1.Cluster{other}, holding(now), time.Time{},
			"unknown (the peer has no Cluster of this cluster)"},
		{"not readable", []v1alpha1.Cluster{ofLocal}, func(string, string) (*corev1.Secret, error) { return nil, errors.New("forbidden") }, time.Time{},
			"cannot be read: forbidden"},
		// A hostile peer writes its Cluster of this cluster: a reference no API server
		// would take is not read, and not copied whole into this cluster's status.
		{"a hostile reference", []v1alpha1.Cluster{hostile}, holding(now), time.Time{},
			"names no valid Secret (namespace \"cluster-registry\", name \"xxxx"},
		{"no namespace", []v1alpha1.Cluster{noNamespace}, holding(now), time.Time{}, "names no valid Secret"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := HeldByLegacyPeer(tt.clusters, local, tt.get)
			if !h.Expires.Equal(tt.wantExpires) {
				t.Errorf("Expires = %v, want %v (%+v)", h.Expires, tt.wantExpires, h)
			}
			c := LegacyPeerCondition("cluster-registry-readers", "cluster-registry-reader-for-id-peer", h, now)
			if c.Reason != v1alpha1.ReasonLegacyPeer || !strings.Contains(c.Message, tt.wantMessage) {
				t.Errorf("message %.2000q does not say %q", c.Message, tt.wantMessage)
			}
			if len(c.Message) > 2048 {
				t.Errorf("the message is %d bytes: what the peer wrote is not bounded", len(c.Message))
			}
		})
	}
}
