package main

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/kubectl-registry/kubectl-registry/reconciler/api/v1alpha1"
	"github.com/kubectl-registry/kubectl-registry/reconciler/credentials/seal"
	"github.com/kubectl-registry/kubectl-registry/reconciler/kubeconfig"
	"github.com/kubectl-registry/kubectl-registry/reconciler/peers/simpeer"
)

func TestParsePeerSizes(t *testing.T) {
	tests := []struct {
		in      string
		want    []int
		wantErr bool
	}{
		{in: "10,25,50,100", want: []int{10, 25, 50, 100}},
		{in: " 1, 5 ,", want: []int{1, 5}},
		{in: "", wantErr: true},
		{in: "0", wantErr: true},
		{in: "5,x", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := parsePeerSizes(tt.in)
			if (err != nil) != tt.wantErr {
				t.Fatalf("parsePeerSizes(%q) error = %v, want error %v", tt.in, err, tt.wantErr)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("parsePeerSizes(%q) (-want +got):\n%s", tt.in, diff)
			}
		})
	}
}

func TestPeerSlopes(t *testing.T) {
	size := func(n int, anon, cpu, goroutines float64) *peerResult {
		return &peerResult{Peers: n, Steady: &peerSnapshot{AnonMiB: anon, Goroutines: goroutines}, Idle: &peerIdle{CPUms: cpu}}
	}
	r := &peerResults{Sizes: []*peerResult{
		size(100, 180, 75, 4100), // run first: the slopes are in increasing order anyway
		size(10, 40, 5, 500),
		{Peers: 25, Error: "failed"},
		size(50, 80, 25, 2100),
	}}
	r.slopes()
	r.slopes() // again, as after every size: the same slopes
	want := []peerSlope{
		{From: 10, To: 50, AnonMiBPerPeer: 1, IdleCPUmsPerPeer: 0.5, GoroutinesPerPeer: 40},
		{From: 50, To: 100, AnonMiBPerPeer: 2, IdleCPUmsPerPeer: 1, GoroutinesPerPeer: 40},
	}
	if diff := cmp.Diff(want, r.Slopes); diff != "" {
		t.Errorf("slopes (-want +got):\n%s", diff)
	}
	table := r.table()
	for _, s := range []string{"failed", "per added peer, 50 -> 100: 2.00 MiB anonymous", "25 peers failed: failed"} {
		if !strings.Contains(table, s) {
			t.Errorf("the table lacks %q:\n%s", s, table)
		}
	}
}

// fillPeers gives each simulated peer what a member of the group holds, which a client
// reads back as an API server's.
func TestFillPeers(t *testing.T) {
	sg, sims := startSims(t, 3)
	memberKey, err := seal.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	clusters, secrets, err := fillPeers(sims, "member-id", memberKey, sg.CAData(), 10)
	if err != nil {
		t.Fatal(err)
	}
	// Every member's Cluster and reader Secret, and per other member the credential
	// issued to it and the one received from it.
	if clusters != 4 || secrets != 4+2*3 {
		t.Errorf("%d Clusters and %d Secrets per peer, want 4 and 10", clusters, secrets)
	}
	ctx := context.Background()
	var cms []int
	for _, p := range sims {
		cfg := &rest.Config{Host: p.srv.URL(), BearerToken: "token", TLSClientConfig: rest.TLSClientConfig{CAData: sg.CAData()}}
		cs, err := kubernetes.NewForConfig(cfg)
		if err != nil {
			t.Fatal(err)
		}
		l, err := cs.CoreV1().ConfigMaps(nsRegistry).List(ctx, metav1.ListOptions{LabelSelector: syncLabel + "=true"})
		if err != nil {
			t.Fatal(err)
		}
		cms = append(cms, len(l.Items))
		dyn, err := dynamic.NewForConfig(cfg)
		if err != nil {
			t.Fatal(err)
		}
		own, err := dyn.Resource(v1alpha1.GroupVersion.WithResource("clusters")).Get(ctx, p.name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if typ, _, _ := unstructured.NestedString(own.Object, "status", "type"); typ != string(v1alpha1.ClusterTypeLocal) {
			t.Errorf("%s's own Cluster has type %q, want Local", p.name, typ)
		}
		rule, err := dyn.Resource(v1alpha1.GroupVersion.WithResource("resourcesyncrules")).Get(ctx, ruleName, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got := rule.GetLabels()[v1alpha1.OwnershipLabel]; got != "member-id" {
			t.Errorf("%s's copy of the rule has origin %q, want the member's", p.name, got)
		}
		// The credential the peer issued the member opens with the member's key, and
		// reads the peer.
		issued, err := cs.CoreV1().Secrets(v1alpha1.DefaultNamespace).Get(ctx, v1alpha1.IssuedReaderSecretName("member-id"), metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		raw, err := memberKey.Open(p.srv.UID(), "member-id", issued.Data[v1alpha1.SealedKubeconfigKey])
		if err != nil {
			t.Fatalf("%s's credential for the member: %v", p.name, err)
		}
		rd, ok := kubeconfig.Read(raw)
		if !ok || rd.Token != p.srv.Token() || rd.Server != p.srv.URL() {
			t.Errorf("%s's credential for the member reads %s with another token", p.name, rd.Server)
		}
	}
	if diff := cmp.Diff([]int{4, 3, 3}, cms); diff != "" {
		t.Errorf("ConfigMaps per peer (-want +got):\n%s", diff)
	}
}

// heartbeats refreshes every Cluster of every peer once per period.
func TestHeartbeats(t *testing.T) {
	sg, sims := startSims(t, 2)
	if _, _, err := fillPeers(sims, "member-id", nil, sg.CAData(), 2); err != nil {
		t.Fatal(err)
	}
	before := []string{sims[0].srv.ResourceVersion(), sims[1].srv.ResourceVersion()}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	// Three Clusters per peer, six in all: one period is six updates.
	done := make(chan struct{})
	go func() { heartbeats(ctx, sims, 60*time.Millisecond); close(done) }()
	cfg := &rest.Config{Host: sims[1].srv.URL(), BearerToken: "token", TLSClientConfig: rest.TLSClientConfig{CAData: sg.CAData()}}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	w, err := dyn.Resource(v1alpha1.GroupVersion.WithResource("clusters")).Watch(ctx, metav1.ListOptions{ResourceVersion: before[1]})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for ev := range w.ResultChan() {
		got = append(got, string(ev.Type))
		if len(got) == 3 {
			break
		}
	}
	w.Stop()
	cancel()
	<-done
	if diff := cmp.Diff([]string{"MODIFIED", "MODIFIED", "MODIFIED"}, got); diff != "" {
		t.Errorf("events of the second peer's Clusters (-want +got):\n%s", diff)
	}
	if sims[0].srv.ResourceVersion() == before[0] {
		t.Error("the first peer's Clusters were not refreshed")
	}
}

// The simulated tokens read as a TokenRequest's: the registry refuses a relayed token
// that states no expiry.
func TestServiceAccountToken(t *testing.T) {
	tok := serviceAccountToken("system:serviceaccount:cluster-registry:cluster-registry-reader")
	exp, iat, ok := kubeconfig.TokenTimes(tok)
	if !ok {
		t.Fatalf("TokenTimes does not read %q", tok)
	}
	if d := exp.Sub(iat); d != 24*time.Hour {
		t.Errorf("lifetime %s, want 24h", d)
	}
	if n := len(tok); n < 800 || n > 1400 {
		t.Errorf("%d characters, want about a kilobyte, as a ServiceAccount token", n)
	}
}

// startSims starts n simulated peers of one group, closed when the test ends.
func startSims(t *testing.T, n int) (*simpeer.Group, []simPeer) {
	t.Helper()
	sg, err := simpeer.NewGroup()
	if err != nil {
		t.Fatal(err)
	}
	sims := make([]simPeer, n)
	for i := range sims {
		srv, err := sg.Start(simpeer.Options{UID: types.UID(fmt.Sprint("id-", i)), Token: "token"})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = srv.Close() })
		if sims[i], err = newSimPeer(fmt.Sprintf("p%03d", i+1), srv, sg.CAData()); err != nil {
			t.Fatal(err)
		}
	}
	return sg, sims
}
