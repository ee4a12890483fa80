package manifests

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
)

// rendered is what Render customises, read back from its objects.
type rendered struct {
	// Objects lists "Kind namespace/name" in order.
	Objects []string
	// Subjects lists the subjects of every (Cluster)RoleBinding: "Binding: Kind ns/name".
	Subjects []string
	Image    string
	Replicas int32
	Args     []string
}

func summarize(t *testing.T, objs []*unstructured.Unstructured) rendered {
	t.Helper()
	var r rendered
	for _, o := range objs {
		r.Objects = append(r.Objects, fmt.Sprintf("%s %s/%s", o.GetKind(), o.GetNamespace(), o.GetName()))
		switch o.GetKind() {
		case "RoleBinding", "ClusterRoleBinding":
			var b rbacv1.RoleBinding // same subjects field as ClusterRoleBinding
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, &b); err != nil {
				t.Fatal(err)
			}
			for _, s := range b.Subjects {
				r.Subjects = append(r.Subjects, fmt.Sprintf("%s %s: %s %s/%s", o.GetKind(), o.GetName(), s.Kind, s.Namespace, s.Name))
			}
		case "Deployment":
			var d appsv1.Deployment
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, &d); err != nil {
				t.Fatal(err)
			}
			if d.Spec.Replicas != nil {
				r.Replicas = *d.Spec.Replicas
			}
			c := d.Spec.Template.Spec.Containers[0]
			r.Image, r.Args = c.Image, c.Args
		}
	}
	return r
}

// wantRendered returns what the embedded manifests render to in namespace ns.
func wantRendered(ns, image string, replicas int32, args ...string) rendered {
	return rendered{
		Objects: []string{
			"CustomResourceDefinition /clusterfeatures.clusterregistry.k8s.cisco.com",
			"CustomResourceDefinition /clusters.clusterregistry.k8s.cisco.com",
			"CustomResourceDefinition /resourcesyncrules.clusterregistry.k8s.cisco.com",
			"CustomResourceDefinition /syncpolicies.clusterregistry.k8s.cisco.com",
			"Namespace /" + ns,
			"Namespace /" + ns + "-readers",
			"ServiceAccount " + ns + "/cluster-registry-controller",
			"ClusterRole /cluster-registry-controller-aggregated",
			"ClusterRole /cluster-registry-controller",
			"ClusterRoleBinding /cluster-registry-controller-own",
			"ClusterRoleBinding /cluster-registry-controller",
			"Role " + ns + "/cluster-registry-controller",
			"RoleBinding " + ns + "/cluster-registry-controller",
			"Role " + ns + "-readers/cluster-registry-controller",
			"RoleBinding " + ns + "-readers/cluster-registry-controller",
			"Role " + ns + "/cluster-registry-controller-leader-election",
			"RoleBinding " + ns + "/cluster-registry-controller-leader-election",
			"ClusterRoleBinding /cluster-registry-members",
			"Role " + ns + "/cluster-registry-members",
			"RoleBinding " + ns + "/cluster-registry-members",
			"ServiceAccount " + ns + "/cluster-registry-reader",
			"ClusterRole /cluster-registry-reader-aggregated",
			"ClusterRole /cluster-registry-reader",
			"ClusterRoleBinding /cluster-registry-reader",
			"Role " + ns + "/cluster-registry-reader",
			"RoleBinding " + ns + "/cluster-registry-reader",
			"ClusterRole /cluster-registry-bootstrap",
			"ClusterRoleBinding /cluster-registry-bootstrap",
			"RoleBinding " + ns + "/cluster-registry-bootstrap",
			"ServiceAccount " + ns + "/cluster-registry-notice",
			"RoleBinding " + ns + "-readers/cluster-registry-notice",
			"ClusterRole /cluster-registry-legacy-reader",
			"ClusterRoleBinding /cluster-registry-legacy-reader",
			"ClusterRole /cluster-registry-metrics-reader",
			"Service " + ns + "/cluster-registry-controller-metrics",
			"NetworkPolicy " + ns + "/cluster-registry-controller",
			"Deployment " + ns + "/cluster-registry-controller",
		},
		Subjects: []string{
			"ClusterRoleBinding cluster-registry-controller-own: ServiceAccount " + ns + "/cluster-registry-controller",
			"ClusterRoleBinding cluster-registry-controller: ServiceAccount " + ns + "/cluster-registry-controller",
			"RoleBinding cluster-registry-controller: ServiceAccount " + ns + "/cluster-registry-controller",
			"RoleBinding cluster-registry-controller: ServiceAccount " + ns + "/cluster-registry-controller",
			"RoleBinding cluster-registry-controller-leader-election: ServiceAccount " + ns + "/cluster-registry-controller",
			"ClusterRoleBinding cluster-registry-members: Group /cluster-registry:members",
			"RoleBinding cluster-registry-members: Group /cluster-registry:members",
			"ClusterRoleBinding cluster-registry-reader: Group /system:serviceaccounts:" + ns + "-readers",
			"RoleBinding cluster-registry-reader: Group /system:serviceaccounts:" + ns + "-readers",
			"ClusterRoleBinding cluster-registry-bootstrap: ServiceAccount " + ns + "/cluster-registry-reader",
			"RoleBinding cluster-registry-bootstrap: ServiceAccount " + ns + "/cluster-registry-reader",
			"RoleBinding cluster-registry-notice: ServiceAccount " + ns + "/cluster-registry-notice",
		},
		Image:    image,
		Replicas: replicas,
		Args:     args,
	}
}

// withoutMembersGrant is r without the objects and subjects of rbac-members.yaml.
func withoutMembersGrant(r rendered) rendered {
	drop := func(ss []string) []string {
		var kept []string
		for _, s := range ss {
			if !strings.Contains(s, "cluster-registry-members") {
				kept = append(kept, s)
			}
		}
		return kept
	}
	r.Objects, r.Subjects = drop(r.Objects), drop(r.Subjects)
	return r
}

const (
	metricsArg = "--metrics-bind-address=:8443"
	probesArg  = "--health-probe-bind-address=:8081"
)

func TestRender(t *testing.T) {
	tests := []struct {
		name string
		opts RenderOptions
		want rendered
	}{
		{
			name: "defaults",
			opts: RenderOptions{},
			want: wantRendered("cluster-registry", DefaultImage, 1,
				"serve", "--leader-elect=true", "--namespace=cluster-registry", metricsArg, probesArg),
		},
		{
			name: "every option",
			opts: RenderOptions{
				Namespace:         "registry-system",
				ClusterName:       "east",
				APIServerEndpoint: "https://east.example.com:6443",
				Image:             "registry.example.com/kubectl-registry:dev",
				Replicas:          2,
			},
			want: wantRendered("registry-system", "registry.example.com/kubectl-registry:dev", 2,
				"serve", "--leader-elect=true", "--namespace=registry-system",
				"--cluster-name=east", "--api-server-endpoint=https://east.example.com:6443", metricsArg, probesArg),
		},
		{
			name: "endpoint normalised",
			opts: RenderOptions{APIServerEndpoint: "10.0.0.1:6443"},
			want: wantRendered("cluster-registry", DefaultImage, 1,
				"serve", "--leader-elect=true", "--namespace=cluster-registry",
				"--api-server-endpoint=https://10.0.0.1:6443", metricsArg, probesArg),
		},
		{
			name: "cluster name only",
			opts: RenderOptions{ClusterName: "west", Replicas: 3},
			want: wantRendered("cluster-registry", DefaultImage, 3,
				"serve", "--leader-elect=true", "--namespace=cluster-registry", "--cluster-name=west", metricsArg, probesArg),
		},
		{
			name: "no members' grant",
			opts: RenderOptions{MemberGrants: MemberGrantsNone},
			want: withoutMembersGrant(wantRendered("cluster-registry", DefaultImage, 1,
				"serve", "--leader-elect=true", "--namespace=cluster-registry", metricsArg, probesArg)),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			objs, err := Render(tt.opts)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, summarize(t, objs)); diff != "" {
				t.Errorf("rendered (-want +got):\n%s", diff)
			}
		})
	}
}

// TestRenderDefaultsAreTheEmbeddedManifests: rendering with the defaults changes nothing
// but what every render sets, so the embedded YAML stays the reference.
func TestRenderDefaultsAreTheEmbeddedManifests(t *testing.T) {
	objs, err := Objects()
	if err != nil {
		t.Fatal(err)
	}
	got, err := Render(RenderOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// Compared as JSON: the decoded YAML holds float64 numbers, Render writes int64.
	if diff := cmp.Diff(toJSON(t, objs), toJSON(t, got)); diff != "" {
		t.Errorf("Render(defaults) differs from the embedded manifests (-embedded +rendered):\n%s", diff)
	}
}

func toJSON(t *testing.T, objs []*unstructured.Unstructured) []string {
	t.Helper()
	out := make([]string, len(objs))
	for i, o := range objs {
		b, err := json.Marshal(o.Object)
		if err != nil {
			t.Fatal(err)
		}
		out[i] = string(b)
	}
	return out
}

// TestRenderReturnsFreshObjects: changing what Render returned does not change the next
// render.
func TestRenderReturnsFreshObjects(t *testing.T) {
	first, err := Render(RenderOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range first {
		o.SetNamespace("changed")
		o.SetLabels(map[string]string{"changed": "true"})
	}
	second, err := Render(RenderOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range second {
		if o.GetNamespace() == "changed" || o.GetLabels()["changed"] != "" {
			t.Fatalf("%s %s: a previous render's change leaked", o.GetKind(), o.GetName())
		}
	}
}

func TestRenderRejectsInvalidOptions(t *testing.T) {
	tests := []struct {
		name    string
		opts    RenderOptions
		wantErr []string
	}{
		{"cluster name with upper case and underscore", RenderOptions{ClusterName: "Bad_Name"}, []string{`invalid cluster name "Bad_Name"`, "RFC 1123 label"}},
		{"cluster name too long", RenderOptions{ClusterName: strings.Repeat("a", 64)}, []string{"invalid cluster name", "63"}},
		{"namespace not a label", RenderOptions{Namespace: "my.namespace"}, []string{`invalid namespace "my.namespace"`}},
		{"system namespace", RenderOptions{Namespace: "kube-system"}, []string{`invalid namespace "kube-system"`, "system namespace"}},
		{"default namespace", RenderOptions{Namespace: "default"}, []string{`invalid namespace "default"`}},
		{"namespace too long for its readers namespace", RenderOptions{Namespace: strings.Repeat("a", 56)}, []string{"readers namespace", "at most 55 characters"}},
		{"http endpoint", RenderOptions{APIServerEndpoint: "http://x"}, []string{"invalid API server endpoint", "scheme must be https"}},
		{"endpoint with user info", RenderOptions{APIServerEndpoint: "https://user:secret@x"}, []string{"must not contain user info"}},
		{"negative replicas", RenderOptions{Replicas: -1}, []string{"invalid replicas -1"}},
		{"member grants", RenderOptions{MemberGrants: "some"}, []string{`invalid member grants "some"`, `"all"`, `"none"`}},
		{"image with spaces", RenderOptions{Image: "a b"}, []string{`invalid image "a b"`}},
		{"several problems at once", RenderOptions{ClusterName: "X", Replicas: -2}, []string{`invalid cluster name "X"`, "invalid replicas -2"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			objs, err := Render(tt.opts)
			if err == nil {
				t.Fatalf("no error; rendered %d objects", len(objs))
			}
			if verr := tt.opts.Validate(); verr == nil || verr.Error() != err.Error() {
				t.Errorf("Validate() = %v, want the error of Render: %v", verr, err)
			}
			for _, s := range tt.wantErr {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error %q does not contain %q", err, s)
				}
			}
			if strings.Contains(err.Error(), "secret") {
				t.Errorf("error %q quotes a password", err)
			}
		})
	}
}

func TestDefaultImageIsTheEmbeddedOne(t *testing.T) {
	objs, err := Objects()
	if err != nil {
		t.Fatal(err)
	}
	got := summarize(t, objs).Image
	if got == "" || got != DefaultImage {
		t.Errorf("DefaultImage = %q, the embedded Deployment runs %q", DefaultImage, got)
	}
}

func TestSetArg(t *testing.T) {
	tests := []struct {
		name        string
		args        []string
		flag, value string
		want        []string
	}{
		{"replace in place", []string{"serve", "--namespace=a", "--x"}, flagNamespace, "b", []string{"serve", "--namespace=b", "--x"}},
		{"separate value", []string{"serve", "--namespace", "a", "--x"}, flagNamespace, "b", []string{"serve", "--namespace=b", "--x"}},
		{"duplicates collapse", []string{"serve", "--cluster-name=a", "--x", "--cluster-name", "b"}, flagClusterName, "c", []string{"serve", "--cluster-name=c", "--x"}},
		{"empty value removes", []string{"serve", "--cluster-name=a", "--x"}, flagClusterName, "", []string{"serve", "--x"}},
		{"added after the managed flags", []string{"serve", "--leader-elect=true", "--namespace=a", "--x"}, flagClusterName, "c", []string{"serve", "--leader-elect=true", "--namespace=a", "--cluster-name=c", "--x"}},
		{"added after the subcommand and --leader-elect", []string{"serve", "--leader-elect=true", "--x"}, flagNamespace, "a", []string{"serve", "--leader-elect=true", "--namespace=a", "--x"}},
		{"added to nothing", nil, flagNamespace, "a", []string{"--namespace=a"}},
		{"prefix of another flag is kept", []string{"serve", "--namespace-extra=1"}, flagNamespace, "a", []string{"serve", "--namespace=a", "--namespace-extra=1"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := setArg(append([]string(nil), tt.args...), tt.flag, tt.value)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("setArg(%q, %s, %q) (-want +got):\n%s", tt.args, tt.flag, tt.value, diff)
			}
		})
	}
}
