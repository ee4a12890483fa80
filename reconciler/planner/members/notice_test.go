package members

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kubectl-registry/kubectl-registry/reconciler/api/v1alpha1"
)

func notice(about types.UID, record string, mods ...func(*corev1.ConfigMap)) *corev1.ConfigMap {
	cm := &corev1.ConfigMap{}
	cm.Name = v1alpha1.DepartureNoticePrefix + "0123456789abcdef0123456789abcdef"
	cm.Annotations = map[string]string{v1alpha1.PeerClusterIDAnnotation: string(about)}
	cm.Data = map[string]string{v1alpha1.DepartureKey: record}
	for _, m := range mods {
		m(cm)
	}
	return cm
}

// TestNotices: a cluster that reads none of its members (its credentials revoked while
// it was down) and reads their departure notices forgets the group when a majority of
// the members record its departure there, and not on one member's notice alone; a
// notice about another cluster, a copy, or one holding more than this cluster's record
// counts as nothing.
func TestNotices(t *testing.T) {
	rec := "uid-l@" + at(1)
	tests := []struct {
		name    string
		notices map[string]*corev1.ConfigMap // by member name (a: idA, c: idC)
		wantErr map[string]string
		left    bool
	}{{
		name:    "two members of three record it: the local cluster forgets the group",
		notices: map[string]*corev1.ConfigMap{"a": notice(idL, rec), "c": notice(idL, rec)},
		left:    true,
	}, {
		name:    "one member alone removes nothing",
		notices: map[string]*corev1.ConfigMap{"a": notice(idL, rec)},
	}, {
		name:    "a notice about another cluster counts for nothing",
		notices: map[string]*corev1.ConfigMap{"a": notice(idL, rec), "c": notice(idX, rec)},
		wantErr: map[string]string{"c": "not this cluster"},
	}, {
		name: "a copy counts for nothing",
		notices: map[string]*corev1.ConfigMap{"a": notice(idL, rec), "c": notice(idL, rec, func(cm *corev1.ConfigMap) {
			cm.Annotations[v1alpha1.OwnershipAnnotation] = string(idA)
		})},
		wantErr: map[string]string{"c": "is a copy"},
	}, {
		name:    "a notice recording more than this cluster's departure counts for nothing",
		notices: map[string]*corev1.ConfigMap{"a": notice(idL, rec), "c": notice(idL, rec+",uid-x@"+at(1))},
		wantErr: map[string]string{"c": "not one record"},
	}, {
		name:    "a record dated ahead is refused",
		notices: map[string]*corev1.ConfigMap{"a": notice(idL, rec), "c": notice(idL, "uid-l@"+at(2))},
	}}
	ids := map[string]types.UID{"a": idA, "c": idC}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := input(objs(copies("a", idA), copies("c", idC)), nil, idA, idC)
			in.Now = t0.Add(1 * time.Hour)
			if tt.name == "a record dated ahead is refused" {
				in.Now = t0.Add(1*time.Hour + 30*time.Second)
			}
			for _, name := range []string{"a", "c"} {
				cm := tt.notices[name]
				if cm == nil {
					continue
				}
				v, err := NoticeView(name, ids[name], idL, cm)
				if want := tt.wantErr[name]; want != "" {
					if err == nil || !strings.Contains(err.Error(), want) {
						t.Fatalf("notice of %s: error %v, want one saying %q", name, err, want)
					}
					continue
				}
				if err != nil {
					t.Fatalf("notice of %s: %v", name, err)
				}
				in.Notices = append(in.Notices, v)
			}
			res := Plan(in)
			if _, left := res.Departed[idL]; left != tt.left {
				t.Errorf("local cluster departed: %v, want %v (writes %v)", left, tt.left, summary(res))
			}
			deletes := 0
			for _, w := range res.Writes {
				if w.Op == OpDelete {
					deletes++
				}
			}
			if tt.left && deletes != 4 || !tt.left && deletes != 0 {
				t.Errorf("%d deletes, want the Clusters and Secrets of a and c deleted only when departed:\n%v", deletes, summary(res))
			}
		})
	}
}
