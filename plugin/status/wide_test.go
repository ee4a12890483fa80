package status

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// TestPrintWide: -o wide adds the reasons of each cluster's ReaderKeyReady,
// ReaderCredentialReady and RelaysAgree conditions; <none> where a cluster has none.
func TestPrintWide(t *testing.T) {
	v := View{Clusters: []ClusterInfo{
		{Name: "east", ID: "e", Type: "Local", State: "Ready", Ready: "True", Synced: "True",
			ReaderKey: &CondInfo{Status: "True", Reason: "ReaderKeyAdvertised"}, Relays: &CondInfo{Status: "False", Reason: "ConflictingRelays"}},
		{Name: "west", ID: "w", Type: "Peer", State: "Ready", Ready: "True", Synced: "True",
			ReaderKey: &CondInfo{Status: "False", Reason: "NoReaderKey"}, ReaderCredential: &CondInfo{Status: "False", Reason: "BootstrapCredential"}},
	}}
	var b bytes.Buffer
	if err := printView(&b, v, time.Now(), true); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(b.String(), "\n")
	var got [][]string
	for _, l := range lines[:3] {
		f := strings.Fields(l)
		got = append(got, f[len(f)-3:])
	}
	want := [][]string{{"KEY", "CREDENTIAL", "RELAYS"}, {"ReaderKeyAdvertised", "<none>", "ConflictingRelays"}, {"NoReaderKey", "BootstrapCredential", "<none>"}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("wide columns (-want +got):\n%s\n%s", diff, b.String())
	}
	b.Reset()
	if err := printView(&b, v, time.Now(), false); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(b.String(), "CREDENTIAL") {
		t.Errorf("the default table has the wide columns:\n%s", b.String())
	}
}
