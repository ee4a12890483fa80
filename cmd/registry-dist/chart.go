package main

import (
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strings"
)

// chartName is the Helm chart's name (manifests/gen writes it to Chart.yaml).
const chartName = "kubectl-registry"

// chartArchiveName is the chart's archive for a krew version (v1.2.3): Helm's own name,
// <chart>-<chart version>.tgz, the chart version being the release's without the v.
func chartArchiveName(version string) string {
	return fmt.Sprintf("%s-%s.tgz", chartName, strings.TrimPrefix(version, "v"))
}

// kustomizeArchiveName is the archive of the kustomize base and the monitoring pack.
func kustomizeArchiveName(version string) string {
	return fmt.Sprintf("%s-kustomize_%s.tar.gz", binaryName, version)
}

// chartVersionLine and chartAppVersionLine are the lines of Chart.yaml packageChart stamps.
var (
	chartVersionLine    = regexp.MustCompile(`(?m)^version: .*$`)
	chartAppVersionLine = regexp.MustCompile(`(?m)^appVersion: .*$`)
)

// packageChart writes the chart in dir (manifests/helm/kubectl-registry) as Helm packages
// it: a gzip-compressed tar whose entries are <chart>/<file>, with the release's version
// (version without the v, appVersion with it) in Chart.yaml. It returns the archive's
// path.
func packageChart(dir, version, outDir string) (string, error) {
	entries, err := dirEntries(dir, chartName, true)
	if err != nil {
		return "", fmt.Errorf("reading the chart: %w", err)
	}
	stamped := false
	for i, e := range entries {
		if e.Name != chartName+"/Chart.yaml" {
			continue
		}
		data := string(e.Data)
		if n, m := len(chartVersionLine.FindAllString(data, -1)), len(chartAppVersionLine.FindAllString(data, -1)); n != 1 || m != 1 {
			return "", fmt.Errorf("%s/Chart.yaml has %d version and %d appVersion lines, want one of each", dir, n, m)
		}
		data = chartVersionLine.ReplaceAllLiteralString(data, "version: "+strings.TrimPrefix(version, "v"))
		data = chartAppVersionLine.ReplaceAllLiteralString(data, fmt.Sprintf("appVersion: %q", version))
		entries[i].Data = []byte(data)
		stamped = true
	}
	if !stamped {
		return "", fmt.Errorf("%s has no Chart.yaml", dir)
	}
	archive := filepath.Join(outDir, chartArchiveName(version))
	return archive, writeArchive(archive, entries)
}

// packageKustomize writes the kustomize base (under kustomize/) and the monitoring pack
// (under monitoring/, its top-level files: its testdata stays out) into one archive, so
// that an overlay unpacked next to them refers to ../kustomize and ../monitoring. It
// returns the archive's path.
func packageKustomize(baseDir, monitoringDir, version, outDir string) (string, error) {
	base, err := dirEntries(baseDir, "kustomize", true)
	if err != nil {
		return "", fmt.Errorf("reading the kustomize base: %w", err)
	}
	monitoring, err := dirEntries(monitoringDir, "monitoring", false)
	if err != nil {
		return "", fmt.Errorf("reading the monitoring pack: %w", err)
	}
	for _, entries := range [][]archiveEntry{base, monitoring} {
		if !containsEntry(entries, "kustomization.yaml") {
			return "", fmt.Errorf("%s has no kustomization.yaml", entries[0].Name)
		}
	}
	archive := filepath.Join(outDir, kustomizeArchiveName(version))
	return archive, writeArchive(archive, append(base, monitoring...))
}

func containsEntry(entries []archiveEntry, base string) bool {
	for _, e := range entries {
		if strings.Count(e.Name, "/") == 1 && path.Base(e.Name) == base {
			return true
		}
	}
	return false
}

// dirEntries reads the regular files of dir (of its subdirectories too when recursive)
// as archive entries named prefix/<path in dir>, in lexical order.
func dirEntries(dir, prefix string, recursive bool) ([]archiveEntry, error) {
	var entries []archiveEntry
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if p != dir && !recursive {
				return fs.SkipDir
			}
			return nil
		}
		if !d.Type().IsRegular() {
			return fmt.Errorf("%s is not a regular file", p)
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		entries = append(entries, archiveEntry{Name: path.Join(prefix, filepath.ToSlash(rel)), Mode: 0o644, Data: data})
		return nil
	})
	if err != nil {
		return nil, err
	}
	if len(entries) == 0 {
		return nil, fmt.Errorf("%s holds no files", dir)
	}
	return entries, nil
}
