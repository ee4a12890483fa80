package join

import (
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/kubectl-registry/kubectl-registry/reconciler/api/v1alpha1"
	"github.com/kubectl-registry/kubectl-registry/reconciler/kubeconfig"
)

// tokenExpires is when the tokens of the test's reader kubeconfigs expire.
var tokenExpires = time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)

// jwt returns a token shaped like a ServiceAccount token, unsigned, with the claims
// claims; its signature part is "token-<name>".
func jwt(name string, claims map[string]any) string {
	b, err := json.Marshal(claims)
	if err != nil {
		panic(err)
	}
	enc := base64.RawURLEncoding.EncodeToString
	return enc([]byte(`{"alg":"none"}`)) + "." + enc(b) + ".token-" + name
}

// readerToken is the token of cluster name's reader kubeconfig as kubectl-registry's
// controller writes it: a bound ServiceAccount token, which expires.
func readerToken(name string) string {
	return jwt(name, map[string]any{"sub": "system:serviceaccount:cluster-registry:reader-" + name, "exp": tokenExpires.Unix()})
}

// seedToken is the token of cluster name's reader kubeconfig as the seed's controller
// writes it: a long-lived ServiceAccount token, which states no expiry.
func seedToken(name string) string {
	return jwt(name, map[string]any{"iss": "kubernetes/serviceaccount", "sub": "system:serviceaccount:cluster-registry:reader-" + name})
}

// readerKubeconfig renders a reader kubeconfig for server.
func readerKubeconfig(t *testing.T, name, server string) []byte {
	t.Helper()
	return kubeconfigWithToken(t, name, server, readerToken(name))
}

// kubeconfigWithToken renders a reader kubeconfig for server with token.
func kubeconfigWithToken(t *testing.T, name, server, token string) []byte {
	t.Helper()
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters[name] = &clientcmdapi.Cluster{Server: server}
	cfg.AuthInfos[name] = &clientcmdapi.AuthInfo{Token: token}
	cfg.Contexts[name] = &clientcmdapi.Context{Cluster: name, AuthInfo: name}
	cfg.CurrentContext = name
	b, err := clientcmd.Write(*cfg)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func localCluster(name, id, server string) *v1alpha1.Cluster {
	return &v1alpha1.Cluster{
		ObjectMeta: metav1.ObjectMeta{
			Name: name, UID: types.UID("uid-" + name), ResourceVersion: "42", Generation: 3,
			Labels: map[string]string{"team": "x"},
			Annotations: map[string]string{
				corev1.LastAppliedConfigAnnotation: "{}",
				v1alpha1.ClusterDisabledAnnotation: "true",
				"note":                             "kept",
			},
			ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "m"}},
		},
		Spec: v1alpha1.ClusterSpec{
			ClusterID: types.UID(id),
			AuthInfo:  v1alpha1.AuthInfo{SecretRef: v1alpha1.NamespacedName{Name: name, Namespace: v1alpha1.DefaultNamespace}},
			KubernetesAPIEndpoints: []v1alpha1.KubernetesAPIEndpoint{
				{ClientNetwork: "east", ServerAddress: strings.TrimPrefix(server, "https://"), CABundle: []byte("ca")},
				{ClientNetwork: "west", ServerAddress: "https://west.example.com", CABundle: []byte("ca2")},
			},
		},
		Status: v1alpha1.ClusterStatus{State: v1alpha1.ClusterStateReady, Type: v1alpha1.ClusterTypeLocal},
	}
}

func readerSecret(t *testing.T, name, server string) *corev1.Secret {
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: v1alpha1.DefaultNamespace, UID: types.UID("uid-s-" + name), ResourceVersion: "7",
			Labels:      map[string]string{"app.kubernetes.io/part-of": "kubectl-registry", v1alpha1.OwnershipLabel: "someone"},
			Annotations: map[string]string{v1alpha1.OwnershipAnnotation: "someone", "token-expires-at": "soon"},
		},
		Type: v1alpha1.SecretTypeClusterRegistry,
		Data: map[string][]byte{v1alpha1.KubeconfigKey: readerKubeconfig(t, name, server), "extra": []byte("x")},
	}
}

func TestBuildCopies(t *testing.T) {
	cluster := localCluster("a", "id-a", "https://10.0.0.1:6443")
	secret := readerSecret(t, "a", "https://10.0.0.1:6443")

	t.Run("as it is", func(t *testing.T) {
		got, err := buildCopies(cluster, secret, v1alpha1.DefaultNamespace, "")
		if err != nil {
			t.Fatal(err)
		}
		wantSecret := &corev1.Secret{
			TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"},
			ObjectMeta: metav1.ObjectMeta{
				Name: "a", Namespace: v1alpha1.DefaultNamespace,
				Labels:      map[string]string{"app.kubernetes.io/part-of": "kubectl-registry"},
				Annotations: map[string]string{"token-expires-at": "soon"},
			},
			Type: v1alpha1.SecretTypeClusterRegistry,
			Data: secret.Data,
		}
		if diff := cmp.Diff(wantSecret, got.Secret); diff != "" {
			t.Errorf("Secret (-want +got):\n%s", diff)
		}
		wantCluster := &v1alpha1.Cluster{
			TypeMeta: metav1.TypeMeta{APIVersion: "clusterregistry.k8s.cisco.com/v1alpha1", Kind: "Cluster"},
			ObjectMeta: metav1.ObjectMeta{
				Name:        "a",
				Labels:      map[string]string{"team": "x"},
				Annotations: map[string]string{"note": "kept"},
			},
			Spec: cluster.Spec,
		}
		if diff := cmp.Diff(wantCluster, got.Cluster); diff != "" {
			t.Errorf("Cluster (-want +got):\n%s", diff)
		}
		// The originals are untouched.
		if cluster.Annotations[v1alpha1.ClusterDisabledAnnotation] != "true" || secret.Labels[v1alpha1.OwnershipLabel] != "someone" {
			t.Error("buildCopies changed the originals")
		}
	})

	t.Run("with --server", func(t *testing.T) {
		got, err := buildCopies(cluster, secret, v1alpha1.DefaultNamespace, "https://a.example.com:443")
		if err != nil {
			t.Fatal(err)
		}
		cfg, err := kubeconfig.Parse(got.Secret.Data[v1alpha1.KubeconfigKey])
		if err != nil {
			t.Fatal(err)
		}
		if cfg.Host != "https://a.example.com:443" || cfg.BearerToken != readerToken("a") {
			t.Errorf("rewritten kubeconfig: server %s token %s", cfg.Host, cfg.BearerToken)
		}
		if string(got.Secret.Data["extra"]) != "x" {
			t.Errorf("other data keys lost: %v", got.Secret.Data)
		}
		want := []v1alpha1.KubernetesAPIEndpoint{
			{ClientNetwork: "east", ServerAddress: "https://a.example.com:443", CABundle: []byte("ca")},
			{ClientNetwork: "west", ServerAddress: "https://west.example.com", CABundle: []byte("ca2")},
		}
		if diff := cmp.Diff(want, got.Cluster.Spec.KubernetesAPIEndpoints); diff != "" {
			t.Errorf("endpoints (-want +got):\n%s", diff)
		}
		if cluster.Spec.KubernetesAPIEndpoints[0].ServerAddress != "10.0.0.1:6443" {
			t.Error("the original endpoints changed")
		}
		if cfg, _ := kubeconfig.Parse(secret.Data[v1alpha1.KubeconfigKey]); cfg.Host != "https://10.0.0.1:6443" {
			t.Error("the original kubeconfig changed")
		}
	})

	t.Run("with the same server", func(t *testing.T) {
		got, err := buildCopies(cluster, secret, v1alpha1.DefaultNamespace, "https://10.0.0.1:6443")
		if err != nil {
			t.Fatal(err)
		}
		if string(got.Secret.Data[v1alpha1.KubeconfigKey]) != string(secret.Data[v1alpha1.KubeconfigKey]) {
			t.Error("the kubeconfig was rewritten although its server did not change")
		}
	})
}

func TestRewriteEndpoints(t *testing.T) {
	const server = "https://new.example.com"
	tests := []struct {
		name string
		eps  []v1alpha1.KubernetesAPIEndpoint
		want []v1alpha1.KubernetesAPIEndpoint
	}{
		{
			name: "no endpoints",
			want: []v1alpha1.KubernetesAPIEndpoint{{ServerAddress: server}},
		},
		{
			name: "every endpoint of the old address",
			eps: []v1alpha1.KubernetesAPIEndpoint{
				{ClientNetwork: "x", ServerAddress: "old.example.com:6443"},
				{ClientNetwork: "y", ServerAddress: "https://old.example.com:6443", CABundle: []byte("c")},
				{ClientNetwork: "z", ServerAddress: "other"},
			},
			want: []v1alpha1.KubernetesAPIEndpoint{
				{ClientNetwork: "x", ServerAddress: server},
				{ClientNetwork: "y", ServerAddress: server, CABundle: []byte("c")},
				{ClientNetwork: "z", ServerAddress: "other"},
			},
		},
		{
			name: "no match: the endpoint for any network",
			eps: []v1alpha1.KubernetesAPIEndpoint{
				{ClientNetwork: "z", ServerAddress: "other"},
				{ServerAddress: "default", CABundle: []byte("c")},
			},
			want: []v1alpha1.KubernetesAPIEndpoint{
				{ClientNetwork: "z", ServerAddress: "other"},
				{ServerAddress: server, CABundle: []byte("c")},
			},
		},
		{
			name: "no match and no endpoint for any network: added",
			eps:  []v1alpha1.KubernetesAPIEndpoint{{ClientNetwork: "z", ServerAddress: "other"}},
			want: []v1alpha1.KubernetesAPIEndpoint{{ClientNetwork: "z", ServerAddress: "other"}, {ServerAddress: server}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := rewriteEndpoints(tt.eps, "https://old.example.com:6443", server)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestToApply(t *testing.T) {
	c, err := buildCopies(localCluster("a", "id-a", "https://10.0.0.1:6443"), readerSecret(t, "a", "https://10.0.0.1:6443"), "ns", "")
	if err != nil {
		t.Fatal(err)
	}
	u, err := toApply(c.Cluster)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := u.Object["status"]; ok {
		t.Errorf("status in the apply body: %v", u.Object)
	}
	md := u.Object["metadata"].(map[string]any)
	if _, ok := md["creationTimestamp"]; ok {
		t.Errorf("creationTimestamp in the apply body: %v", md)
	}
	if u.GetAPIVersion() != "clusterregistry.k8s.cisco.com/v1alpha1" || u.GetKind() != "Cluster" || u.GetName() != "a" {
		t.Errorf("apply body %v", u.Object)
	}
	s, err := toApply(c.Secret)
	if err != nil {
		t.Fatal(err)
	}
	if s.GetNamespace() != "ns" || s.Object["type"] != string(v1alpha1.SecretTypeClusterRegistry) {
		t.Errorf("apply body %v", s.Object)
	}
}

func TestUpToDate(t *testing.T) {
	c, err := buildCopies(localCluster("a", "id-a", "https://10.0.0.1:6443"), readerSecret(t, "a", "https://10.0.0.1:6443"), "ns", "")
	if err != nil {
		t.Fatal(err)
	}
	// A copy the membership sync adopted: more labels and annotations, same content.
	adoptedSecret := c.Secret.DeepCopy()
	adoptedSecret.Labels[v1alpha1.OwnershipLabel] = "id-a"
	adoptedSecret.Annotations[v1alpha1.OwnershipAnnotation] = "id-a"
	adoptedCluster := c.Cluster.DeepCopy()
	adoptedCluster.Annotations[v1alpha1.OwnershipAnnotation] = "id-a"
	adoptedCluster.Status.State = v1alpha1.ClusterStateFailed
	if !secretUpToDate(adoptedSecret, c.Secret) || !clusterUpToDate(adoptedCluster, c.Cluster) {
		t.Error("an adopted copy with the same content is not up to date")
	}

	newToken := adoptedSecret.DeepCopy()
	newToken.Data[v1alpha1.KubeconfigKey] = []byte("other")
	otherLabel := adoptedSecret.DeepCopy()
	otherLabel.Labels["app.kubernetes.io/part-of"] = "other"
	otherType := adoptedSecret.DeepCopy()
	otherType.Type = corev1.SecretTypeOpaque
	for name, s := range map[string]*corev1.Secret{"data": newToken, "label": otherLabel, "type": otherType} {
		if secretUpToDate(s, c.Secret) {
			t.Errorf("Secret with another %s is up to date", name)
		}
	}
	otherSpec := adoptedCluster.DeepCopy()
	otherSpec.Spec.KubernetesAPIEndpoints[0].ServerAddress = "elsewhere"
	noNote := adoptedCluster.DeepCopy()
	delete(noNote.Annotations, "note")
	for name, cl := range map[string]*v1alpha1.Cluster{"spec": otherSpec, "annotation": noNote} {
		if clusterUpToDate(cl, c.Cluster) {
			t.Errorf("Cluster with another %s is up to date", name)
		}
	}
}

func TestDescribe(t *testing.T) {
	synced := []v1alpha1.ClusterCondition{{Type: v1alpha1.ClusterConditionClustersSynced, Status: corev1.ConditionTrue}}
	notSynced := []v1alpha1.ClusterCondition{{Type: v1alpha1.ClusterConditionClustersSynced, Status: corev1.ConditionFalse, Reason: "ClustersOutOfSync", Message: "b does not know c"}}
	tests := []struct {
		name     string
		status   v1alpha1.ClusterStatus
		synced   bool
		wantDone bool
		want     string
	}{
		{name: "new", want: `on a, cluster b is "" (connecting)`},
		{name: "failed", status: v1alpha1.ClusterStatus{State: v1alpha1.ClusterStateFailed, Message: "dial tcp: refused"}, synced: true,
			want: `on a, cluster b is "Failed" (dial tcp: refused)`},
		{name: "ready, not synced", status: v1alpha1.ClusterStatus{State: v1alpha1.ClusterStateReady, Conditions: notSynced}, synced: true,
			want: `on a, cluster b is "Ready" (ClustersSynced: b does not know c)`},
		{name: "ready, no condition yet", status: v1alpha1.ClusterStatus{State: v1alpha1.ClusterStateReady}, synced: true,
			want: `on a, cluster b is "Ready" (ClustersSynced: not reported yet)`},
		{name: "ready and synced", status: v1alpha1.ClusterStatus{State: v1alpha1.ClusterStateReady, Conditions: synced}, synced: true, wantDone: true},
		{name: "ready, one way", status: v1alpha1.ClusterStatus{State: v1alpha1.ClusterStateReady, Conditions: notSynced}, wantDone: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := &v1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: "b"}, Status: tt.status}
			done, got := describe("a", c, tt.synced)
			if done != tt.wantDone || got != tt.want {
				t.Errorf("describe = %v, %q; want %v, %q", done, got, tt.wantDone, tt.want)
			}
		})
	}
}
