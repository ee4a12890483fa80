package upgrade

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubectl-registry/kubectl-registry/reconciler/api/v1alpha1"
	"github.com/kubectl-registry/kubectl-registry/reconciler/buildinfo"
	"github.com/kubectl-registry/kubectl-registry/reconciler/e2e/harness"
	"github.com/kubectl-registry/kubectl-registry/reconciler/testbed"
)

// What the test upgrades from and to.
const (
	// envPreviousRef names the release to upgrade from: a tag, branch or commit of this
	// repository. Unset, the latest v* tag reachable from HEAD that is not HEAD itself.
	envPreviousRef = "REGISTRY_PREVIOUS_REF"
	// envNewVersion is the version stamped into this tree's binary (make test-upgrade
	// passes make build's); unset, what `git describe` says.
	envNewVersion = "REGISTRY_NEW_VERSION"
	// envNewBinary replaces this tree's binary with another one (a candidate build; also
	// how the test is shown to fail with a binary that breaks the upgrade).
	envNewBinary = "REGISTRY_NEW_BINARY"
)

// The clusters, upgraded in this order, and the namespace of the ConfigMaps synced.
var names = []string{"a", "b", "c"}

const syncNS = "upgrade"

var bed *testbed.Bed

// previous is the release the group is formed with, resolved once by TestMain; skip
// says why the test cannot run (no previous release in this checkout).
var previous struct {
	root, ref, version string
	skip               string
	err                error
}

func TestMain(m *testing.M) {
	previous.root, previous.ref, previous.version, previous.skip, previous.err = resolvePrevious(context.Background())
	if previous.skip != "" || previous.err != nil || os.Getenv("KUBEBUILDER_ASSETS") == "" {
		os.Exit(m.Run()) // the test skips or fails: start no API servers
	}
	// No CRDs: each install applies its own version's, as on a real cluster.
	os.Exit(testbed.Main(m, testbed.Options{Names: names}, &bed))
}

// resolvePrevious finds the release to upgrade from: REGISTRY_PREVIOUS_REF, else the
// latest v* tag merged into HEAD that is not on HEAD's commit. skip is set when there is
// none (a clone without tags, or no release yet), err when the named ref is not there.
func resolvePrevious(ctx context.Context) (root, ref, version, skip string, err error) {
	const how = "fetch the tags (git fetch --tags) or name the release to upgrade from: make test-upgrade REGISTRY_PREVIOUS_REF=<tag or commit>"
	root, err = harness.ModuleRoot()
	if err != nil {
		return "", "", "", "", err
	}
	if _, err := harness.Git(ctx, root, "rev-parse", "--is-inside-work-tree"); err != nil {
		return root, "", "", fmt.Sprintf("%s is not a git checkout (%v): the previous release is built from the git history", root, err), nil
	}
	if ref = os.Getenv(envPreviousRef); ref == "" {
		head, err := harness.Git(ctx, root, "rev-parse", "HEAD")
		if err != nil {
			return root, "", "", "", err
		}
		tags, err := harness.Git(ctx, root, "tag", "--merged", "HEAD", "--list", "v*", "--sort=-v:refname")
		if err != nil {
			return root, "", "", "", err
		}
		for _, tag := range strings.Fields(tags) {
			commit, err := harness.Git(ctx, root, "rev-parse", tag+"^{commit}")
			if err != nil {
				return root, "", "", "", err
			}
			if commit != head {
				ref = tag
				break
			}
		}
		if ref == "" {
			return root, "", "", fmt.Sprintf("no release tag (v*) before HEAD in this checkout, nothing to upgrade from: %s", how), nil
		}
	}
	commit, err := harness.Git(ctx, root, "rev-parse", "--verify", "--quiet", ref+"^{commit}")
	if err != nil {
		return root, "", "", "", fmt.Errorf("%s=%s is not a commit of %s: %w", envPreviousRef, ref, root, err)
	}
	return root, ref, describe(ctx, root, commit), "", nil
}

// describe is the version make build stamps into a build of commit: the nearest v* tag
// (exactly the tag on a release's commit), else a development version of the commit.
func describe(ctx context.Context, root, commit string) string {
	if v, err := harness.Git(ctx, root, "describe", "--tags", "--match", "v*", commit); err == nil {
		return v
	}
	return "v0.0.0-dev+" + commit[:12]
}

// binaries builds the previous release's binary from the git history and this tree's
// (or takes REGISTRY_NEW_BINARY), each stamped with its version.
func binaries(t *testing.T) (oldBin, oldVersion, newBin, newVersion string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	dir := t.TempDir()
	src := filepath.Join(dir, "src")
	if err := harness.ExportRef(ctx, previous.root, previous.ref, src); err != nil {
		t.Fatal(err)
	}
	oldBin = filepath.Join(dir, "kubectl-registry-previous")
	start := time.Now()
	if err := harness.BuildVersion(ctx, src, previous.version, oldBin); err != nil {
		t.Fatalf("building the previous release %s: %v", previous.ref, err)
	}
	t.Logf("built %s (%s) in %s", previous.ref, previous.version, time.Since(start).Round(time.Second))

	newVersion = os.Getenv(envNewVersion)
	if newVersion == "" {
		// Not the default version: a binary stamped with it would report the version the
		// Go toolchain derives from the checkout instead.
		if v, err := harness.Git(ctx, previous.root, "describe", "--tags", "--match", "v*", "--dirty"); err == nil {
			newVersion = v
		} else if head, err := harness.Git(ctx, previous.root, "rev-parse", "HEAD"); err == nil {
			newVersion = "v0.0.0-dev+" + head[:12]
		} else {
			t.Fatal(err)
		}
	}
	if newBin = os.Getenv(envNewBinary); newBin != "" {
		out, err := exec.Command(newBin, "version").Output()
		t.Logf("%s=%s (%v): %s", envNewBinary, newBin, err, out)
		return oldBin, previous.version, newBin, newVersion
	}
	newBin = filepath.Join(dir, "kubectl-registry")
	if err := harness.BuildVersion(ctx, previous.root, newVersion, newBin); err != nil {
		t.Fatalf("building this tree: %v", err)
	}
	return oldBin, previous.version, newBin, newVersion
}

// TestUpgrade forms a group of three with the previous release (its install, its
// controllers), then upgrades it the way docs/upgrade.md says, one member at a time:
// stop the controller, `install` with the newer binary, start the newer controller.
// ConfigMaps are created on every member throughout. After each step the member's RBAC
// is what the newer install renders (the older version's rules, labels and subjects
// pruned); every member sees every other Ready; the upgraded member's peers are cut off
// from it and reconnect, and an older member's controller restarts (an older member must
// keep reading an upgraded one with the credential it holds, not only over the watches it
// opened before); a ConfigMap made on each member then reaches every other, so the skewed
// group syncs both ways. Then the last member is rolled back to the previous release as
// docs/upgrade.md says (the older install, the newer objects deleted by hand: its RBAC is
// then what the older install renders) and the group syncs again. At no time does any
// member lose a ConfigMap it had (neither gone nor replaced by a new object).
func TestUpgrade(t *testing.T) {
	if previous.err != nil {
		t.Fatal(previous.err)
	}
	if previous.skip != "" {
		t.Skip(previous.skip)
	}
	testbed.SkipIfNoAssets(t)
	oldBin, oldVersion, newBin, newVersion := binaries(t)
	t.Logf("upgrading from %s (%s) to %s", previous.ref, oldVersion, newVersion)
	if err := buildinfo.Skew(oldVersion, newVersion); err != nil {
		t.Fatalf("the previous release is outside the supported skew: %v", err)
	}
	ctx := context.Background()

	admins := map[string]client.Client{} // through the proxy, as the group sees the cluster
	direct := map[string]client.Client{} // straight to the API server: never cut
	ctls := map[string]*harness.Controller{}
	for _, n := range names {
		c := bed.Cluster(n)
		var err error
		if admins[n], err = c.Client(); err != nil {
			t.Fatal(err)
		}
		scheme, err := testbed.NewScheme()
		if err != nil {
			t.Fatal(err)
		}
		if direct[n], err = client.New(c.DirectConfig(), client.Options{Scheme: scheme}); err != nil {
			t.Fatal(err)
		}
	}

	// The controllers started in a subtest run until the whole test ends (or they are
	// upgraded): their files and their Stop belong to the top-level test.
	top := t

	if !t.Run("the previous release forms a group", func(t *testing.T) {
		for _, n := range names {
			install(t, oldBin, n)
			ctls[n] = harness.ServeBinary(top, oldBin, bed.Cluster(n))
		}
		for _, n := range names {
			harness.Eventually(t, 90*time.Second, n+" bootstraps", func() error { return harness.LocalReady(admins[n], n) })
		}
		first := names[0]
		for _, n := range names[1:] {
			harness.Swap(t, admins[first], admins[n], first)
			harness.Swap(t, admins[n], admins[first], n)
		}
		groupReady(t, admins)
	}) {
		return
	}

	// Every member lets its peers read ConfigMaps and the writers of copies write them
	// (the seed's aggregated ClusterRoles, which both versions honour), and syncs the
	// ConfigMaps of syncNS from every peer.
	harness.Grant(t, admins, "", "configmaps")
	for n, cl := range admins {
		if err := cl.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: syncNS}}); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
		rule := &v1alpha1.ResourceSyncRule{
			ObjectMeta: metav1.ObjectMeta{Name: "upgrade-configmaps"},
			Spec: v1alpha1.ResourceSyncRuleSpec{
				GVK:   v1alpha1.GroupVersionKind{Version: "v1", Kind: "ConfigMap"},
				Rules: []v1alpha1.SyncRule{{Matches: []v1alpha1.SyncRuleMatch{{Namespaces: []string{syncNS}}}}},
			},
		}
		if err := cl.Create(ctx, rule); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatalf("the rule on %s: %v", n, err)
		}
	}

	tr := startTraffic(t, direct)
	if !t.Run("the previous release syncs", func(t *testing.T) { tr.marker(t, "previous") }) {
		return
	}

	for i, n := range names {
		ok := t.Run("upgrade "+n, func(t *testing.T) {
			// docs/upgrade.md: stop nothing by hand in a cluster (install rolls the
			// Deployment); here the controller is a process, stopped before install.
			ctls[n].Stop(t)
			install(t, newBin, n)
			installedAsRendered(t, newBin, n, admins[n])
			ctls[n] = harness.ServeBinary(top, newBin, bed.Cluster(n))
			harness.Eventually(t, 60*time.Second, n+" runs the newer controller", func() error {
				var c v1alpha1.Cluster
				if err := admins[n].Get(ctx, client.ObjectKey{Name: n}, &c); err != nil {
					return err
				}
				if c.Status.ControllerVersion != newVersion {
					return fmt.Errorf("the local Cluster %s reports controller %q, want %s", n, c.Status.ControllerVersion, newVersion)
				}
				return nil
			})
			groupReady(t, admins)

			// The older members read n over new connections, with what they hold.
			if err := bed.Cluster(n).Cut(); err != nil {
				t.Fatal(err)
			}
			time.Sleep(3 * time.Second) // > peer-health-interval x peer-failure-threshold
			if err := bed.Cluster(n).Heal(); err != nil {
				t.Fatal(err)
			}
			groupReady(t, admins)

			// An older member whose controller restarts (a rescheduled pod) connects to
			// the upgraded members afresh, with the credentials it holds.
			if last := names[len(names)-1]; i < len(names)-1 {
				ctls[last].Stop(t)
				ctls[last] = harness.ServeBinary(top, oldBin, bed.Cluster(last))
				groupReady(t, admins)
			}
			tr.marker(t, fmt.Sprintf("step%d", i+1))
		})
		if !ok {
			break
		}
	}

	// docs/upgrade.md, "Rolling back": the last member goes back to the previous release.
	if !t.Failed() {
		last := names[len(names)-1]
		t.Run("roll back "+last, func(t *testing.T) {
			ctls[last].Stop(t)
			install(t, oldBin, last)
			rollbackLeftovers(t, admins[last], newBin, oldBin, last)
			installedAsRendered(t, oldBin, last, admins[last])
			ctls[last] = harness.ServeBinary(top, oldBin, bed.Cluster(last))
			groupReady(t, admins)
			if err := bed.Cluster(last).Cut(); err != nil {
				t.Fatal(err)
			}
			time.Sleep(3 * time.Second)
			if err := bed.Cluster(last).Heal(); err != nil {
				t.Fatal(err)
			}
			groupReady(t, admins)
			tr.marker(t, "rollback")
		})
	}

	tr.stop(t)
	if !t.Failed() {
		t.Run("every ConfigMap made during the upgrade is everywhere", func(t *testing.T) {
			tr.everywhere(t, 120*time.Second)
		})
	}
	if v := tr.violations(); len(v) > 0 {
		t.Errorf("%d ConfigMaps disappeared from a member during the upgrade:\n%s", len(v), strings.Join(v, "\n"))
	}
	t.Logf("%d ConfigMaps made, each checked on %d members every %s", tr.count(), len(names), observeEvery)
}

// install runs binary's `install` against cluster n of the bed, as a user upgrading
// does (the Deployment it applies runs nothing in the test bed: the controllers are
// processes), and logs what it changed.
func install(t *testing.T, binary, n string) {
	t.Helper()
	c := bed.Cluster(n)
	out, err := exec.Command(binary, "install", "--kubeconfig", bed.KubeconfigPath, "--context", n,
		"--cluster-name", n, "--api-server-endpoint", c.Host()).CombinedOutput()
	if err != nil {
		t.Fatalf("%s install on %s: %v\n%s", filepath.Base(binary), n, err, out)
	}
	var changed []string
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if !strings.HasSuffix(line, " unchanged") {
			changed = append(changed, line)
		}
	}
	t.Logf("%s install on %s (%d lines, those not unchanged):\n%s", filepath.Base(binary), n, strings.Count(string(out), "\n"), strings.Join(changed, "\n"))
}

// installedAsRendered checks that after binary's install on cluster n, the RBAC objects
// are exactly what that install renders: the labels, rules, role and subjects another
// version applied and this one does not are gone (server-side apply prunes them), and no
// RBAC object another install applied is left, which docs/upgrade.md promises. The rules
// of an aggregated ClusterRole are the aggregation controller's, not compared.
func installedAsRendered(t *testing.T, binary, n string, cl client.Client) {
	t.Helper()
	objs, err := harness.InstallObjects(binary, "--cluster-name", n, "--api-server-endpoint", bed.Cluster(n).Host())
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range objs {
		if want.GroupVersionKind().Group != rbacv1.GroupName {
			continue
		}
		got := &unstructured.Unstructured{}
		got.SetGroupVersionKind(want.GroupVersionKind())
		if err := cl.Get(context.Background(), client.ObjectKeyFromObject(want), got); err != nil {
			t.Errorf("on %s, %s %s: %v", n, want.GetKind(), want.GetName(), err)
			continue
		}
		fields := []string{"roleRef", "subjects", "rules", "aggregationRule"}
		if _, aggregated := want.Object["aggregationRule"]; aggregated {
			fields = []string{"aggregationRule"}
		}
		wantFields, gotFields := map[string]any{"labels": want.GetLabels()}, map[string]any{"labels": got.GetLabels()}
		for _, f := range fields {
			wantFields[f], gotFields[f] = want.Object[f], got.Object[f]
		}
		if diff := cmp.Diff(wantFields, gotFields, cmpopts.EquateEmpty()); diff != "" {
			t.Errorf("on %s, %s %s is not what install renders (-rendered +live):\n%s", n, want.GetKind(), want.GetName(), diff)
		}
	}

	// Nothing an install applied is left that this one does not render.
	rendered := map[string]bool{}
	for _, o := range objs {
		rendered[o.GetKind()+" "+o.GetNamespace()+"/"+o.GetName()] = true
	}
	for _, kind := range []string{"ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding"} {
		list := &unstructured.UnstructuredList{}
		list.SetGroupVersionKind(rbacv1.SchemeGroupVersion.WithKind(kind + "List"))
		if err := cl.List(context.Background(), list); err != nil {
			t.Fatal(err)
		}
		for _, o := range list.Items {
			key := kind + " " + o.GetNamespace() + "/" + o.GetName()
			if !rendered[key] && appliedByInstall(&o) {
				t.Errorf("on %s, %s is left behind: an install applied it and this one does not render it", n, key)
			}
		}
	}
}

// appliedByInstall reports whether an install applied o (a server-side apply by its field
// manager; the controller writes with the same manager name, by update).
func appliedByInstall(o *unstructured.Unstructured) bool {
	for _, m := range o.GetManagedFields() {
		if m.Manager == v1alpha1.FieldManager && m.Operation == metav1.ManagedFieldsOperationApply {
			return true
		}
	}
	return false
}

// rollbackLeftovers deletes what docs/upgrade.md says to delete by hand after rolling the
// member n back: the objects the newer install renders and the older one does not (for a
// rollback to 1af999a, the six objects the page names).
func rollbackLeftovers(t *testing.T, cl client.Client, newBin, oldBin, n string) {
	t.Helper()
	render := func(bin string) []*unstructured.Unstructured {
		objs, err := harness.InstallObjects(bin, "--cluster-name", n, "--api-server-endpoint", bed.Cluster(n).Host())
		if err != nil {
			t.Fatal(err)
		}
		return objs
	}
	key := func(o *unstructured.Unstructured) string {
		return o.GroupVersionKind().GroupKind().String() + " " + o.GetNamespace() + "/" + o.GetName()
	}
	older := map[string]bool{}
	for _, o := range render(oldBin) {
		older[key(o)] = true
	}
	for _, o := range render(newBin) {
		if older[key(o)] {
			continue
		}
		t.Logf("on %s, deleting %s, which the older install does not render", n, key(o))
		if err := cl.Delete(context.Background(), o); client.IgnoreNotFound(err) != nil {
			t.Errorf("deleting %s: %v", key(o), err)
		}
	}
}

// groupReady waits until every member sees every other Ready and ClustersSynced.
func groupReady(t *testing.T, admins map[string]client.Client) {
	t.Helper()
	harness.Eventually(t, 120*time.Second, "every member sees every other Ready", func() error {
		for _, n := range names {
			if err := harness.Members(admins[n], n, names...); err != nil {
				return err
			}
		}
		return nil
	})
}

// observeEvery is how often the traffic lists the ConfigMaps of every member.
const observeEvery = 300 * time.Millisecond

// cmPrefix starts the name of every ConfigMap the test makes.
const cmPrefix = "cm-"

// traffic makes ConfigMaps on every member in turn, and watches that none a member has
// held disappears from it: each member's ConfigMaps of syncNS are listed every
// observeEvery, straight from its API server, and one seen before must be there with the
// same UID (deleted and made again counts as lost).
type traffic struct {
	clients map[string]client.Client
	cancel  context.CancelFunc
	wg      sync.WaitGroup

	mu      sync.Mutex
	made    map[string]string               // ConfigMap name -> the member it was made on
	seen    map[string]map[string]types.UID // member -> ConfigMap name -> UID
	lost    []string
	errs    []string
	stopped bool
}

func startTraffic(t *testing.T, clients map[string]client.Client) *traffic {
	ctx, cancel := context.WithCancel(context.Background())
	tr := &traffic{clients: clients, cancel: cancel, made: map[string]string{}, seen: map[string]map[string]types.UID{}}
	for _, n := range names {
		tr.seen[n] = map[string]types.UID{}
	}
	tr.wg.Add(2)
	go func() {
		defer tr.wg.Done()
		for i := 0; ; i++ {
			origin := names[i%len(names)]
			tr.make(ctx, origin, fmt.Sprintf("%s%s-%d", cmPrefix, origin, i))
			select {
			case <-ctx.Done():
				return
			case <-time.After(time.Second):
			}
		}
	}()
	go func() {
		defer tr.wg.Done()
		for {
			for _, n := range names {
				tr.observe(ctx, n)
			}
			select {
			case <-ctx.Done():
				return
			case <-time.After(observeEvery):
			}
		}
	}()
	t.Cleanup(func() { tr.stop(t) })
	return tr
}

// make creates the ConfigMap name on origin.
func (tr *traffic) make(ctx context.Context, origin, name string) {
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: syncNS, Name: name}, Data: map[string]string{"origin": origin}}
	err := tr.clients[origin].Create(ctx, cm)
	tr.mu.Lock()
	defer tr.mu.Unlock()
	switch {
	case err == nil:
		tr.made[name] = origin
	case ctx.Err() == nil:
		tr.errs = append(tr.errs, fmt.Sprintf("creating %s on %s: %v", name, origin, err))
	}
}

// observe lists the ConfigMaps of member n and records those it lost.
func (tr *traffic) observe(ctx context.Context, n string) {
	var list corev1.ConfigMapList
	if err := tr.clients[n].List(ctx, &list, client.InNamespace(syncNS)); err != nil {
		return // a failed list observes nothing
	}
	now := map[string]types.UID{}
	for _, cm := range list.Items {
		if strings.HasPrefix(cm.Name, cmPrefix) {
			now[cm.Name] = cm.UID
		}
	}
	tr.mu.Lock()
	defer tr.mu.Unlock()
	at := time.Now().Format("15:04:05.000")
	for name, uid := range tr.seen[n] {
		switch got, ok := now[name]; {
		case !ok:
			tr.lost = append(tr.lost, fmt.Sprintf("%s: %s lost %s (made on %s)", at, n, name, tr.made[name]))
			delete(tr.seen[n], name)
		case got != uid:
			tr.lost = append(tr.lost, fmt.Sprintf("%s: %s replaced %s (UID %s, then %s)", at, n, name, uid, got))
		}
	}
	for name, uid := range now {
		tr.seen[n][name] = uid
	}
}

// marker makes one ConfigMap on every member and waits until each is on every member.
func (tr *traffic) marker(t *testing.T, step string) {
	t.Helper()
	ctx := context.Background()
	for _, origin := range names {
		tr.make(ctx, origin, fmt.Sprintf("%s%s-%s", cmPrefix, step, origin))
	}
	harness.Eventually(t, 90*time.Second, "the markers of "+step+" reach every member", func() error {
		var missing []string
		for _, origin := range names {
			name := fmt.Sprintf("%s%s-%s", cmPrefix, step, origin)
			for _, n := range names {
				var cm corev1.ConfigMap
				if err := tr.clients[n].Get(ctx, client.ObjectKey{Namespace: syncNS, Name: name}, &cm); err != nil {
					missing = append(missing, fmt.Sprintf("%s on %s (%v)", name, n, apierrors.ReasonForError(err)))
				}
			}
		}
		if len(missing) > 0 {
			return errors.New("missing " + strings.Join(missing, ", "))
		}
		return nil
	})
}

// everywhere waits until every ConfigMap made is on every member, holding its origin.
func (tr *traffic) everywhere(t *testing.T, timeout time.Duration) {
	t.Helper()
	ctx := context.Background()
	tr.mu.Lock()
	made := make(map[string]string, len(tr.made))
	for k, v := range tr.made {
		made[k] = v
	}
	tr.mu.Unlock()
	harness.Eventually(t, timeout, fmt.Sprintf("the %d ConfigMaps made reach every member", len(made)), func() error {
		var missing []string
		for _, n := range names {
			var list corev1.ConfigMapList
			if err := tr.clients[n].List(ctx, &list, client.InNamespace(syncNS)); err != nil {
				return err
			}
			have := map[string]string{}
			for _, cm := range list.Items {
				have[cm.Name] = cm.Data["origin"]
			}
			for name, origin := range made {
				if have[name] != origin {
					missing = append(missing, name+" on "+n)
				}
			}
		}
		if len(missing) > 0 {
			sort.Strings(missing)
			return fmt.Errorf("%d missing: %s", len(missing), strings.Join(missing[:min(len(missing), 10)], ", "))
		}
		return nil
	})
	tr.mu.Lock()
	defer tr.mu.Unlock()
	if len(tr.errs) > 0 {
		t.Errorf("the traffic failed to create:\n%s", strings.Join(tr.errs, "\n"))
	}
}

// stop ends the traffic (once).
func (tr *traffic) stop(t *testing.T) {
	tr.mu.Lock()
	stopped := tr.stopped
	tr.stopped = true
	tr.mu.Unlock()
	if stopped {
		return
	}
	tr.cancel()
	tr.wg.Wait()
	// A last look at every member: a copy lost at the end counts too.
	for _, n := range names {
		tr.observe(context.Background(), n)
	}
}

func (tr *traffic) violations() []string {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return slices.Clone(tr.lost)
}

func (tr *traffic) count() int {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return len(tr.made)
}
