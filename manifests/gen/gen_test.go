package main

import (
	"flag"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

var update = flag.Bool("update", false, "rewrite the Helm chart and the kustomize base (what make charts does)")

// manifestsDir is the manifests directory, seen from this package.
const manifestsDir = ".."

// TestGeneratedFilesAreCurrent fails when the committed chart or kustomize base differ
// from what the generator makes of the embedded manifests: someone changed a manifest
// (or the generator) without running make charts.
func TestGeneratedFilesAreCurrent(t *testing.T) {
	files, err := Generate()
	if err != nil {
		t.Fatal(err)
	}
	if *update {
		if err := Write(manifestsDir, files); err != nil {
			t.Fatal(err)
		}
	}
	diffs, err := Diff(manifestsDir, files)
	if err != nil {
		t.Fatal(err)
	}
	if len(diffs) > 0 {
		t.Errorf("the Helm chart (manifests/%s) and the kustomize base (manifests/%s) are not what the embedded manifests generate:\n  %s\nrun make charts (or go test ./manifests/gen -run TestGeneratedFilesAreCurrent -update) and commit the result",
			chartDir, kustomizeDir, strings.Join(diffs, "\n  "))
	}
}

func TestTemplateDoc(t *testing.T) {
	tests := []struct {
		name     string
		doc      string
		want     string
		replicas int
		wantErr  string
	}{
		{
			name: "template delimiters of the manifests are escaped",
			doc:  "description: in {{ $labels.namespace }}\n",
			want: "description: in {{ \"{{\" }} $labels.namespace {{ \"}}\" }}\n",
		},
		{
			name: "a knob in a scalar",
			doc:  "metadata:\n  namespace: " + sentinelNamespace + "\n",
			want: "metadata:\n  namespace: {{ .Release.Namespace | quote }}\n",
		},
		{
			name: "a knob inside a scalar, twice",
			doc:  "name: system:" + sentinelNamespace + "-x-" + sentinelNamespace + "\n",
			want: `name: {{ print "system:" .Release.Namespace "-x-" .Release.Namespace | quote }}` + "\n",
		},
		{
			name: "an optional flag is rendered only when set",
			doc:  "args:\n- --cluster-name=" + sentinelClusterName + "\n- --x\n",
			want: "args:\n{{- if .Values.clusterName }}\n- {{ print \"--cluster-name=\" .Values.clusterName | quote }}\n{{- end }}\n- --x\n",
		},
		{
			name: "two optional knobs in one line need both",
			doc:  "- " + sentinelClusterName + "@" + sentinelEndpoint + "\n",
			want: "{{- if and .Values.clusterName .Values.apiServerEndpoint }}\n- {{ print .Values.clusterName \"@\" (include \"kubectl-registry.apiServerEndpoint\" .) | quote }}\n{{- end }}\n",
		},
		{
			name:     "replicas",
			doc:      "spec:\n  replicas: 7919\n",
			want:     "spec:\n  replicas: {{ .Values.replicas | int }}\n",
			replicas: 1,
		},
		{
			name:    "a quoted scalar is refused",
			doc:     "name: '" + sentinelNamespace + "'\n",
			wantErr: "not in a plain scalar",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, replicas, err := templateDoc(tt.doc)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("templateDoc() error = %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("templateDoc() (-want +got):\n%s", diff)
			}
			if replicas != tt.replicas {
				t.Errorf("templateDoc() replaced the replicas %d times, want %d", replicas, tt.replicas)
			}
		})
	}
}

func TestSplitImage(t *testing.T) {
	tests := []struct {
		image, repository, tag string
		wantErr                bool
	}{
		{image: "ghcr.io/a/b:v1.2.3", repository: "ghcr.io/a/b", tag: "v1.2.3"},
		{image: "localhost:5000/b:dev", repository: "localhost:5000/b", tag: "dev"},
		{image: "localhost:5000/b", wantErr: true},
		{image: "b@sha256:0123", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.image, func(t *testing.T) {
			repository, tag, err := splitImage(tt.image)
			if (err != nil) != tt.wantErr {
				t.Fatalf("splitImage(%q) error = %v, want error %v", tt.image, err, tt.wantErr)
			}
			if diff := cmp.Diff([]string{tt.repository, tt.tag}, []string{repository, tag}); !tt.wantErr && diff != "" {
				t.Errorf("splitImage(%q) (-want +got):\n%s", tt.image, diff)
			}
		})
	}
}
