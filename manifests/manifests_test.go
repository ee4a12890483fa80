package manifests_test

import (
	"fmt"
	"net"
	"os"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/kubectl-registry/kubectl-registry/manifests"
	"github.com/kubectl-registry/kubectl-registry/reconciler/api/v1alpha1"
	"github.com/kubectl-registry/kubectl-registry/reconciler/testbed"
)

// bed is the package's shared test bed: one cluster with its kube-controller-manager
// (ClusterRole aggregation is what the RBAC tests check). nil when the test binaries
// are missing.
var bed *testbed.Bed

func TestMain(m *testing.M) {
	os.Exit(testbed.Main(m, testbed.Options{Clusters: 1}, &bed))
}

func TestObjectsInApplyOrder(t *testing.T) {
	objs, err := manifests.Objects()
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, o := range objs {
		got = append(got, fmt.Sprintf("%s %s/%s", o.GetKind(), o.GetNamespace(), o.GetName()))
	}
	ns := v1alpha1.DefaultNamespace
	want := []string{
		"CustomResourceDefinition /clusterfeatures.clusterregistry.k8s.cisco.com",
		"CustomResourceDefinition /clusters.clusterregistry.k8s.cisco.com",
		"CustomResourceDefinition /resourcesyncrules.clusterregistry.k8s.cisco.com",
		"CustomResourceDefinition /syncpolicies.clusterregistry.k8s.cisco.com",
		"Namespace /" + ns,
		"Namespace /" + ns + "-readers",
		"ServiceAccount " + ns + "/cluster-registry-controller",
		"ClusterRole /" + v1alpha1.ControllerAggregatedRoleName,
		"ClusterRole /cluster-registry-controller",
		"ClusterRoleBinding /cluster-registry-controller-own",
		"ClusterRoleBinding /cluster-registry-controller",
		"Role " + ns + "/cluster-registry-controller",
		"RoleBinding " + ns + "/cluster-registry-controller",
		"Role " + ns + "-readers/cluster-registry-controller",
		"RoleBinding " + ns + "-readers/cluster-registry-controller",
		"Role " + ns + "/cluster-registry-controller-leader-election",
		"RoleBinding " + ns + "/cluster-registry-controller-leader-election",
		"ClusterRoleBinding /" + v1alpha1.MembersGrantName,
		"Role " + ns + "/" + v1alpha1.MembersGrantName,
		"RoleBinding " + ns + "/" + v1alpha1.MembersGrantName,
		"ServiceAccount " + ns + "/" + v1alpha1.ReaderName,
		"ClusterRole /" + v1alpha1.ReaderAggregatedRoleName,
		"ClusterRole /" + v1alpha1.ReaderName,
		"ClusterRoleBinding /" + v1alpha1.ReaderName,
		"Role " + ns + "/" + v1alpha1.ReaderName,
		"RoleBinding " + ns + "/" + v1alpha1.ReaderName,
		"ClusterRole /" + v1alpha1.BootstrapRoleName,
		"ClusterRoleBinding /" + v1alpha1.BootstrapRoleName,
		"RoleBinding " + ns + "/" + v1alpha1.BootstrapRoleName,
		"ServiceAccount " + ns + "/" + v1alpha1.NoticeName,
		"RoleBinding " + ns + "-readers/" + v1alpha1.NoticeName,
		"ClusterRole /" + v1alpha1.LegacyReaderRoleName,
		"ClusterRoleBinding /" + v1alpha1.LegacyReaderRoleName,
		"ClusterRole /" + v1alpha1.MetricsReaderRoleName,
		"Service " + ns + "/cluster-registry-controller-metrics",
		"NetworkPolicy " + ns + "/" + v1alpha1.ControllerName,
		"Deployment " + ns + "/" + v1alpha1.ControllerName,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("embedded manifests (-want +got):\n%s", diff)
	}
}

// TestDeploymentIsHardened checks the pod runs `serve` as non-root with a read-only
// root filesystem, no privilege escalation, probes and resources.
func TestDeploymentIsHardened(t *testing.T) {
	objs, err := manifests.Objects()
	if err != nil {
		t.Fatal(err)
	}
	var dep appsv1.Deployment
	for _, o := range objs {
		if o.GetKind() == "Deployment" {
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, &dep); err != nil {
				t.Fatal(err)
			}
		}
	}
	pod := dep.Spec.Template.Spec
	if len(pod.Containers) != 1 {
		t.Fatalf("want one container, got %d", len(pod.Containers))
	}
	c := pod.Containers[0]
	type facts struct {
		FirstArg                 string
		LeaderElect              bool
		RunAsNonRoot             bool
		ReadOnlyRootFilesystem   bool
		AllowPrivilegeEscalation bool
		DropsAll                 bool
		Liveness, Readiness      string
		HasMemoryLimit           bool
		ServiceAccount           string
	}
	got := facts{
		FirstArg:                 c.Args[0],
		LeaderElect:              contains(c.Args, "--leader-elect=true"),
		RunAsNonRoot:             pod.SecurityContext != nil && pod.SecurityContext.RunAsNonRoot != nil && *pod.SecurityContext.RunAsNonRoot,
		ReadOnlyRootFilesystem:   c.SecurityContext != nil && c.SecurityContext.ReadOnlyRootFilesystem != nil && *c.SecurityContext.ReadOnlyRootFilesystem,
		AllowPrivilegeEscalation: c.SecurityContext == nil || c.SecurityContext.AllowPrivilegeEscalation == nil || *c.SecurityContext.AllowPrivilegeEscalation,
		DropsAll:                 c.SecurityContext != nil && c.SecurityContext.Capabilities != nil && len(c.SecurityContext.Capabilities.Drop) == 1 && c.SecurityContext.Capabilities.Drop[0] == "ALL",
		ServiceAccount:           pod.ServiceAccountName,
		HasMemoryLimit:           !c.Resources.Limits.Memory().IsZero(),
	}
	if c.LivenessProbe != nil && c.LivenessProbe.HTTPGet != nil {
		got.Liveness = c.LivenessProbe.HTTPGet.Path
	}
	if c.ReadinessProbe != nil && c.ReadinessProbe.HTTPGet != nil {
		got.Readiness = c.ReadinessProbe.HTTPGet.Path
	}
	want := facts{
		FirstArg: "serve", LeaderElect: true, RunAsNonRoot: true, ReadOnlyRootFilesystem: true,
		AllowPrivilegeEscalation: false, DropsAll: true, Liveness: "/healthz", Readiness: "/readyz",
		HasMemoryLimit: true, ServiceAccount: v1alpha1.ControllerName,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("deployment (-want +got):\n%s", diff)
	}
}

func TestDecodeRejectsIncompleteObjects(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		wantN   int
		wantErr bool
	}{
		{name: "two documents and an empty one", in: "apiVersion: v1\nkind: Namespace\nmetadata: {name: a}\n---\n---\napiVersion: v1\nkind: Namespace\nmetadata: {name: b}\n", wantN: 2},
		{name: "missing kind", in: "apiVersion: v1\nmetadata: {name: a}\n", wantErr: true},
		{name: "missing name", in: "apiVersion: v1\nkind: Namespace\n", wantErr: true},
		{name: "not yaml", in: "{{{", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			objs, err := manifests.Decode([]byte(tt.in))
			if (err != nil) != tt.wantErr {
				t.Fatalf("err = %v, wantErr %v", err, tt.wantErr)
			}
			if len(objs) != tt.wantN {
				t.Errorf("decoded %d objects, want %d", len(objs), tt.wantN)
			}
		})
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// TestNetworkPolicyAdmitsOnlyMetricsAndProbes: the controller's NetworkPolicy selects the
// controller's pods, admits connections to the metrics and probe ports only (the ports
// serve binds), and leaves egress open; the metrics Service reaches the same port.
func TestNetworkPolicyAdmitsOnlyMetricsAndProbes(t *testing.T) {
	objs, err := manifests.Objects()
	if err != nil {
		t.Fatal(err)
	}
	var (
		dep appsv1.Deployment
		np  networkingv1.NetworkPolicy
		svc corev1.Service
	)
	for _, o := range objs {
		var into any
		switch o.GetKind() {
		case "Deployment":
			into = &dep
		case "NetworkPolicy":
			into = &np
		case "Service":
			into = &svc
		default:
			continue
		}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, into); err != nil {
			t.Fatal(err)
		}
	}
	c := dep.Spec.Template.Spec.Containers[0]
	ports := map[string]int32{}
	for _, p := range c.Ports {
		ports[p.Name] = p.ContainerPort
	}
	type facts struct {
		SelectsControllerPods bool
		PolicyTypes           []networkingv1.PolicyType
		IngressRules          int
		IngressFromAnywhere   bool
		IngressPorts          []string
		EgressOpen            bool
		// The ports serve listens on, from its flags, and the named container ports.
		MetricsFlagPort, MetricsContainerPort string
		ProbesFlagPort, ProbesContainerPort   string
		ServiceTargetPort                     string
		ServiceSelectsControllerPods          bool
	}
	selects := func(sel map[string]string) bool {
		return len(sel) > 0 && labels.SelectorFromSet(sel).Matches(labels.Set(dep.Spec.Template.Labels))
	}
	got := facts{
		SelectsControllerPods:        selects(np.Spec.PodSelector.MatchLabels) && len(np.Spec.PodSelector.MatchExpressions) == 0,
		PolicyTypes:                  np.Spec.PolicyTypes,
		IngressRules:                 len(np.Spec.Ingress),
		EgressOpen:                   len(np.Spec.Egress) == 1 && len(np.Spec.Egress[0].To) == 0 && len(np.Spec.Egress[0].Ports) == 0,
		MetricsFlagPort:              flagPort(c.Args, "--metrics-bind-address"),
		MetricsContainerPort:         fmt.Sprint(ports["metrics"]),
		ProbesFlagPort:               flagPort(c.Args, "--health-probe-bind-address"),
		ProbesContainerPort:          fmt.Sprint(ports["probes"]),
		ServiceTargetPort:            svc.Spec.Ports[0].TargetPort.String(),
		ServiceSelectsControllerPods: selects(svc.Spec.Selector),
	}
	if len(np.Spec.Ingress) == 1 {
		got.IngressFromAnywhere = len(np.Spec.Ingress[0].From) == 0
		for _, p := range np.Spec.Ingress[0].Ports {
			got.IngressPorts = append(got.IngressPorts, fmt.Sprintf("%s/%s", p.Port, *p.Protocol))
		}
	}
	want := facts{
		SelectsControllerPods: true,
		PolicyTypes:           []networkingv1.PolicyType{networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress},
		IngressRules:          1,
		IngressFromAnywhere:   true,
		IngressPorts:          []string{"metrics/TCP", "probes/TCP"},
		EgressOpen:            true,
		MetricsFlagPort:       "8443", MetricsContainerPort: "8443",
		ProbesFlagPort: "8081", ProbesContainerPort: "8081",
		ServiceTargetPort:            "metrics",
		ServiceSelectsControllerPods: true,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("NetworkPolicy, Service and Deployment ports (-want +got):\n%s", diff)
	}
}

// flagPort returns the port of the --flag=host:port argument in args.
func flagPort(args []string, flag string) string {
	for _, a := range args {
		if v, ok := strings.CutPrefix(a, flag+"="); ok {
			if _, port, err := net.SplitHostPort(v); err == nil {
				return port
			}
		}
	}
	return ""
}
