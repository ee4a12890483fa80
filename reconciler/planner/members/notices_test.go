package members

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kubectl-registry/kubectl-registry/reconciler/api/v1alpha1"
)

// TestPlanNotices: a notice for every peer whose departure the local cluster records and
// that was issued a notice token, kept after its ServiceAccount is revoked until the last
// notice token expires, deleted once the record is gone; the Role lists exactly the
// notices kept.
func TestPlanNotices(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	const (
		nameP = v1alpha1.DepartureNoticePrefix + "00000000000000000000000000000001"
		nameQ = v1alpha1.DepartureNoticePrefix + "00000000000000000000000000000002"
	)
	sa := func(id types.UID, notice string) corev1.ServiceAccount {
		s := corev1.ServiceAccount{}
		s.Name = v1alpha1.ReaderServiceAccountName(id)
		s.Annotations = map[string]string{v1alpha1.PeerClusterIDAnnotation: string(id), v1alpha1.DepartureNoticeAnnotation: notice}
		return s
	}
	cm := func(name string, id types.UID, record time.Time, until time.Time) corev1.ConfigMap {
		c := corev1.ConfigMap{}
		c.Name = name
		c.Labels = map[string]string{"app.kubernetes.io/part-of": "kubectl-registry", v1alpha1.ReaderForLabel: v1alpha1.ReaderKey(id)}
		c.Annotations = map[string]string{v1alpha1.PeerClusterIDAnnotation: string(id), v1alpha1.NoticeUntilAnnotation: until.Format(time.RFC3339)}
		c.Data = map[string]string{v1alpha1.DepartureKey: string(id) + "@" + record.Format(time.RFC3339Nano)}
		return c
	}
	rec := now.Add(-time.Minute)
	exp := now.Add(20 * time.Hour)
	names := func(cms []corev1.ConfigMap) []string {
		var out []string
		for _, c := range cms {
			out = append(out, c.Name)
		}
		return out
	}
	tests := []struct {
		name       string
		in         NoticeInput
		write, del []string
		role       []string
	}{{
		name: "a recorded departure of a peer holding a notice token gets its notice",
		in: NoticeInput{Records: map[types.UID]time.Time{"p": rec}, ServiceAccounts: []corev1.ServiceAccount{sa("p", nameP), sa("q", nameQ)},
			Expiries: map[types.UID]time.Time{"p": exp, "q": exp}},
		write: []string{nameP}, role: []string{nameP},
	}, {
		name: "the notice stays once the ServiceAccount and credential are gone, until the token expires",
		in:   NoticeInput{Records: map[types.UID]time.Time{"p": rec}, Notices: []corev1.ConfigMap{cm(nameP, "p", rec, exp)}},
		role: []string{nameP},
	}, {
		name: "and goes after",
		in:   NoticeInput{Records: map[types.UID]time.Time{"p": rec}, Notices: []corev1.ConfigMap{cm(nameP, "p", rec, now.Add(-time.Second))}},
		del:  []string{nameP},
	}, {
		name: "a departure no longer recorded (an admission) removes the notice",
		in: NoticeInput{ServiceAccounts: []corev1.ServiceAccount{sa("p", nameP)}, Expiries: map[types.UID]time.Time{"p": exp},
			Notices: []corev1.ConfigMap{cm(nameP, "p", rec, exp)}},
		del: []string{nameP},
	}, {
		name: "a renewed notice token moves the notice's end",
		in: NoticeInput{Records: map[types.UID]time.Time{"p": rec}, ServiceAccounts: []corev1.ServiceAccount{sa("p", nameP)},
			Expiries: map[types.UID]time.Time{"p": exp.Add(time.Hour)}, Notices: []corev1.ConfigMap{cm(nameP, "p", rec, exp)}},
		write: []string{nameP}, role: []string{nameP},
	}, {
		name: "a peer never issued a notice token gets none",
		in:   NoticeInput{Records: map[types.UID]time.Time{"p": rec}, ServiceAccounts: []corev1.ServiceAccount{sa("p", nameP)}},
	}, {
		name: "a ServiceAccount naming something else than a notice names none",
		in: NoticeInput{Records: map[types.UID]time.Time{"p": rec}, ServiceAccounts: []corev1.ServiceAccount{sa("p", "cluster-registry-key")},
			Expiries: map[types.UID]time.Time{"p": exp}},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.in.Now = now
			got := PlanNotices(tt.in)
			if diff := cmp.Diff(tt.write, names(got.Write)); diff != "" {
				t.Errorf("written (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.del, names(got.Delete)); diff != "" {
				t.Errorf("deleted (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.role, got.Names); diff != "" {
				t.Errorf("Role names (-want +got):\n%s", diff)
			}
			for _, w := range got.Write {
				id := types.UID(w.Annotations[v1alpha1.PeerClusterIDAnnotation])
				if want := string(id) + "@" + tt.in.Records[id].UTC().Format(time.RFC3339Nano); w.Data[v1alpha1.DepartureKey] != want {
					t.Errorf("notice %s holds %q, want %q", w.Name, w.Data[v1alpha1.DepartureKey], want)
				}
			}
		})
	}
	if diff := cmp.Diff([]rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get"}, ResourceNames: []string{nameP, nameQ}}},
		NoticeRules([]string{nameQ, nameP})); diff != "" {
		t.Errorf("NoticeRules (-want +got):\n%s", diff)
	}
	if NoticeRules(nil) != nil {
		t.Error("NoticeRules of no notice grants something")
	}
}

// TestNoticeRoundTrip: what the issuer seals is what the holder parses; a name that is
// not a notice's is refused.
func TestNoticeRoundTrip(t *testing.T) {
	name, err := NewNoticeName()
	if err != nil {
		t.Fatal(err)
	}
	data, err := Notice{Token: "t", Name: name}.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	got, err := ParseNotice(data)
	if err != nil || got.Name != name || got.Token != "t" {
		t.Fatalf("ParseNotice = %+v, %v", got, err)
	}
	for _, bad := range []string{`{"token":"t","name":"cluster-registry-key"}`, `{"name":"` + name + `"}`, `nope`} {
		if _, err := ParseNotice([]byte(bad)); err == nil {
			t.Errorf("ParseNotice(%s) accepted", bad)
		}
	}
}
