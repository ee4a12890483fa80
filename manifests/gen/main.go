// Command gen writes the Helm chart (manifests/helm/kubectl-registry) and the kustomize
// base (manifests/kustomize) from the manifests `kubectl registry install` embeds
// (package manifests), so that the three install paths apply the same objects. Run it
// from the repository root with `make charts` (go run ./manifests/gen); a test of this
// package fails when the committed files differ from what it generates.
//
// Every file it writes is generated: edit the embedded manifests (or this generator) and
// run it again, never the output.
package main

import (
	"flag"
	"fmt"
	"os"
)

func main() {
	dir := flag.String("dir", "manifests", "the manifests directory: the chart goes to <dir>/"+chartDir+", the kustomize base to <dir>/"+kustomizeDir)
	flag.Parse()
	files, err := Generate()
	if err == nil {
		err = Write(*dir, files)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "gen:", err)
		os.Exit(1)
	}
	fmt.Fprintf(os.Stderr, "wrote %d files under %s/%s and %s/%s\n", len(files), *dir, chartDir, *dir, kustomizeDir)
}
