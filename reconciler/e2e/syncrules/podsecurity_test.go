package syncrules

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubectl-registry/kubectl-registry/reconciler/api/v1alpha1"
	"github.com/kubectl-registry/kubectl-registry/reconciler/e2e/harness"
	"github.com/kubectl-registry/kubectl-registry/reconciler/testbed"
)

const podSecurityNS = "psa-e2e"

// TestHostilePodTemplates: the admin of first is hostile and syncs Deployments, with the
// controllers' write RBAC extended to Deployments as docs/rules.md tells teams to: a
// privileged Deployment, a hostPath / Deployment, and one in the registry namespace
// running as cluster-registry-controller (whose pod would hold the controller's token).
// None is written on second or third, the rule's status there names the Pod Security
// check or the namespace, and a clean Deployment of the same rule is copied in the same
// run.
func TestHostilePodTemplates(t *testing.T) {
	testbed.SkipIfNoAssets(t)
	names := []string{"first", "second", "third"}
	cl := harness.FormGroup(t, bed, names...)
	first := cl["first"]
	ctx := context.Background()
	harness.Grant(t, cl, "apps", "deployments")
	for _, n := range names {
		if err := cl[n].Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: podSecurityNS}}); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
	deploy := func(namespace, name string, spec corev1.PodSpec) *appsv1.Deployment {
		labels := map[string]string{"app": name}
		return &appsv1.Deployment{
			ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, Labels: map[string]string{"psa-e2e": "yes"}},
			Spec: appsv1.DeploymentSpec{
				Selector: &metav1.LabelSelector{MatchLabels: labels},
				Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: spec},
			},
		}
	}
	container := corev1.Container{Name: "c", Image: "example.com/c:1"}
	privileged := container
	yes := true
	privileged.SecurityContext = &corev1.SecurityContext{Privileged: &yes}
	hostRoot := container
	hostRoot.VolumeMounts = []corev1.VolumeMount{{Name: "root", MountPath: "/host"}}
	deployments := []*appsv1.Deployment{
		deploy(podSecurityNS, "clean", corev1.PodSpec{Containers: []corev1.Container{container}}),
		deploy(podSecurityNS, "privileged", corev1.PodSpec{Containers: []corev1.Container{privileged}}),
		deploy(podSecurityNS, "hostpath", corev1.PodSpec{Containers: []corev1.Container{hostRoot},
			Volumes: []corev1.Volume{{Name: "root", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/"}}}}}),
		deploy(ns, "steal-token", corev1.PodSpec{ServiceAccountName: v1alpha1.ControllerName, Containers: []corev1.Container{container}}),
	}
	for _, d := range deployments {
		if err := first.Create(ctx, d); err != nil {
			t.Fatal(err)
		}
	}
	applyRule(t, first, `
apiVersion: clusterregistry.k8s.cisco.com/v1alpha1
kind: ResourceSyncRule
metadata: {name: hostile-workloads}
spec:
  groupVersionKind: {group: apps, version: v1, kind: Deployment}
  rules:
  - match: [{namespaces: [`+podSecurityNS+`, `+ns+`], labels: [{matchLabels: {psa-e2e: "yes"}}]}]
`)
	// The bed is shared by the package's tests: leave nothing of this one behind.
	t.Cleanup(func() {
		_ = first.Delete(ctx, &v1alpha1.ResourceSyncRule{ObjectMeta: metav1.ObjectMeta{Name: "hostile-workloads"}})
		for _, d := range deployments {
			_ = first.Delete(ctx, d)
		}
	})

	for _, target := range []string{"second", "third"} {
		c := cl[target]
		t.Run("refused and reported on "+target+", the clean one copied", func(t *testing.T) {
			harness.Eventually(t, 60*time.Second, "the clean Deployment on "+target+" and the refusals reported", func() error {
				if err := c.Get(ctx, client.ObjectKey{Namespace: podSecurityNS, Name: "clean"}, &appsv1.Deployment{}); err != nil {
					return fmt.Errorf("the clean Deployment: %w", err)
				}
				cnd, err := condition(c, "hostile-workloads", v1alpha1.RuleConditionDegraded, metav1.ConditionTrue, v1alpha1.ReasonCopiesFailing)
				if err != nil {
					return err
				}
				for _, part := range []string{
					"3 objects fail to sync",
					`violates PodSecurity "baseline:latest": privileged (container "c" must not set securityContext.privileged=true)`,
					`violates PodSecurity "baseline:latest": hostPath volumes (volume "root")`,
					"namespace " + ns + " is the registry's: a pod there would run as its ServiceAccounts",
				} {
					if !strings.Contains(cnd.Message, part) {
						return fmt.Errorf("the Degraded condition does not say %q: %s", part, cnd.Message)
					}
				}
				return nil
			})
		})
		t.Run("nothing refused is written on "+target, func(t *testing.T) {
			for _, key := range []client.ObjectKey{
				{Namespace: podSecurityNS, Name: "privileged"},
				{Namespace: podSecurityNS, Name: "hostpath"},
				{Namespace: ns, Name: "steal-token"},
			} {
				if err := c.Get(ctx, key, &appsv1.Deployment{}); !apierrors.IsNotFound(err) {
					t.Errorf("Deployment %s was written on %s (%v)", key, target, err)
				}
			}
		})
	}
}
