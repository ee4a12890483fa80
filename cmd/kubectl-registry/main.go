// Command kubectl-registry is the kubectl plugin "kubectl registry" and the registry
// controller it installs ("kubectl registry serve").
package main

import (
	"os"

	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/kubectl-registry/kubectl-registry/plugin"
)

func main() {
	os.Exit(plugin.Main(genericiooptions.IOStreams{In: os.Stdin, Out: os.Stdout, ErrOut: os.Stderr}, nil))
}
