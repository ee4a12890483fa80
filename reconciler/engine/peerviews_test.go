package engine

import (
	"context"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubectl-registry/kubectl-registry/reconciler/api/v1alpha1"
	"github.com/kubectl-registry/kubectl-registry/reconciler/peers"
)

// refusingReader fails the test when read: what a peer read with its bootstrap
// credential must not be asked (a read of a kind the credential may not read would wait
// for an informer that never syncs).
type refusingReader struct{ t *testing.T }

func (r refusingReader) Get(context.Context, client.ObjectKey, client.Object, ...client.GetOption) error {
	r.t.Error("the bootstrap peer was read (Get)")
	return nil
}

func (r refusingReader) List(context.Context, client.ObjectList, ...client.ListOption) error {
	r.t.Error("the bootstrap peer was read (List)")
	return nil
}

// featuresReader returns one ClusterFeature.
type featuresReader struct{ refusingReader }

func (featuresReader) List(_ context.Context, list client.ObjectList, _ ...client.ListOption) error {
	list.(*v1alpha1.ClusterFeatureList).Items = []v1alpha1.ClusterFeature{{Spec: v1alpha1.ClusterFeatureSpec{FeatureName: "f"}}}
	return nil
}

// TestPeerFeaturesOfABootstrapPeer: the ClusterFeatures of a peer read with its
// bootstrap credential are not asked for (none), those of a peer read with a credential
// of its own are.
func TestPeerFeaturesOfABootstrapPeer(t *testing.T) {
	boot := peers.Connected("x", "uid-x", refusingReader{t})
	boot.Bootstrap = true
	if got := peerFeatures(context.Background(), boot); got != nil {
		t.Errorf("features of a bootstrap peer: %v, want none", got)
	}
	full := peers.Connected("x", "uid-x", featuresReader{refusingReader{t}})
	if got := peerFeatures(context.Background(), full); len(got) != 1 {
		t.Errorf("features of a peer read with its own credential: %v, want one", got)
	}
}
