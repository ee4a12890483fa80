package edit

import (
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strings"

	"k8s.io/cli-runtime/pkg/genericiooptions"
)

// DefaultEditor is the editor used when neither $KUBE_EDITOR nor $EDITOR is set.
const DefaultEditor = "vi"

// editorCommand returns the editor to run, as kubectl chooses it: $KUBE_EDITOR, then
// $EDITOR, then vi.
func editorCommand() string {
	for _, env := range []string{"KUBE_EDITOR", "EDITOR"} {
		if e := strings.TrimSpace(os.Getenv(env)); e != "" {
			return e
		}
	}
	return DefaultEditor
}

// launchEditor runs the editor on path with the streams of the command (the terminal)
// and waits for it. An editor with arguments ("code --wait") is run by the shell, with
// the path as a separate, unquoted-safe argument.
func launchEditor(path string, streams genericiooptions.IOStreams) error {
	editor := editorCommand()
	var cmd *exec.Cmd
	switch {
	case !strings.ContainsAny(editor, " \t"):
		cmd = exec.Command(editor, path)
	case runtime.GOOS == "windows":
		cmd = exec.Command("cmd", "/C", editor+" "+path)
	default:
		cmd = exec.Command("sh", "-c", editor+` "$1"`, "kubectl-registry-editor", path)
	}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = streams.In, streams.Out, streams.ErrOut
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("running the editor %q (set KUBE_EDITOR or EDITOR to choose another): %w", editor, err)
	}
	return nil
}
