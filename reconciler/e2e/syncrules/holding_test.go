package syncrules

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubectl-registry/kubectl-registry/reconciler/api/v1alpha1"
	"github.com/kubectl-registry/kubectl-registry/reconciler/e2e/harness"
	"github.com/kubectl-registry/kubectl-registry/reconciler/testbed"
)

const holdNS = "hold-test"

// holdWindow is how long a copy that a local owner keeps changing must see no write of
// ours (the acceptance's 60 s).
const holdWindow = 60 * time.Second

func deployment(name string, replicas int32) *appsv1.Deployment {
	labels := map[string]string{"app": name}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: holdNS, Name: name},
		Spec: appsv1.DeploymentSpec{
			Replicas: &replicas,
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "registry.example/app:v1"}}},
			},
		},
	}
}

func ruleStatus(cl client.Client, name string) (*v1alpha1.ResourceSyncRule, error) {
	var r v1alpha1.ResourceSyncRule
	err := cl.Get(context.Background(), client.ObjectKey{Name: name}, &r)
	return &r, err
}

// condition returns the rule's condition of type t, or an error saying what it is.
func condition(cl client.Client, rule, t string, status metav1.ConditionStatus, reason string) (*metav1.Condition, error) {
	r, err := ruleStatus(cl, rule)
	if err != nil {
		return nil, err
	}
	c := meta.FindStatusCondition(r.Status.Conditions, t)
	if c == nil || c.Status != status || c.Reason != reason {
		return nil, fmt.Errorf("rule %s: condition %s is %+v, want %s/%s", rule, t, c, status, reason)
	}
	return c, nil
}

// TestHolding checks how rules hold their copies on three clusters, originals on first:
// ignoreFields lets a local owner (an HPA's spec.replicas) keep its value with no write
// of ours, while the same copy without it is held and the condition names the cure; a
// change the destination cannot apply (an immutable Job template) is reported, or with
// onImmutableChange Recreate recreated once; ReportOnly writes nothing and reports the
// drift; CreateOnly creates and then leaves the copy alone.
func TestHolding(t *testing.T) {
	testbed.SkipIfNoAssets(t)
	names := []string{"first", "second", "third"}
	cl, metricsURL := harness.FormGroupWithMetrics(t, bed, names...)
	first, second := cl["first"], cl["second"]
	ctx := context.Background()
	harness.Grant(t, cl, "apps", "deployments")
	harness.Grant(t, cl, "batch", "jobs")
	harness.Grant(t, cl, "", "configmaps")
	for _, n := range names {
		if err := cl[n].Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: holdNS}}); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
	writes := func(rule string) float64 {
		t.Helper()
		v, err := harness.MetricSum(metricsURL["second"], "kubectl_registry_sync_writes_total", `rule="`+rule+`"`)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}

	applyRule(t, first, `
apiVersion: clusterregistry.k8s.cisco.com/v1alpha1
kind: ResourceSyncRule
metadata: {name: hold-hpa}
spec:
  groupVersionKind: {group: apps, version: v1, kind: Deployment}
  ignoreFields: [spec.replicas]
  rules:
  - match: [{objectKey: {name: hpa-web, namespace: `+holdNS+`}}]
`)
	applyRule(t, first, `
apiVersion: clusterregistry.k8s.cisco.com/v1alpha1
kind: ResourceSyncRule
metadata: {name: hold-fight}
spec:
  groupVersionKind: {group: apps, version: v1, kind: Deployment}
  rules:
  - match: [{objectKey: {name: fight-web, namespace: `+holdNS+`}}]
`)
	for _, d := range []*appsv1.Deployment{deployment("hpa-web", 2), deployment("fight-web", 2)} {
		if err := first.Create(ctx, d); err != nil {
			t.Fatal(err)
		}
	}
	for _, name := range []string{"hpa-web", "fight-web"} {
		harness.Eventually(t, 60*time.Second, name+" copied to second", func() error {
			var d appsv1.Deployment
			return second.Get(ctx, client.ObjectKey{Namespace: holdNS, Name: name}, &d)
		})
	}

	t.Run("ignoreFields keeps an HPA's replicas; without it the copy is held and the cure named", func(t *testing.T) {
		before := writes("hold-hpa")
		// An HPA on second: it sets spec.replicas of both copies every second.
		stop := make(chan struct{})
		var wg sync.WaitGroup
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := int32(0); ; i++ {
				select {
				case <-stop:
					return
				case <-time.After(time.Second):
				}
				for _, name := range []string{"hpa-web", "fight-web"} {
					var d appsv1.Deployment
					if err := second.Get(ctx, client.ObjectKey{Namespace: holdNS, Name: name}, &d); err != nil {
						continue
					}
					n := 5 + i%2
					d.Spec.Replicas = &n
					_ = second.Update(ctx, &d)
				}
			}
		}()
		defer func() { close(stop); wg.Wait() }()

		harness.Eventually(t, holdWindow, "hold-fight held on second, naming ignoreFields", func() error {
			c, err := condition(second, "hold-fight", v1alpha1.RuleConditionDegraded, metav1.ConditionTrue, v1alpha1.ReasonChangedAfterWrite)
			if err != nil {
				return err
			}
			if !strings.Contains(c.Message, "spec.ignoreFields") || !strings.Contains(c.Message, "spec.replicas") {
				return fmt.Errorf("the message does not name the cure and the field: %s", c.Message)
			}
			return nil
		})
		deadline := time.Now().Add(holdWindow)
		for time.Now().Before(deadline) {
			time.Sleep(5 * time.Second)
			if w := writes("hold-hpa"); w != before {
				t.Fatalf("hold-hpa wrote %v times on second while the HPA owns spec.replicas, want 0", w-before)
			}
		}
		var d appsv1.Deployment
		if err := second.Get(ctx, client.ObjectKey{Namespace: holdNS, Name: "hpa-web"}, &d); err != nil {
			t.Fatal(err)
		}
		if *d.Spec.Replicas < 5 {
			t.Errorf("hpa-web on second has %d replicas: the HPA's value was not kept", *d.Spec.Replicas)
		}
		// The rest of the copy still follows the origin.
		// The Deployment controller writes the origin's status: retry on conflict.
		orig := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: holdNS, Name: "hpa-web"}}
		if err := harness.Update(ctx, first, orig, func() { orig.Spec.Template.Spec.Containers[0].Image = "registry.example/app:v2" }); err != nil {
			t.Fatal(err)
		}
		harness.Eventually(t, 30*time.Second, "the new image on second, the HPA's replicas kept", func() error {
			var d appsv1.Deployment
			if err := second.Get(ctx, client.ObjectKey{Namespace: holdNS, Name: "hpa-web"}, &d); err != nil {
				return err
			}
			if img := d.Spec.Template.Spec.Containers[0].Image; img != "registry.example/app:v2" {
				return fmt.Errorf("image %s", img)
			}
			if *d.Spec.Replicas == 2 {
				return fmt.Errorf("replicas restored to the origin's 2")
			}
			return nil
		})
	})

	t.Run("an immutable Job template change is reported, then recreated once with the opt-in", func(t *testing.T) {
		// The copy's template follows an annotation of the original (an override), so the
		// origin can change it as a user would change a Job's template: on the copies it is
		// an update of an immutable field.
		applyRule(t, first, `
apiVersion: clusterregistry.k8s.cisco.com/v1alpha1
kind: ResourceSyncRule
metadata: {name: hold-job}
spec:
  groupVersionKind: {group: batch, version: v1, kind: Job}
  rules:
  - match: [{objectKey: {name: migrate, namespace: `+holdNS+`}}]
    mutations:
      overrides:
      - path: spec.template.spec.containers[name=migrate].image
        value: '{{ index .Object.metadata.annotations "image" }}'
`)
		job := &batchv1.Job{
			ObjectMeta: metav1.ObjectMeta{Namespace: holdNS, Name: "migrate", Annotations: map[string]string{"image": "registry.example/migrate:v1"}},
			Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
				RestartPolicy: corev1.RestartPolicyNever,
				Containers:    []corev1.Container{{Name: "migrate", Image: "registry.example/migrate:v1"}},
			}}},
		}
		if err := first.Create(ctx, job); err != nil {
			t.Fatal(err)
		}
		var firstUID string
		harness.Eventually(t, 60*time.Second, "the Job copied to second with its own selector", func() error {
			var j batchv1.Job
			if err := second.Get(ctx, client.ObjectKey{Namespace: holdNS, Name: "migrate"}, &j); err != nil {
				return err
			}
			if j.Spec.Selector == nil || j.Spec.Selector.MatchLabels["batch.kubernetes.io/controller-uid"] != string(j.UID) {
				return fmt.Errorf("the copy's selector %v is not its own (uid %s)", j.Spec.Selector, j.UID)
			}
			firstUID = string(j.UID)
			return nil
		})
		// The Job controller writes the origin's status: retry on conflict.
		orig := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: holdNS, Name: "migrate"}}
		if err := harness.Update(ctx, first, orig, func() { orig.Annotations["image"] = "registry.example/migrate:v2" }); err != nil {
			t.Fatal(err)
		}
		harness.Eventually(t, 30*time.Second, "hold-job reports ImmutableField on second", func() error {
			c, err := condition(second, "hold-job", v1alpha1.RuleConditionDegraded, metav1.ConditionTrue, v1alpha1.ReasonImmutableField)
			if err != nil {
				return err
			}
			if !strings.Contains(c.Message, "spec.template") || !strings.Contains(c.Message, "onImmutableChange") {
				return fmt.Errorf("the message does not name the field and the opt-in: %s", c.Message)
			}
			return nil
		})
		// Not retried in a loop.
		refused := func() float64 {
			v, err := harness.MetricSum(metricsURL["second"], "kubectl_registry_sync_refused_writes_total", `rule="hold-job"`, `reason="ImmutableField"`)
			if err != nil {
				t.Fatal(err)
			}
			return v
		}
		r0 := refused()
		time.Sleep(10 * time.Second)
		if r := refused(); r != r0 {
			t.Errorf("the immutable copy was tried %v more times in 10 s, want 0", r-r0)
		}

		// first's controller writes the rule's status: retry on conflict.
		r := &v1alpha1.ResourceSyncRule{ObjectMeta: metav1.ObjectMeta{Name: "hold-job"}}
		if err := harness.Update(ctx, first, r, func() { r.Spec.OnImmutableChange = v1alpha1.ImmutableChangeRecreate }); err != nil {
			t.Fatal(err)
		}
		harness.Eventually(t, 60*time.Second, "the Job recreated on second with the new template", func() error {
			var j batchv1.Job
			if err := second.Get(ctx, client.ObjectKey{Namespace: holdNS, Name: "migrate"}, &j); err != nil {
				return err
			}
			if string(j.UID) == firstUID {
				return fmt.Errorf("not recreated yet")
			}
			if img := j.Spec.Template.Spec.Containers[0].Image; img != "registry.example/migrate:v2" {
				return fmt.Errorf("image %s", img)
			}
			return nil
		})
		recreates, err := harness.MetricSum(metricsURL["second"], "kubectl_registry_sync_writes_total", `rule="hold-job"`, `op="recreate"`)
		if err != nil {
			t.Fatal(err)
		}
		if recreates != 1 {
			t.Errorf("recreated %v times on second, want 1", recreates)
		}
		harness.Eventually(t, 30*time.Second, "hold-job healthy on second", func() error {
			_, err := condition(second, "hold-job", v1alpha1.RuleConditionDegraded, metav1.ConditionFalse, v1alpha1.ReasonAllSourcesOK)
			return err
		})
	})

	t.Run("ReportOnly writes nothing and reports the drift; CreateOnly creates and then leaves the copy", func(t *testing.T) {
		applyRule(t, first, `
apiVersion: clusterregistry.k8s.cisco.com/v1alpha1
kind: ResourceSyncRule
metadata: {name: hold-report}
spec:
  groupVersionKind: {version: v1, kind: ConfigMap}
  syncMode: ReportOnly
  rules:
  - match: [{objectKey: {name: report-me, namespace: `+holdNS+`}}]
`)
		applyRule(t, first, `
apiVersion: clusterregistry.k8s.cisco.com/v1alpha1
kind: ResourceSyncRule
metadata: {name: hold-create}
spec:
  groupVersionKind: {version: v1, kind: ConfigMap}
  syncMode: CreateOnly
  rules:
  - match: [{objectKey: {name: create-me, namespace: `+holdNS+`}}]
`)
		for _, name := range []string{"report-me", "create-me"} {
			if err := first.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: holdNS, Name: name}, Data: map[string]string{"v": "1"}}); err != nil {
				t.Fatal(err)
			}
		}
		harness.Eventually(t, 60*time.Second, "hold-report reports its drift on second", func() error {
			c, err := condition(second, "hold-report", v1alpha1.RuleConditionDrifted, metav1.ConditionTrue, v1alpha1.ReasonDrift)
			if err != nil {
				return err
			}
			r, _ := ruleStatus(second, "hold-report")
			if r.Status.Drift != 1 || !strings.Contains(c.Message, "report-me") {
				return fmt.Errorf("drift %d, message %s", r.Status.Drift, c.Message)
			}
			d, err := harness.MetricSum(metricsURL["second"], "kubectl_registry_sync_drift_objects", `rule="hold-report"`)
			if err != nil || d != 1 {
				return fmt.Errorf("drift metric %v (%v), want 1", d, err)
			}
			return nil
		})
		harness.Eventually(t, 60*time.Second, "create-me created on second", func() error {
			var c corev1.ConfigMap
			return second.Get(ctx, client.ObjectKey{Namespace: holdNS, Name: "create-me"}, &c)
		})
		var cm corev1.ConfigMap
		if err := second.Get(ctx, client.ObjectKey{Namespace: holdNS, Name: "report-me"}, &cm); !apierrors.IsNotFound(err) {
			t.Errorf("a ReportOnly rule wrote report-me on second (%v)", err)
		}
		// CreateOnly: an update at the origin and a local edit are left alone, and so is a
		// delete at the origin.
		// second's controller wrote this copy: retry on conflict.
		local := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: holdNS, Name: "create-me"}}
		if err := harness.Update(ctx, second, local, func() { local.Data["v"] = "local" }); err != nil {
			t.Fatal(err)
		}
		o := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: holdNS, Name: "create-me"}}
		if err := harness.Update(ctx, first, o, func() { o.Data["v"] = "2" }); err != nil {
			t.Fatal(err)
		}
		harness.Stays(t, 10*time.Second, "create-me on second keeps its local value", func() error {
			var c corev1.ConfigMap
			if err := second.Get(ctx, client.ObjectKey{Namespace: holdNS, Name: "create-me"}, &c); err != nil {
				return err
			}
			if c.Data["v"] != "local" {
				return fmt.Errorf("v = %q", c.Data["v"])
			}
			return nil
		})
		if w := writes("hold-report"); w != 0 {
			t.Errorf("hold-report wrote %v times on second, want 0", w)
		}
		if w, err := harness.MetricSum(metricsURL["second"], "kubectl_registry_sync_writes_total", `rule="hold-create"`); err != nil || w != 1 {
			t.Errorf("hold-create wrote %v times on second (%v), want 1 (the create)", w, err)
		}
	})
}
