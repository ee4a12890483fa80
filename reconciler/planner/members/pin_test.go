package members

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/kubectl-registry/kubectl-registry/reconciler/api/v1alpha1"
	"github.com/kubectl-registry/kubectl-registry/reconciler/kubeconfig"
)

// TestPinnedServer: an address this cluster's admin chose for a peer (join
// --peer-server: the annotation and the endpoint on the local Cluster, the server of the
// reader Secret) survives the membership sync from the peer's own view, which advertises
// another address; without the annotation the peer's own address is taken, as before.
func TestPinnedServer(t *testing.T) {
	const chosen = "https://x.internal:6443"
	pinnedSecret := sec("x", defaultExpiryAt, readerServer(chosen, nil))
	tests := []struct {
		name  string
		local []Object
		// want is the endpoint of the local Cluster of x after the plan, and whether it is
		// still pinned.
		want    []v1alpha1.KubernetesAPIEndpoint
		wantPin string
		// advertised are x's own endpoints besides the default one.
		advertised []v1alpha1.KubernetesAPIEndpoint
	}{{
		name: "the hand copy join wrote, pinned, is adopted and keeps the address",
		local: []Object{
			cl("x", idX, server(chosen), annotate(v1alpha1.PinnedServerAnnotation, chosen)),
			pinnedSecret,
		},
		want:    []v1alpha1.KubernetesAPIEndpoint{{ServerAddress: chosen}},
		wantPin: chosen,
	}, {
		name: "a marked copy, pinned by a later join, keeps the address",
		local: []Object{
			cl("x", idX, mark(idX), server(chosen), annotate(v1alpha1.PinnedServerAnnotation, chosen)),
			sec("x", defaultExpiryAt, mark(idX), readerServer(chosen, nil)),
		},
		want:    []v1alpha1.KubernetesAPIEndpoint{{ServerAddress: chosen}},
		wantPin: chosen,
	}, {
		name: "an endpoint for another network is kept as x advertises it",
		local: []Object{
			cl("x", idX, mark(idX), server(chosen), annotate(v1alpha1.PinnedServerAnnotation, chosen)),
			pinnedSecret,
		},
		want:       []v1alpha1.KubernetesAPIEndpoint{{ServerAddress: chosen}, {ClientNetwork: "vpn", ServerAddress: "https://x.vpn:6443"}},
		wantPin:    chosen,
		advertised: []v1alpha1.KubernetesAPIEndpoint{{ClientNetwork: "vpn", ServerAddress: "https://x.vpn:6443"}},
	}, {
		name: "not pinned: x's own address is taken",
		local: []Object{
			cl("x", idX, mark(idX), server(chosen)),
			pinnedSecret,
		},
		want: []v1alpha1.KubernetesAPIEndpoint{{ServerAddress: "https://x.example:6443"}},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			xOwn := cl("x", idX)
			xOwn.Spec.KubernetesAPIEndpoints = append(xOwn.Spec.KubernetesAPIEndpoints, tt.advertised...)
			in := input(tt.local, []View{peer("x", idX, xOwn, sec("x", defaultExpiryAt+1))})
			in.Now = t0
			// Twice: the plan applied is a fixed point, and the address holds.
			for round := range 2 {
				res := Plan(in)
				in = apply(in, res)
				var got *v1alpha1.Cluster
				for i := range in.Local.Clusters {
					if in.Local.Clusters[i].Name == "x" {
						got = &in.Local.Clusters[i]
					}
				}
				if got == nil {
					t.Fatalf("round %d: no Cluster x", round)
				}
				if diff := cmp.Diff(tt.want, got.Spec.KubernetesAPIEndpoints); diff != "" {
					t.Errorf("round %d: endpoints (-want +got):\n%s", round, diff)
				}
				if pin := got.Annotations[v1alpha1.PinnedServerAnnotation]; pin != tt.wantPin {
					t.Errorf("round %d: pinned %q, want %q", round, pin, tt.wantPin)
				}
				for _, s := range in.Local.Secrets {
					if s.Name != "x" {
						continue
					}
					if r, _ := kubeconfig.Read(s.Data[kubeconfigKey]); r.Server != chosen {
						t.Errorf("round %d: the reader Secret of x names %q, want the pinned %s", round, r.Server, chosen)
					}
				}
				if round == 1 && len(res.Writes) != 0 {
					t.Errorf("second plan writes %v, want nothing", summary(res))
				}
			}
		})
	}
}
