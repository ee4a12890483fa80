package syncdiff

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// TestMaskSecrets masks data and stringData of Secrets with kubectl diff's masks, on
// either side or both, and leaves other kinds alone.
func TestMaskSecrets(t *testing.T) {
	secret := func(data, stringData map[string]any) *unstructured.Unstructured {
		u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Secret"}}
		if data != nil {
			u.Object["data"] = data
		}
		if stringData != nil {
			u.Object["stringData"] = stringData
		}
		return u
	}
	tests := []struct {
		name             string
		from, to         *unstructured.Unstructured
		wantFrom, wantTo *unstructured.Unstructured
	}{
		{
			name:     "changed, same, added and removed keys",
			from:     secret(map[string]any{"changed": "YQ==", "same": "eA==", "removed": "cg=="}, map[string]any{"s": "one"}),
			to:       secret(map[string]any{"changed": "Yg==", "same": "eA==", "added": "YQ=="}, map[string]any{"s": "two"}),
			wantFrom: secret(map[string]any{"changed": "*** (before)", "same": "***", "removed": "***"}, map[string]any{"s": "*** (before)"}),
			wantTo:   secret(map[string]any{"changed": "*** (after)", "same": "***", "added": "***"}, map[string]any{"s": "*** (after)"}),
		},
		{
			name:   "created",
			to:     secret(map[string]any{"k": "dg=="}, map[string]any{"s": "v"}),
			wantTo: secret(map[string]any{"k": "***"}, map[string]any{"s": "***"}),
		},
		{
			name:     "a value that reads like a mask is masked too",
			from:     secret(map[string]any{"k": "*** (after)"}, nil),
			to:       secret(map[string]any{"k": "*** (after)"}, nil),
			wantFrom: secret(map[string]any{"k": "***"}, nil),
			wantTo:   secret(map[string]any{"k": "***"}, nil),
		},
		{
			name:     "deleted",
			from:     secret(map[string]any{"k": "dg=="}, nil),
			wantFrom: secret(map[string]any{"k": "***"}, nil),
		},
		{
			name:     "not a Secret",
			from:     &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "data": map[string]any{"k": "v"}}},
			wantFrom: &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "data": map[string]any{"k": "v"}}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := maskSecrets(tt.from, tt.to); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.wantFrom, tt.from); diff != "" {
				t.Errorf("from (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.wantTo, tt.to); diff != "" {
				t.Errorf("to (-want +got):\n%s", diff)
			}
		})
	}
}
