package issue

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kubectl-registry/kubectl-registry/reconciler/api/v1alpha1"
	"github.com/kubectl-registry/kubectl-registry/reconciler/credentials/seal"
)

const testNS = "cluster-registry"

// TestKeyCondition: the local Cluster's ReaderKeyReady condition for each state of the
// key pair, with a message that says what to do.
func TestKeyCondition(t *testing.T) {
	key, err := seal.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	ref := v1alpha1.ReadersNamespace(testNS) + "/" + v1alpha1.ReaderKeySecretName
	apiErr := fmt.Errorf("reading the key Secret %s: %w", ref, apierrors.NewNotFound(schema.GroupResource{Resource: "namespaces"}, v1alpha1.ReadersNamespace(testNS)))
	invalid := fmt.Errorf("%w: Secret %s (delete it to make a new key pair): bad length", ErrInvalidKeySecret, ref)
	type want struct {
		Status  corev1.ConditionStatus
		Reason  string
		Message []string // substrings
	}
	tests := []struct {
		name  string
		state KeyState
		want  *want // nil: no condition
	}{
		{"not reported yet", KeyState{}, nil},
		{"not reported yet, a key given", KeyState{Key: key}, nil},
		{"advertised", KeyState{Key: key, Reported: true},
			&want{corev1.ConditionTrue, v1alpha1.ReasonReaderKeyAdvertised, []string{ref, seal.Fingerprint(key.PublicKey())}}},
		{"the Secret cannot be read", KeyState{Err: apiErr, Reported: true},
			&want{corev1.ConditionFalse, v1alpha1.ReasonReaderKeySecretFailed, []string{apiErr.Error(), "kubectl registry install", "issue it none"}}},
		{"the key cannot be advertised", KeyState{Key: key, Err: errors.New("advertising the public key on the local Cluster: forbidden"), Reported: true},
			&want{corev1.ConditionFalse, v1alpha1.ReasonReaderKeySecretFailed, []string{"advertising the public key", "patch this Cluster"}}},
		{"the Secret holds no valid key", KeyState{Err: invalid, Reported: true},
			&want{corev1.ConditionFalse, v1alpha1.ReasonReaderKeyInvalid, []string{invalid.Error(), "once the Secret is deleted"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, ok := KeyCondition(tt.state, testNS)
			var got *want
			if ok {
				if c.Type != v1alpha1.ClusterConditionReaderKeyReady {
					t.Errorf("type %s, want %s", c.Type, v1alpha1.ClusterConditionReaderKeyReady)
				}
				got = &want{Status: c.Status, Reason: c.Reason}
				if tt.want != nil {
					for _, m := range tt.want.Message {
						if strings.Contains(c.Message, m) {
							got.Message = append(got.Message, m)
						}
					}
				}
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("KeyCondition (-want +got; Message lists the expected parts found in %q):\n%s", c.Message, diff)
			}
		})
	}
}
