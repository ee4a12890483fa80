package main

import (
	"os"
	"path"
	"regexp"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// The Argo CD Application and the Flux HelmRelease of docs/install.md are rendered here
// as those tools render a Helm source from this repository, with Helm's own library:
// Argo CD runs `helm template` of the Application's path with the release name of
// spec.source.helm.releaseName (the Application's name when unset), the destination's
// namespace, the CRDs unless skipCrds, and valuesObject; Flux's helm-controller installs
// the chart of spec.chart.spec.chart with spec.releaseName, into spec.targetNamespace,
// with the CRDs (install.crds Create) and spec.values. Argo CD and Flux themselves are
// not run (no image of theirs can be pulled here); what they do with the rendered
// objects, an apply to the destination cluster, is what TestInstallPathsFormAGroup
// does with helm install.

// argoBlock and fluxBlock find the examples in the docs' yaml blocks.
var (
	argoBlock = regexp.MustCompile("(?s)```yaml\n(apiVersion: argoproj.io/v1alpha1\nkind: Application\n.*?)```")
	fluxBlock = regexp.MustCompile("(?s)```yaml\n(apiVersion: source.toolkit.fluxcd.io/v1\nkind: GitRepository\n.*?)```")
)

// repoURL is where the examples take the chart from.
const repoURL = "github.com/kubectl-registry/kubectl-registry"

// releaseTag is a release tag, as an example's targetRevision or ref.tag must be.
var releaseTag = regexp.MustCompile(`^v\d+\.\d+\.\d+$`)

// argoApplication is what Argo CD reads of an Application with a Helm source.
type argoApplication struct {
	Metadata struct {
		Name string `json:"name"`
	} `json:"metadata"`
	Spec struct {
		Source struct {
			RepoURL        string `json:"repoURL"`
			TargetRevision string `json:"targetRevision"`
			Path           string `json:"path"`
			Helm           *struct {
				ReleaseName  string         `json:"releaseName"`
				SkipCrds     bool           `json:"skipCrds"`
				ValuesObject map[string]any `json:"valuesObject"`
			} `json:"helm"`
		} `json:"source"`
		Destination struct {
			Namespace string `json:"namespace"`
		} `json:"destination"`
	} `json:"spec"`
}

// fluxSource is what the examples' Flux documents hold: a GitRepository and a
// HelmRelease.
type fluxSource struct {
	Kind     string `json:"kind"`
	Metadata struct {
		Name string `json:"name"`
	} `json:"metadata"`
	Spec struct {
		// GitRepository
		URL string `json:"url"`
		Ref struct {
			Tag string `json:"tag"`
		} `json:"ref"`
		// HelmRelease
		ReleaseName     string `json:"releaseName"`
		TargetNamespace string `json:"targetNamespace"`
		Chart           struct {
			Spec struct {
				Chart     string `json:"chart"`
				SourceRef struct {
					Kind string `json:"kind"`
					Name string `json:"name"`
				} `json:"sourceRef"`
			} `json:"spec"`
		} `json:"chart"`
		Install struct {
			CRDs string `json:"crds"`
		} `json:"install"`
		Values map[string]any `json:"values"`
	} `json:"spec"`
}

// exampleFlags are install's flags for the examples' values (clusterName east, its
// endpoint).
var exampleFlags = []string{"--cluster-name", "east", "--api-server-endpoint", "https://east.example.com:6443"}

// docBlock returns the first submatch of re in docs/install.md.
func docBlock(t *testing.T, re *regexp.Regexp, what string) string {
	t.Helper()
	doc, err := os.ReadFile(installDoc)
	if err != nil {
		t.Fatal(err)
	}
	m := re.FindSubmatch(doc)
	if m == nil {
		t.Fatalf("%s shows no %s in a yaml block", installDoc, what)
	}
	return string(m[1])
}

// TestArgoCDExample renders the chart as Argo CD renders the Application of
// docs/install.md and compares the objects with install's for the same settings.
func TestArgoCDExample(t *testing.T) {
	var app argoApplication
	if err := yaml.Unmarshal([]byte(docBlock(t, argoBlock, "Argo CD Application")), &app); err != nil {
		t.Fatal(err)
	}
	src := app.Spec.Source
	if !strings.HasSuffix(strings.TrimSuffix(src.RepoURL, ".git"), repoURL) || !releaseTag.MatchString(src.TargetRevision) {
		t.Errorf("the Application's source is %s at %q, want this repository at a release tag", src.RepoURL, src.TargetRevision)
	}
	if want := path.Join("manifests", chartDir); src.Path != want {
		t.Errorf("the Application's path is %q, want the chart, %q", src.Path, want)
	}
	if src.Helm == nil {
		t.Fatal("the Application has no helm source")
	}
	release := src.Helm.ReleaseName
	if release == "" {
		release = app.Metadata.Name
	}
	ch := loadChart(t)
	if src.Helm.SkipCrds {
		t.Error("the Application skips the CRDs, which install applies")
	}
	got, err := helmTemplateAs(t, ch, release, app.Spec.Destination.Namespace, src.Helm.ValuesObject)
	if err != nil {
		t.Fatalf("rendering the chart as the Application does: %v", err)
	}
	compareObjects(t, "the Argo CD Application of docs/install.md", installDryRun(t, append([]string{"--namespace", app.Spec.Destination.Namespace}, exampleFlags...)...), got)
}

// TestFluxExample renders the chart as Flux's helm-controller installs the HelmRelease
// of docs/install.md from its GitRepository and compares the objects with install's for
// the same settings.
func TestFluxExample(t *testing.T) {
	var repo, release *fluxSource
	for _, doc := range strings.Split(docBlock(t, fluxBlock, "Flux GitRepository and HelmRelease"), "\n---\n") {
		var s fluxSource
		if err := yaml.Unmarshal([]byte(doc), &s); err != nil {
			t.Fatal(err)
		}
		switch s.Kind {
		case "GitRepository":
			repo = &s
		case "HelmRelease":
			release = &s
		}
	}
	if repo == nil || release == nil {
		t.Fatalf("the Flux example lacks a GitRepository (%v) or a HelmRelease (%v)", repo != nil, release != nil)
	}
	if !strings.HasSuffix(repo.Spec.URL, repoURL) || !releaseTag.MatchString(repo.Spec.Ref.Tag) {
		t.Errorf("the GitRepository is %s at %q, want this repository at a release tag", repo.Spec.URL, repo.Spec.Ref.Tag)
	}
	chart := release.Spec.Chart.Spec
	if chart.SourceRef.Kind != "GitRepository" || chart.SourceRef.Name != repo.Metadata.Name {
		t.Errorf("the HelmRelease's chart comes from %s %s, want the GitRepository %s", chart.SourceRef.Kind, chart.SourceRef.Name, repo.Metadata.Name)
	}
	if want := "./" + path.Join("manifests", chartDir); chart.Chart != want {
		t.Errorf("the HelmRelease's chart is %q, want %q", chart.Chart, want)
	}
	if release.Spec.Install.CRDs != "Create" && release.Spec.Install.CRDs != "CreateReplace" {
		t.Errorf("the HelmRelease installs the CRDs with policy %q, want Create or CreateReplace", release.Spec.Install.CRDs)
	}
	name := release.Spec.ReleaseName
	if name == "" {
		t.Error("the HelmRelease names no release: Flux would name it after its namespace and name")
	}
	got, err := helmTemplateAs(t, loadChart(t), name, release.Spec.TargetNamespace, release.Spec.Values)
	if err != nil {
		t.Fatalf("rendering the chart as the HelmRelease does: %v", err)
	}
	compareObjects(t, "the Flux HelmRelease of docs/install.md", installDryRun(t, append([]string{"--namespace", release.Spec.TargetNamespace}, exampleFlags...)...), got)
}
