package credentials

import (
	"context"
	"fmt"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	"github.com/kubectl-registry/kubectl-registry/reconciler/testbed"
)

// watchTimeout is the kube-apiserver --min-request-timeout of the bed this test starts:
// a watch that asks for no timeout of its own is ended after a random time between it
// and twice it (the default, 1800 s, gives 30 to 60 minutes).
const watchTimeout = 60 * time.Second

// TestRevokedWatch measures what revocation does to a watch already open: a
// ServiceAccount may watch the ConfigMaps of a namespace (as a per-peer reader watches
// the Secrets of the registry namespace) and opens a watch that asks for no timeout, as
// a hostile member's client would; the ServiceAccount is then deleted, which revokes its
// tokens (new requests get 401 within seconds), and a ConfigMap is created every second.
// The open watch keeps delivering them until the API server ends it on its own
// schedule, between --min-request-timeout and twice it: revocation closes no open
// stream. The test fails if the stream stops with the revocation (then the guarantees
// page would say too little) or outlives twice the timeout.
func TestRevokedWatch(t *testing.T) {
	testbed.SkipIfNoAssets(t)
	ctx := context.Background()
	b, err := testbed.Start(ctx, testbed.Options{Names: []string{"watched"}, NoControllerManager: true,
		APIServerFlags: map[string]string{"min-request-timeout": fmt.Sprint(int(watchTimeout / time.Second))}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := b.Stop(); err != nil {
			t.Logf("stopping the bed: %v", err)
		}
	})
	c := b.Cluster("watched")
	admin, err := c.Clientset()
	if err != nil {
		t.Fatal(err)
	}
	const namespace = "watched"
	if _, err := admin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.CoreV1().ServiceAccounts(namespace).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "reader"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.RbacV1().Roles(namespace).Create(ctx, &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Name: "reader"},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get", "list", "watch"}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.RbacV1().RoleBindings(namespace).Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "reader"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "reader"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: "reader", Namespace: namespace}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	tr, err := admin.CoreV1().ServiceAccounts(namespace).CreateToken(ctx, "reader", &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To(int64(3600))},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	reader, err := kubernetes.NewForConfig(&rest.Config{Host: c.Host(), TLSClientConfig: rest.TLSClientConfig{CAData: c.CAData()}, BearerToken: tr.Status.Token})
	if err != nil {
		t.Fatal(err)
	}
	var w watch.Interface
	deadline := time.Now().Add(30 * time.Second)
	for {
		// The RoleBinding may take a moment to reach the authorizer's cache.
		if w, err = reader.CoreV1().ConfigMaps(namespace).Watch(ctx, metav1.ListOptions{}); err == nil || time.Now().After(deadline) {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	if err != nil {
		t.Fatal(err)
	}
	opened := time.Now()
	defer w.Stop()

	// Revocation: the ServiceAccount goes, and with it every token of it.
	if err := admin.CoreV1().ServiceAccounts(namespace).Delete(ctx, "reader", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	revoked := time.Now()
	var rejected time.Time
	for i := 0; rejected.IsZero(); i++ {
		if _, err := reader.CoreV1().ConfigMaps(namespace).List(ctx, metav1.ListOptions{}); err != nil {
			rejected = time.Now()
			t.Logf("new requests with the revoked token are rejected %s after the revocation: %v", rejected.Sub(revoked).Round(100*time.Millisecond), err)
			break
		}
		if time.Since(revoked) > 30*time.Second {
			t.Fatal("the revoked token still lists ConfigMaps 30 s after its ServiceAccount was deleted")
		}
		time.Sleep(200 * time.Millisecond)
	}

	// A ConfigMap a second, until the stream ends.
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			case <-time.After(time.Second):
			}
			_, _ = admin.CoreV1().ConfigMaps(namespace).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("after-%d", i)}}, metav1.CreateOptions{})
		}
	}()
	afterRejection, last := 0, time.Time{}
	limit := time.After(2*watchTimeout + 30*time.Second)
	for done := false; !done; {
		select {
		case ev, ok := <-w.ResultChan():
			if !ok {
				done = true
				break
			}
			if ev.Type == watch.Added && time.Now().After(rejected) {
				afterRejection++
				last = time.Now()
			}
		case <-limit:
			t.Fatalf("the watch of the revoked token still streams %s after it opened (the API server's limit is twice --min-request-timeout, %s)", time.Since(opened).Round(time.Second), 2*watchTimeout)
		}
	}
	ended := time.Now()
	t.Logf("the watch opened before the revocation delivered %d new ConfigMaps after the token was rejected, the last %s after the revocation; the API server ended it %s after it opened (--min-request-timeout %s)",
		afterRejection, last.Sub(revoked).Round(time.Second), ended.Sub(opened).Round(time.Second), watchTimeout)
	if afterRejection == 0 {
		t.Error("the watch delivered nothing once the token was rejected: revocation now ends open watches, and docs/guarantees.md says too little")
	}
	if ended.Sub(opened) < watchTimeout-5*time.Second {
		t.Errorf("the watch ended %s after it opened, before --min-request-timeout (%s)", ended.Sub(opened).Round(time.Second), watchTimeout)
	}
}
