package edit

import (
	"fmt"

	"k8s.io/kubectl/pkg/cmd/util/editor"
)

// editorEnvs are the environment variables that name the editor, in order, as for
// kubectl edit; without them the editor is vi (notepad on Windows).
var editorEnvs = []string{"KUBE_EDITOR", "EDITOR"}

// launchEditor runs the editor on path with kubectl's editor package, as kubectl edit
// does: an editor with arguments ("code --wait") is split on spaces, or run by the shell
// when it holds quotes; the terminal is restored and signals are trapped while it runs.
// The editor talks to the terminal (the process's standard streams), not to the
// command's IOStreams.
func launchEditor(path string) error {
	if err := editor.NewDefaultEditor(editorEnvs).Launch(path); err != nil {
		return fmt.Errorf("running the editor (set KUBE_EDITOR or EDITOR to choose another): %w", err)
	}
	return nil
}
