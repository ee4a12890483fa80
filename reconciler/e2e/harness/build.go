package harness

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// buildinfoVersion is the link-time variable of the binary's version (make build's
// -X flag; reconciler/buildinfo). The harness names it as a string: test infrastructure
// links nothing it does not use.
const buildinfoVersion = "github.com/kubectl-registry/kubectl-registry/reconciler/buildinfo.Version"

// ModuleRoot returns the directory of this module's go.mod: the root of the checkout
// the tests run in.
func ModuleRoot() (string, error) {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %w", err)
	}
	gomod := strings.TrimSpace(string(out))
	if gomod == "" || gomod == os.DevNull {
		return "", fmt.Errorf("not inside a Go module")
	}
	return filepath.Dir(gomod), nil
}

// BuildVersion builds ./cmd/kubectl-registry of the module at dir into out as make build
// does (static, -trimpath), its version stamped as version (buildinfo.Version, what
// `version` prints and a controller reports in its Cluster's status.controllerVersion).
func BuildVersion(ctx context.Context, dir, version, out string) error {
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath",
		"-ldflags", "-X "+buildinfoVersion+"="+version,
		"-o", out, "./cmd/kubectl-registry")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build in %s: %w\n%s", dir, err, b)
	}
	return nil
}

// Git runs git in the repository at root and returns its trimmed standard output.
func Git(ctx context.Context, root string, args ...string) (string, error) {
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, "git", append([]string{"-C", root}, args...)...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("git %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return strings.TrimSpace(stdout.String()), nil
}

// ExportRef writes the tree of the git ref (a tag, branch or commit) of the repository at
// root into dir, as `git archive` exports it: the repository is left as it is (no
// worktree is registered, nothing to clean up when a test is killed).
func ExportRef(ctx context.Context, root, ref, dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	archive := exec.CommandContext(ctx, "git", "-C", root, "archive", "--format=tar", ref)
	extract := exec.CommandContext(ctx, "tar", "-x", "-C", dir)
	pipe, err := archive.StdoutPipe()
	if err != nil {
		return err
	}
	var archiveErr, extractErr bytes.Buffer
	archive.Stderr, extract.Stderr, extract.Stdin = &archiveErr, &extractErr, pipe
	if err := archive.Start(); err != nil {
		return fmt.Errorf("git archive %s: %w", ref, err)
	}
	if err := extract.Run(); err != nil {
		_ = archive.Wait()
		return fmt.Errorf("extracting git archive %s: %w: %s", ref, err, strings.TrimSpace(extractErr.String()))
	}
	if err := archive.Wait(); err != nil {
		return fmt.Errorf("git archive %s: %w: %s", ref, err, strings.TrimSpace(archiveErr.String()))
	}
	return nil
}
