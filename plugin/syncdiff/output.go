package syncdiff

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"

	"github.com/pmezard/go-difflib/difflib"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/kubectl-registry/kubectl-registry/reconciler/planner"
)

// ExternalDiffEnv names the program that shows the update diffs, as for kubectl diff.
const ExternalDiffEnv = "KUBECTL_EXTERNAL_DIFF"

// serverFields are the metadata fields the API server sets: they are no part of a diff.
var serverFields = []string{"uid", "resourceVersion", "generation", "creationTimestamp", "managedFields", "selfLink"}

// forDiff returns a copy of u without the fields the API server sets and, unless the
// status is synced, without status.
func forDiff(u *unstructured.Unstructured, syncStatus bool) *unstructured.Unstructured {
	if u == nil {
		return nil
	}
	c := u.DeepCopy()
	for _, f := range serverFields {
		unstructured.RemoveNestedField(c.Object, "metadata", f)
	}
	if !syncStatus {
		unstructured.RemoveNestedField(c.Object, "status")
	}
	return c
}

func isSecret(u *unstructured.Unstructured) bool {
	return u != nil && u.GetKind() == "Secret" && (u.GetAPIVersion() == "v1")
}

// The masks of Secret values, kubectl diff's: a value both sides agree on, or that only
// one side has, is maskSame; a changed one is maskBefore on the live side and maskAfter
// on the desired one, so a diff still shows which keys changed.
const (
	maskSame   = "***"
	maskBefore = "*** (before)"
	maskAfter  = "*** (after)"
)

// maskSecrets replaces the values of the data and stringData of Secrets as kubectl
// diff's Masker does (maskSame, maskBefore, maskAfter). Either side may be nil; the
// objects are changed in place. kubectl masks data only; stringData is masked the same
// way. It is written here rather than imported: kubectl's diff package links kubectl's
// apply, delete and wait commands and client-go's informer cache, which sync-diff keeps
// out (docs/development.md, "Layers").
func maskSecrets(from, to *unstructured.Unstructured) error {
	if !isSecret(from) && !isSecret(to) {
		return nil
	}
	for _, field := range []string{"data", "stringData"} {
		before, err := secretValues(from, field)
		if err != nil {
			return err
		}
		after, err := secretValues(to, field)
		if err != nil {
			return err
		}
		changed := map[string]bool{}
		for k, v := range before {
			if a, ok := after[k]; ok && !equality.Semantic.DeepEqual(a, v) {
				changed[k] = true
			}
		}
		for k := range before {
			before[k] = maskSame
			if changed[k] {
				before[k] = maskBefore
			}
		}
		for k := range after {
			after[k] = maskSame
			if changed[k] {
				after[k] = maskAfter
			}
		}
		if err := setValues(from, field, before); err != nil {
			return err
		}
		if err := setValues(to, field, after); err != nil {
			return err
		}
	}
	return nil
}

// secretValues returns field of u (a map of values), nil when u or the field is absent.
func secretValues(u *unstructured.Unstructured, field string) (map[string]any, error) {
	if u == nil {
		return nil, nil
	}
	m, found, err := unstructured.NestedMap(u.Object, field)
	if err != nil {
		return nil, fmt.Errorf("masking the Secret's %s: %w", field, err)
	}
	if !found {
		return nil, nil
	}
	return m, nil
}

// setValues sets field of u to the masked values m, when u and m exist.
func setValues(u *unstructured.Unstructured, field string, m map[string]any) error {
	if u == nil || m == nil {
		return nil
	}
	if err := unstructured.SetNestedMap(u.Object, m, field); err != nil {
		return fmt.Errorf("masking the Secret's %s: %w", field, err)
	}
	return nil
}

// diffPair returns the live and the desired object of an item as they are compared:
// server-set fields dropped, Secret data masked unless showSecrets.
func diffPair(it Item, showSecrets bool) (live, desired *unstructured.Unstructured) {
	live = forDiff(it.live, it.syncStatus)
	if it.Object != nil && it.Action != string(planner.ActionDelete) {
		desired = forDiff(it.Object, it.syncStatus)
	}
	if it.Action == string(planner.ActionCreate) {
		live = nil
	}
	if !showSecrets {
		if err := maskSecrets(live, desired); err != nil {
			// Never show what could not be masked.
			for _, u := range []*unstructured.Unstructured{live, desired} {
				if u != nil {
					unstructured.RemoveNestedField(u.Object, "data")
					unstructured.RemoveNestedField(u.Object, "stringData")
				}
			}
		}
	}
	return live, desired
}

func toYAML(u *unstructured.Unstructured) string {
	if u == nil {
		return ""
	}
	b, err := yaml.Marshal(u.Object)
	if err != nil {
		return fmt.Sprintf("# cannot render: %v\n", err)
	}
	return string(b)
}

// unifiedDiff is the diff of the live against the desired object.
func unifiedDiff(it Item, showSecrets bool) string {
	live, desired := diffPair(it, showSecrets)
	path := objectPath(it)
	d, err := difflib.GetUnifiedDiffString(difflib.UnifiedDiff{
		A: difflib.SplitLines(toYAML(live)), B: difflib.SplitLines(toYAML(desired)),
		FromFile: "live/" + it.Cluster + "/" + path, ToFile: "desired/" + it.Cluster + "/" + path,
		Context: 3,
	})
	if err != nil {
		return fmt.Sprintf("# cannot diff: %v\n", err)
	}
	return d
}

// objectPath names an object like kubectl diff names its files: group.version.Kind.namespace.name.
func objectPath(it Item) string {
	gv := strings.ReplaceAll(it.APIVersion, "/", ".")
	parts := []string{gv, it.Kind}
	if it.Namespace != "" {
		parts = append(parts, it.Namespace)
	}
	return strings.Join(append(parts, it.Name), ".")
}

func objectRef(it Item) string {
	if it.Namespace == "" {
		return it.Kind + " " + it.Name
	}
	return it.Kind + " " + it.Namespace + "/" + it.Name
}

// printText prints the plan of one cluster for a human.
func printText(w io.Writer, v *view, items []Item, verbose, showSecrets, external bool) {
	counts := map[string]int{}
	for _, it := range items {
		counts[it.Action]++
	}
	var summary []string
	order := []string{"create", "update", "replace", "delete", "conflict", ActionFailed}
	var others []string
	for a := range counts {
		if !slices.Contains(order, a) && a != string(planner.ActionNone) {
			others = append(others, a)
		}
	}
	sort.Strings(others)
	for _, a := range append(order, others...) {
		if counts[a] > 0 {
			summary = append(summary, fmt.Sprintf("%d %s", counts[a], a))
		}
	}
	summary = append(summary, fmt.Sprintf("%d unchanged", counts[string(planner.ActionNone)]))
	fmt.Fprintf(w, "cluster %s (context %s): %s\n", v.Name(), v.Context, strings.Join(summary, ", "))
	for _, it := range items {
		if !it.difference() && !verbose {
			continue
		}
		action := it.Action
		if !it.difference() {
			action = "unchanged"
		}
		var detail []string
		if it.Membership {
			detail = append(detail, "membership")
		}
		if it.Rule != "" {
			detail = append(detail, "rule "+it.Rule)
		}
		if it.From != "" {
			detail = append(detail, "from "+it.From)
		}
		ref := objectRef(it)
		if it.Kind == "" {
			ref = "-"
		}
		line := fmt.Sprintf("  %-9s %s", action, ref)
		if len(detail) > 0 {
			line += " (" + strings.Join(detail, ", ") + ")"
		}
		if it.Reason != "" {
			line += ": " + it.Reason
		}
		fmt.Fprintln(w, line)
		if len(it.Losing) > 0 {
			// Several sources offer the object: which one it follows, and why.
			fmt.Fprintf(w, "    origin %s (from %s): %s\n", it.Origin, it.From, it.Why)
			for _, l := range it.Losing {
				fmt.Fprintf(w, "    not from %s (origin %s, rule %s): %s\n", l.From, l.Origin, l.Rule, l.Why)
			}
		}
		if showsDiff(it) && !external {
			for _, l := range strings.SplitAfter(unifiedDiff(it, showSecrets), "\n") {
				if l != "" {
					fmt.Fprint(w, "    "+l)
				}
			}
		}
	}
}

// showsDiff reports whether the item changes an object that is there: an update, or a
// membership replace (or any op that writes over the live object).
func showsDiff(it Item) bool {
	return it.Object != nil && it.live != nil && it.Action != string(planner.ActionCreate) && it.difference()
}

// plan is the machine-readable output of -o json|yaml.
type plan struct {
	Items []Item `json:"items"`
	// Errors are the clusters or peers that could not be read: the plan is incomplete.
	Errors []string `json:"errors,omitempty"`
}

func printPlan(w io.Writer, format string, items []Item, errs []string, showSecrets bool) error {
	out := plan{Items: make([]Item, 0, len(items)), Errors: errs}
	for _, it := range items {
		if it.Object != nil {
			_, it.Object = diffPair(it, showSecrets)
			if it.Object != nil {
				unstructured.RemoveNestedField(it.Object.Object, "metadata", "uid")
			}
		}
		out.Items = append(out.Items, it)
	}
	b, err := json.MarshalIndent(out, "", "  ")
	if err != nil {
		return err
	}
	if format == "yaml" {
		if b, err = yaml.JSONToYAML(b); err != nil {
			return err
		}
		_, err = w.Write(b)
		return err
	}
	_, err = fmt.Fprintf(w, "%s\n", b)
	return err
}

var externalArg = regexp.MustCompile(`^[a-zA-Z0-9-=]+$`)

// externalDiff runs the KUBECTL_EXTERNAL_DIFF program on two directories holding the
// live and the desired objects of the creates, updates and deletes, as kubectl diff
// runs it: the first word of the variable is the program, the extra words are passed as
// flags when they are made of letters, digits, "-" and "=" only (the others are dropped,
// with a warning), then the two directories. The program's exit code 1 means
// differences.
func externalDiff(items []Item, showSecrets bool, out, errOut io.Writer) error {
	env := os.Getenv(ExternalDiffEnv)
	words := strings.Fields(env)
	if len(words) == 0 {
		return nil
	}
	dir, err := os.MkdirTemp("", "sync-diff-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	liveDir, desiredDir := filepath.Join(dir, "LIVE"), filepath.Join(dir, "MERGED")
	for _, d := range []string{liveDir, desiredDir} {
		if err := os.Mkdir(d, 0o700); err != nil {
			return err
		}
	}
	found := false
	for _, it := range items {
		switch it.Action {
		case string(planner.ActionNone), string(planner.ActionConflict), ActionFailed:
			continue
		}
		if it.Object == nil && it.live == nil {
			continue
		}
		found = true
		live, desired := diffPair(it, showSecrets)
		name := it.Cluster + "." + objectPath(it)
		if live != nil {
			if err := os.WriteFile(filepath.Join(liveDir, name), []byte(toYAML(live)), 0o600); err != nil {
				return err
			}
		}
		if desired != nil {
			if err := os.WriteFile(filepath.Join(desiredDir, name), []byte(toYAML(desired)), 0o600); err != nil {
				return err
			}
		}
	}
	if !found {
		return nil
	}
	var args []string
	for _, a := range words[1:] {
		if !externalArg.MatchString(a) {
			fmt.Fprintf(errOut, "warning: %s: ignoring the argument %q: only letters, digits, '-' and '=' are allowed\n", ExternalDiffEnv, a)
			continue
		}
		args = append(args, a)
	}
	cmd := exec.Command(words[0], append(args, liveDir, desiredDir)...)
	cmd.Stdout, cmd.Stderr = out, errOut
	if err := cmd.Run(); err != nil {
		if ee, ok := errors.AsType[*exec.ExitError](err); ok && ee.ExitCode() == 1 {
			return nil
		}
		return fmt.Errorf("running %s=%q: %w", ExternalDiffEnv, env, err)
	}
	return nil
}
