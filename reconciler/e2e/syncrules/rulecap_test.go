package syncrules

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubectl-registry/kubectl-registry/reconciler/api/v1alpha1"
	"github.com/kubectl-registry/kubectl-registry/reconciler/e2e/harness"
	"github.com/kubectl-registry/kubectl-registry/reconciler/testbed"
)

// TestTooManyRules: first's admin makes 300 rules; the built-in rule copies them to every
// member. Second, running at most 20 (--max-rules), runs the first 20 by name and says
// on every other one that it does not run (Ready False, TooManyRules), keeps running, and
// its RSS stays far under the Deployment's limit.
func TestTooManyRules(t *testing.T) {
	testbed.SkipIfNoAssets(t)
	const nRules, maxRules = 300, 20
	names := []string{"first", "second", "third"}
	cl, controllers := harness.FormGroupControllers(t, bed, func(string) []string {
		return []string{fmt.Sprintf("--max-rules=%d", maxRules)}
	}, names...)
	first, second := cl["first"], cl["second"]
	ctx := context.Background()
	ruleName := func(i int) string { return fmt.Sprintf("many-%03d", i) }
	t.Cleanup(func() {
		for _, n := range names {
			for i := range nRules {
				_ = cl[n].Delete(ctx, &v1alpha1.ResourceSyncRule{ObjectMeta: metav1.ObjectMeta{Name: ruleName(i)}})
			}
		}
	})
	before, err := rssBytes(controllers["second"].Pid())
	if err != nil {
		t.Fatal(err)
	}
	peak := before
	for i := range nRules {
		r := &v1alpha1.ResourceSyncRule{ObjectMeta: metav1.ObjectMeta{Name: ruleName(i)}, Spec: v1alpha1.ResourceSyncRuleSpec{
			GVK:   v1alpha1.GroupVersionKind{Version: "v1", Kind: "ConfigMap"},
			Rules: []v1alpha1.SyncRule{{Matches: []v1alpha1.SyncRuleMatch{{Namespaces: []string{fmt.Sprintf("many-%03d", i)}}}}},
		}}
		if err := first.Create(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	harness.Eventually(t, 180*time.Second, "second runs the first 20 rules by name and says the others do not run", func() error {
		if rss, err := rssBytes(controllers["second"].Pid()); err == nil && rss > peak {
			peak = rss
		}
		var l v1alpha1.ResourceSyncRuleList
		if err := second.List(ctx, &l); err != nil {
			return err
		}
		// The cap takes the first rules by name among all of second's rules: the tests
		// before this one leave rules on the shared bed, and those count too.
		var all []string
		for _, r := range l.Items {
			if r.Name != v1alpha1.CoreRuleName {
				all = append(all, r.Name)
			}
		}
		sort.Strings(all)
		runs := map[string]bool{}
		for _, n := range all[:min(maxRules, len(all))] {
			runs[n] = true
		}
		capped, running, mine := 0, 0, 0
		for _, r := range l.Items {
			if !strings.HasPrefix(r.Name, "many-") {
				continue
			}
			mine++
			c := meta.FindStatusCondition(r.Status.Conditions, v1alpha1.RuleConditionReady)
			if c == nil {
				return fmt.Errorf("rule %s has no Ready condition yet", r.Name)
			}
			past := !runs[r.Name]
			switch {
			case past && (c.Status != metav1.ConditionFalse || c.Reason != v1alpha1.ReasonTooManyRules || !strings.Contains(c.Message, v1alpha1.ReasonTooManyRules)):
				return fmt.Errorf("rule %s, past the cap: Ready %s %s %q", r.Name, c.Status, c.Reason, c.Message)
			case past:
				capped++
			case c.Reason == v1alpha1.ReasonTooManyRules || strings.Contains(c.Message, v1alpha1.ReasonTooManyRules):
				return fmt.Errorf("rule %s, under the cap, says %q", r.Name, c.Message)
			default:
				running++
			}
		}
		if mine != nRules || capped < nRules-maxRules || capped+running != nRules {
			return fmt.Errorf("%d of %d rules here, %d capped, %d running; want all, at least %d capped", mine, nRules, capped, running, nRules-maxRules)
		}
		return nil
	})
	if !controllers["second"].Running() {
		t.Fatal("second's controller exited")
	}
	t.Logf("second's controller RSS: %d MiB before, %d MiB at most with %d rules, %d of them run", before>>20, peak>>20, nRules, maxRules)
	if peak > 160<<20 {
		t.Errorf("second's controller reached %d MiB (the Deployment's limit is %d MiB)", peak>>20, controllerMemoryLimit>>20)
	}
}
