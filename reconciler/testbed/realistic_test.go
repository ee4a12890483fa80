package testbed_test

import (
	"context"
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/kubectl-registry/kubectl-registry/reconciler/testbed"
)

// workloadTimeout bounds the wait for a workload controller's first reaction.
const workloadTimeout = 30 * time.Second

// TestDefaultNetwork checks that a bed that is not Realistic keeps envtest's service CIDR
// and kube-apiserver's NodePort range on every cluster: the default is unchanged.
func TestDefaultNetwork(t *testing.T) {
	b := needBed(t)
	for _, c := range b.Clusters {
		t.Run(c.Name, func(t *testing.T) {
			first, last := c.NodePortRange()
			got := fmt.Sprintf("%s %d-%d", c.ServiceCIDR(), first, last)
			if diff := cmp.Diff("10.0.0.0/24 30000-32767", got); diff != "" {
				t.Errorf("network (-want +got):\n%s", diff)
			}
			svc, err := clientset(t, c.Config).CoreV1().Services(metav1.NamespaceDefault).Get(t.Context(), "kubernetes", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if svc.Spec.ClusterIP != "10.0.0.1" {
				t.Errorf("the kubernetes Service has clusterIP %s, want 10.0.0.1", svc.Spec.ClusterIP)
			}
		})
	}
}

// TestRealistic starts a Realistic bed of two clusters of its own and checks that each
// allocates Service IPs and NodePorts from its own ranges and runs the workload
// controllers.
func TestRealistic(t *testing.T) {
	testbed.SkipIfNoAssets(t)
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	rb, err := testbed.Start(ctx, testbed.Options{Clusters: 2, Realistic: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := rb.Stop(); err != nil {
			t.Errorf("stopping the realistic bed: %v", err)
		}
	})

	wantNetworks := []string{"10.1.0.0/16 30000-30999", "10.2.0.0/16 31000-31999"}
	checks := []struct {
		name  string
		check func(t *testing.T, c *testbed.Cluster, cs kubernetes.Interface, ns string)
	}{
		{"a ClusterIP Service gets an IP of the cluster's range", checkClusterIP},
		{"a NodePort Service gets ports of the cluster's range", checkNodePort},
		{"a Deployment gets a ReplicaSet and a Pod", checkDeployment},
		{"a Job gets its generated selector and a Pod", checkJob},
		{"a StatefulSet gets its first Pod", checkStatefulSet},
		{"a Service with a selector gets an EndpointSlice", checkEndpointSlice},
	}
	for i, c := range rb.Clusters {
		t.Run(c.Name+"/network", func(t *testing.T) {
			first, last := c.NodePortRange()
			got := fmt.Sprintf("%s %d-%d", c.ServiceCIDR(), first, last)
			if diff := cmp.Diff(wantNetworks[i], got); diff != "" {
				t.Errorf("network (-want +got):\n%s", diff)
			}
		})
		cs := clientset(t, c.Config)
		ns := namespace(t, cs)
		for _, tt := range checks {
			t.Run(c.Name+"/"+tt.name, func(t *testing.T) {
				t.Parallel()
				tt.check(t, c, cs, ns)
			})
		}
	}
}

// labels are the Pod labels (and selector) of the test workloads.
func labels(app string) map[string]string { return map[string]string{"app": app} }

func podTemplate(app string) corev1.PodTemplateSpec {
	return corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: labels(app)},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "example.com/app:1"}}},
	}
}

func checkClusterIP(t *testing.T, c *testbed.Cluster, cs kubernetes.Interface, ns string) {
	svc, err := cs.CoreV1().Services(ns).Create(t.Context(), &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "cluster-ip"},
		Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ip, err := netip.ParseAddr(svc.Spec.ClusterIP)
	if err != nil || !c.ServiceCIDR().Contains(ip) {
		t.Errorf("clusterIP %q is not in %s (%v)", svc.Spec.ClusterIP, c.ServiceCIDR(), err)
	}
}

func checkNodePort(t *testing.T, c *testbed.Cluster, cs kubernetes.Interface, ns string) {
	svc, err := cs.CoreV1().Services(ns).Create(t.Context(), &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "node-port"},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeNodePort, Ports: []corev1.ServicePort{
			{Name: "http", Port: 80}, {Name: "https", Port: 443},
		}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	first, last := c.NodePortRange()
	for _, p := range svc.Spec.Ports {
		if p.NodePort < first || p.NodePort > last {
			t.Errorf("port %s got nodePort %d, want %d-%d", p.Name, p.NodePort, first, last)
		}
	}
}

func checkDeployment(t *testing.T, _ *testbed.Cluster, cs kubernetes.Interface, ns string) {
	d, err := cs.AppsV1().Deployments(ns).Create(t.Context(), &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "deploy"},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](1),
			Selector: &metav1.LabelSelector{MatchLabels: labels("deploy")},
			Template: podTemplate("deploy"),
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, workloadTimeout, "a ReplicaSet owned by the Deployment, and its Pod", func(ctx context.Context) error {
		rss, err := cs.AppsV1().ReplicaSets(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		owned := false
		for _, rs := range rss.Items {
			if ref := metav1.GetControllerOf(&rs); ref != nil && ref.UID == d.UID {
				owned = true
			}
		}
		if !owned {
			return fmt.Errorf("%d ReplicaSets, none owned by the Deployment", len(rss.Items))
		}
		return podCount(ctx, cs, ns, "app=deploy", 1)
	})
}

func checkJob(t *testing.T, _ *testbed.Cluster, cs kubernetes.Interface, ns string) {
	tmpl := podTemplate("job")
	tmpl.Labels = nil // the API server generates the labels and selector
	tmpl.Spec.RestartPolicy = corev1.RestartPolicyNever
	j, err := cs.BatchV1().Jobs(ns).Create(t.Context(), &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: "job"},
		Spec:       batchv1.JobSpec{Template: tmpl},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := j.Spec.Selector.MatchLabels[batchv1.ControllerUidLabel]; got != string(j.UID) {
		t.Errorf("selector %v, want %s=%s", j.Spec.Selector, batchv1.ControllerUidLabel, j.UID)
	}
	if got := j.Spec.Template.Labels[batchv1.ControllerUidLabel]; got != string(j.UID) {
		t.Errorf("template labels %v, want %s=%s", j.Spec.Template.Labels, batchv1.ControllerUidLabel, j.UID)
	}
	eventually(t, workloadTimeout, "the Job's Pod", func(ctx context.Context) error {
		return podCount(ctx, cs, ns, batchv1.ControllerUidLabel+"="+string(j.UID), 1)
	})
}

func checkStatefulSet(t *testing.T, _ *testbed.Cluster, cs kubernetes.Interface, ns string) {
	if _, err := cs.AppsV1().StatefulSets(ns).Create(t.Context(), &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Name: "sts"},
		Spec: appsv1.StatefulSetSpec{
			Replicas: ptr.To[int32](1),
			Selector: &metav1.LabelSelector{MatchLabels: labels("sts")},
			Template: podTemplate("sts"),
		},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, workloadTimeout, "the StatefulSet's Pod sts-0", func(ctx context.Context) error {
		_, err := cs.CoreV1().Pods(ns).Get(ctx, "sts-0", metav1.GetOptions{})
		return err
	})
}

func checkEndpointSlice(t *testing.T, _ *testbed.Cluster, cs kubernetes.Interface, ns string) {
	if _, err := cs.CoreV1().Services(ns).Create(t.Context(), &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "selected"},
		Spec:       corev1.ServiceSpec{Selector: labels("selected"), Ports: []corev1.ServicePort{{Port: 80}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, workloadTimeout, "an EndpointSlice of the Service", func(ctx context.Context) error {
		l, err := cs.DiscoveryV1().EndpointSlices(ns).List(ctx, metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=selected"})
		if err != nil {
			return err
		}
		if len(l.Items) == 0 {
			return fmt.Errorf("no EndpointSlice yet")
		}
		return nil
	})
}

// podCount fails unless exactly want Pods in ns match selector.
func podCount(ctx context.Context, cs kubernetes.Interface, ns, selector string, want int) error {
	pods, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		return err
	}
	if len(pods.Items) != want {
		return fmt.Errorf("%d Pods match %s, want %d", len(pods.Items), selector, want)
	}
	return nil
}
