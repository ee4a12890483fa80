// Command kubectl_complete-registry gives kubectl (1.26 or later) the shell completions
// of the plugin "kubectl registry": kubectl runs kubectl_complete-<plugin>, found on
// PATH, with the words typed after "kubectl registry", and reads cobra's completion
// output. This program runs "kubectl-registry __complete <args>", preferring the
// kubectl-registry next to itself (a krew installation, a release archive) over the one
// on PATH, and passes its output and exit code through.
package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
)

// plugin is the executable of the plugin.
const plugin = "kubectl-registry"

func main() {
	os.Exit(run(os.Args[1:]))
}

// run runs the plugin's __complete with args and returns the exit code.
func run(args []string) int {
	bin, err := findPlugin()
	if err != nil {
		fmt.Fprintf(os.Stderr, "kubectl_complete-registry: %v\n", err)
		return 2
	}
	cmd := exec.Command(bin, append([]string{"__complete"}, args...)...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	if err := cmd.Run(); err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) && ee.ExitCode() > 0 {
			return ee.ExitCode()
		}
		fmt.Fprintf(os.Stderr, "kubectl_complete-registry: %v\n", err)
		return 2
	}
	return 0
}

// findPlugin returns the plugin next to this executable (symbolic links resolved, as
// krew links its bin into its own bin directory), else the one on PATH.
func findPlugin() (string, error) {
	name := plugin
	if runtime.GOOS == "windows" {
		name += ".exe"
	}
	if self, err := os.Executable(); err == nil {
		if resolved, err := filepath.EvalSymlinks(self); err == nil {
			self = resolved
		}
		candidate := filepath.Join(filepath.Dir(self), name)
		if st, err := os.Stat(candidate); err == nil && !st.IsDir() {
			return candidate, nil
		}
	}
	bin, err := exec.LookPath(plugin)
	if err != nil {
		return "", fmt.Errorf("%s is neither next to this program nor on PATH: %w", plugin, err)
	}
	return bin, nil
}
