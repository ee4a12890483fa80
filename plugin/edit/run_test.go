package edit

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubectl-registry/kubectl-registry/plugin/internal/cmdutil"
	"github.com/kubectl-registry/kubectl-registry/plugin/internal/kube/kubefake"
	"github.com/kubectl-registry/kubectl-registry/plugin/internal/plugintest"
	"github.com/kubectl-registry/kubectl-registry/reconciler/api/v1alpha1"
)

// fakeFeature is the ClusterFeature gpu of context a, with a label.
func fakeFeature() *v1alpha1.ClusterFeature {
	return &v1alpha1.ClusterFeature{
		ObjectMeta: metav1.ObjectMeta{Name: "gpu", Labels: map[string]string{"tier": "one"}},
		Spec:       v1alpha1.ClusterFeatureSpec{FeatureName: "gpu"},
	}
}

// runFake runs "kubectl registry edit <args>" through the real command with f as its
// Factory and edit as the editor; it returns what the editor was given, what the
// command printed and its error.
func runFake(t *testing.T, f *kubefake.Factory, edit func(string) string, args ...string) (seen, stdout, stderr string, err error) {
	t.Helper()
	streams, _, out, errOut := genericiooptions.NewTestIOStreams()
	o := NewOptions(f, streams)
	o.Edit = func(path string) error {
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		seen = string(data)
		return os.WriteFile(path, []byte(edit(seen)), 0o600)
	}
	err = plugintest.RunVerb(t, newCmdEdit(o), args...)
	return seen, out.String(), errOut.String(), err
}

// featureOf returns the feature gpu of context name, or nil when it has none.
func featureOf(t *testing.T, f *kubefake.Factory, name string) *v1alpha1.ClusterFeature {
	t.Helper()
	var cf v1alpha1.ClusterFeature
	if err := f.Cluster(name).Client.Get(context.Background(), client.ObjectKey{Name: "gpu"}, &cf); err != nil {
		return nil
	}
	return &cf
}

// TestRunFake edits a ClusterFeature read from a and applies it to a and b (created
// there), without API servers: what the editor is given, the outcomes per context, a
// removed field, a cancelled edit, an edit that changes the name, and an unreachable
// context that keeps the edited file.
func TestRunFake(t *testing.T) {
	rename := func(s string) string { return strings.Replace(s, "featureName: gpu", "featureName: gpu-2", 1) }
	tests := []struct {
		name       string
		args       []string
		edit       func(string) string
		modify     func(*kubefake.Factory)
		wantOut    string
		wantErrOut string
		wantErr    []string
		// wantA and wantB are the featureName on a and b afterwards ("" for none).
		wantA, wantB string
		// wantLabels are the labels of a afterwards.
		wantLabels map[string]string
	}{
		{name: "configured on a, created on b", args: []string{"cf", "gpu", "--contexts", "a,b"}, edit: rename,
			wantOut: "a: clusterfeature.clusterregistry.k8s.cisco.com/gpu configured\nb: clusterfeature.clusterregistry.k8s.cisco.com/gpu created\n",
			wantA:   "gpu-2", wantB: "gpu-2", wantLabels: map[string]string{"tier": "one"}},
		{name: "TYPE/NAME, the current context, a label removed", args: []string{"clusterfeature/gpu"},
			edit:    func(s string) string { return strings.Replace(s, "  labels:\n    tier: one\n", "", 1) },
			wantOut: "a: clusterfeature.clusterregistry.k8s.cisco.com/gpu configured\n",
			wantA:   "gpu"},
		{name: "unchanged: cancelled", args: []string{"cf", "gpu", "--contexts", "a,b"}, edit: func(s string) string { return s },
			wantErrOut: CancelledMessage + "\n", wantA: "gpu", wantLabels: map[string]string{"tier": "one"}},
		{name: "emptied: cancelled", args: []string{"cf", "gpu"}, edit: func(string) string { return "# nothing\n" },
			wantErrOut: CancelledMessage + "\n", wantA: "gpu", wantLabels: map[string]string{"tier": "one"}},
		{name: "name changed", args: []string{"cf", "gpu", "--contexts", "a,b"},
			edit:    func(s string) string { return strings.Replace(s, "name: gpu\n", "name: cpu\n", 1) },
			wantErr: []string{`the name cannot be changed: "gpu", edited to "cpu"`, "the edited file is kept in"},
			wantA:   "gpu", wantLabels: map[string]string{"tier": "one"}},
		{name: "b unreachable", args: []string{"cf", "gpu", "--contexts", "a,b"}, edit: rename,
			modify:  func(f *kubefake.Factory) { f.Cluster("b").Err = errors.New("connection refused") },
			wantOut: "a: clusterfeature.clusterregistry.k8s.cisco.com/gpu configured\n",
			wantErr: []string{"editing failed on 1 of 2 contexts", "connection refused", "retry with: kubectl registry apply -f", "--contexts b"},
			wantA:   "gpu-2", wantLabels: map[string]string{"tier": "one"}},
		{name: "not found on the first context", args: []string{"cf", "gpu", "--contexts", "b,a"}, edit: rename,
			wantErr: []string{"b: clusterfeature.clusterregistry.k8s.cisco.com/gpu not found"},
			wantA:   "gpu", wantLabels: map[string]string{"tier": "one"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := kubefake.New([]string{"a"}, fakeFeature())
			f.Add("b")
			if tt.modify != nil {
				tt.modify(f)
			}
			seen, out, errOut, err := runFake(t, f, tt.edit, tt.args...)
			if len(tt.wantErr) == 0 && err != nil {
				t.Fatal(err)
			}
			if len(tt.wantErr) > 0 {
				plugintest.WantExitCode(t, err, cmdutil.ExitCodeError, tt.wantErr...)
				for _, s := range strings.Fields(err.Error()) {
					if strings.HasPrefix(s, os.TempDir()) {
						_ = os.Remove(strings.TrimSuffix(s, ","))
					}
				}
			}
			if diff := cmp.Diff(tt.wantOut, out); diff != "" {
				t.Errorf("stdout (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.wantErrOut, errOut); diff != "" {
				t.Errorf("stderr (-want +got):\n%s", diff)
			}
			if seen != "" && (!strings.Contains(seen, "# Read from context") || strings.Contains(seen, "resourceVersion")) {
				t.Errorf("the editor was given:\n%s", seen)
			}
			for name, want := range map[string]string{"a": tt.wantA, "b": tt.wantB} {
				got := ""
				if cf := featureOf(t, f, name); cf != nil {
					got = cf.Spec.FeatureName
				}
				if got != want {
					t.Errorf("featureName on %s = %q, want %q", name, got, want)
				}
			}
			if cf := featureOf(t, f, "a"); cf != nil {
				if diff := cmp.Diff(tt.wantLabels, cf.Labels); diff != "" {
					t.Errorf("labels on a (-want +got):\n%s", diff)
				}
			}
		})
	}
}
