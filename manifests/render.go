package manifests

import (
	"errors"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/kubectl-registry/kubectl-registry/reconciler/api/v1alpha1"
	"github.com/kubectl-registry/kubectl-registry/reconciler/kubeconfig"
)

// DefaultReplicas is the number of controller replicas an installation runs by default.
const DefaultReplicas int32 = 1

// DefaultImage is the controller image of the embedded Deployment (deployment.yaml),
// the image Render uses when RenderOptions.Image is empty. It is read from the embedded
// manifest, so the two never disagree; treat it as a constant.
var DefaultImage = mustDefaultImage()

// controllerContainer is the name of the controller's container in deployment.yaml.
const controllerContainer = "controller"

// The flags of `serve` that Render sets in the controller's arguments.
const (
	flagNamespace         = "--namespace"
	flagClusterName       = "--cluster-name"
	flagAPIServerEndpoint = "--api-server-endpoint"
)

// systemNamespaces are never a registry namespace: an installation applies its Namespace
// object and an uninstallation deletes it.
var systemNamespaces = []string{"default", "kube-system", "kube-public", "kube-node-lease"}

// RenderOptions customises the embedded manifests. The zero value renders them as they
// are embedded.
type RenderOptions struct {
	// Namespace is the registry namespace: where the controller, its ServiceAccounts,
	// Roles and Secrets live. An RFC 1123 label; empty means v1alpha1.DefaultNamespace.
	// The Kubernetes system namespaces (default, kube-system, kube-public,
	// kube-node-lease) are refused.
	Namespace string
	// ClusterName is passed to the controller as --cluster-name: the name of this
	// cluster in the group, an RFC 1123 label. Empty passes no flag.
	ClusterName string
	// APIServerEndpoint is passed to the controller as --api-server-endpoint, the address
	// peers reach this cluster's API server at, after kubeconfig.NormalizeServer (a host,
	// host:port or https URL). Empty passes no flag.
	APIServerEndpoint string
	// Image is the controller image; empty means DefaultImage.
	Image string
	// Replicas is the number of controller replicas (leader election keeps one active);
	// zero means DefaultReplicas, negative is an error.
	Replicas int32
	// Monitoring adds the monitoring pack (MonitoringObjects) after the other objects.
	Monitoring bool
	// MemberGrants is what the members' identities may write here: MemberGrantsAll (the
	// default, empty) binds them to what the controller may write (rbac-members.yaml);
	// MemberGrantsNone leaves those bindings out, for the admin to grant each member.
	MemberGrants string
}

// What install grants the members' identities (RenderOptions.MemberGrants).
const (
	MemberGrantsAll  = "all"
	MemberGrantsNone = "none"
)

// IsMembersGrant reports whether obj is one of the objects of the members' default grant
// (rbac-members.yaml), which MemberGrantsNone leaves out.
func IsMembersGrant(obj *unstructured.Unstructured) bool {
	if obj.GetName() != v1alpha1.MembersGrantName || obj.GroupVersionKind().Group != "rbac.authorization.k8s.io" {
		return false
	}
	switch obj.GetKind() {
	case "ClusterRoleBinding", "Role", "RoleBinding":
		return true
	}
	return false
}

// withDefaults returns o with the defaults filled in.
func (o RenderOptions) withDefaults() RenderOptions {
	if o.Namespace == "" {
		o.Namespace = v1alpha1.DefaultNamespace
	}
	if o.Image == "" {
		o.Image = DefaultImage
	}
	if o.Replicas == 0 {
		o.Replicas = DefaultReplicas
	}
	if o.MemberGrants == "" {
		o.MemberGrants = MemberGrantsAll
	}
	return o
}

// Validate reports every invalid option. It does no I/O.
func (o RenderOptions) Validate() error {
	_, err := o.complete()
	return err
}

// complete fills in the defaults, validates the options and normalises the endpoint.
func (o RenderOptions) complete() (RenderOptions, error) {
	o = o.withDefaults()
	var errs []error
	if msgs := validation.IsDNS1123Label(o.Namespace); len(msgs) > 0 {
		errs = append(errs, fmt.Errorf("invalid namespace %q: %s", o.Namespace, strings.Join(msgs, "; ")))
	} else if readers := v1alpha1.ReadersNamespace(o.Namespace); len(validation.IsDNS1123Label(readers)) > 0 {
		errs = append(errs, fmt.Errorf("invalid namespace %q: its readers namespace %q must be an RFC 1123 label too: use at most %d characters",
			o.Namespace, readers, validation.DNS1123LabelMaxLength-len(v1alpha1.ReadersNamespaceSuffix)))
	} else {
		for _, sys := range systemNamespaces {
			if o.Namespace == sys {
				errs = append(errs, fmt.Errorf("invalid namespace %q: a Kubernetes system namespace cannot be the registry namespace (it is created with the registry and deleted with it)", o.Namespace))
			}
		}
	}
	if o.ClusterName != "" {
		if msgs := validation.IsDNS1123Label(o.ClusterName); len(msgs) > 0 {
			errs = append(errs, fmt.Errorf("invalid cluster name %q: %s", o.ClusterName, strings.Join(msgs, "; ")))
		}
	}
	if o.APIServerEndpoint != "" {
		server, err := kubeconfig.NormalizeServer(o.APIServerEndpoint)
		if err != nil {
			errs = append(errs, fmt.Errorf("invalid API server endpoint: %w", err))
		} else {
			o.APIServerEndpoint = server
		}
	}
	if strings.TrimSpace(o.Image) != o.Image || strings.ContainsAny(o.Image, " \t\n") {
		errs = append(errs, fmt.Errorf("invalid image %q: must not contain white space", o.Image))
	}
	if o.Replicas < 0 {
		errs = append(errs, fmt.Errorf("invalid replicas %d: must be at least 1", o.Replicas))
	}
	if o.MemberGrants != MemberGrantsAll && o.MemberGrants != MemberGrantsNone {
		errs = append(errs, fmt.Errorf("invalid member grants %q: must be %q (members may write what the controller may) or %q (the admin binds each member's identity)",
			o.MemberGrants, MemberGrantsAll, MemberGrantsNone))
	}
	return o, errors.Join(errs...)
}

// Render returns the embedded objects (in apply order, as Objects does) customised by
// opts: every namespaced object is moved to opts.Namespace, the Namespace object is
// renamed to it, the ServiceAccount subjects of the RoleBindings and ClusterRoleBindings
// follow it, and the controller's Deployment gets the image, the replicas and the
// arguments of `serve` (--namespace, and --cluster-name and --api-server-endpoint when
// given). With opts.Monitoring the monitoring pack follows, in the same namespace. It
// does no I/O; the objects are new on every call.
func Render(opts RenderOptions) ([]*unstructured.Unstructured, error) {
	opts, err := opts.complete()
	if err != nil {
		return nil, err
	}
	objs, err := Objects()
	if err != nil {
		return nil, err
	}
	if opts.Monitoring {
		pack, err := MonitoringObjects()
		if err != nil {
			return nil, err
		}
		objs = append(objs, pack...)
	}
	if opts.MemberGrants == MemberGrantsNone {
		kept := objs[:0]
		for _, obj := range objs {
			if !IsMembersGrant(obj) {
				kept = append(kept, obj)
			}
		}
		objs = kept
	}
	deployments := 0
	for _, obj := range objs {
		if ns := obj.GetNamespace(); ns == defaultReaders {
			obj.SetNamespace(v1alpha1.ReadersNamespace(opts.Namespace))
		} else if ns != "" {
			obj.SetNamespace(opts.Namespace)
		}
		switch obj.GroupVersionKind().GroupKind().String() {
		case "Namespace":
			if obj.GetName() == defaultReaders {
				obj.SetName(v1alpha1.ReadersNamespace(opts.Namespace))
			} else {
				obj.SetName(opts.Namespace)
			}
		case "RoleBinding.rbac.authorization.k8s.io", "ClusterRoleBinding.rbac.authorization.k8s.io":
			if err := renderSubjects(obj, opts.Namespace); err != nil {
				return nil, err
			}
		case "Deployment.apps":
			if obj.GetName() != v1alpha1.ControllerName {
				continue
			}
			deployments++
			if err := renderDeployment(obj, opts); err != nil {
				return nil, err
			}
		}
	}
	if deployments != 1 {
		return nil, fmt.Errorf("the embedded manifests hold %d Deployments named %s, want 1", deployments, v1alpha1.ControllerName)
	}
	return objs, nil
}

// defaultReaders is the readers namespace of the embedded manifests.
var defaultReaders = v1alpha1.ReadersNamespace(v1alpha1.DefaultNamespace)

// serviceAccountsGroup prefixes the group of the ServiceAccounts of a namespace.
const serviceAccountsGroup = "system:serviceaccounts:"

// renderSubjects moves the ServiceAccount subjects of the registry namespace to ns.
func renderSubjects(obj *unstructured.Unstructured, ns string) error {
	subjects, found, err := unstructured.NestedSlice(obj.Object, "subjects")
	if err != nil || !found {
		return err
	}
	for i, s := range subjects {
		subject, ok := s.(map[string]any)
		if !ok {
			return fmt.Errorf("%s %s: subjects[%d] is not an object", obj.GetKind(), obj.GetName(), i)
		}
		if subject["kind"] == "ServiceAccount" && subject["namespace"] == v1alpha1.DefaultNamespace {
			subject["namespace"] = ns
		}
		if subject["kind"] == "Group" && subject["name"] == serviceAccountsGroup+defaultReaders {
			subject["name"] = serviceAccountsGroup + v1alpha1.ReadersNamespace(ns)
		}
	}
	return unstructured.SetNestedSlice(obj.Object, subjects, "subjects")
}

// renderDeployment sets the replicas, image and arguments of the controller.
func renderDeployment(obj *unstructured.Unstructured, opts RenderOptions) error {
	if err := unstructured.SetNestedField(obj.Object, int64(opts.Replicas), "spec", "replicas"); err != nil {
		return fmt.Errorf("deployment %s: %w", obj.GetName(), err)
	}
	containers, found, err := unstructured.NestedSlice(obj.Object, "spec", "template", "spec", "containers")
	if err != nil || !found {
		return fmt.Errorf("deployment %s has no containers: %v", obj.GetName(), err)
	}
	var container map[string]any
	for _, c := range containers {
		if m, ok := c.(map[string]any); ok && m["name"] == controllerContainer {
			container = m
		}
	}
	if container == nil {
		return fmt.Errorf("deployment %s has no container named %s", obj.GetName(), controllerContainer)
	}
	container["image"] = opts.Image
	args, _, err := unstructured.NestedStringSlice(container, "args")
	if err != nil {
		return fmt.Errorf("deployment %s: %w", obj.GetName(), err)
	}
	set := []struct{ flag, value string }{
		{flagNamespace, opts.Namespace},
		{flagClusterName, opts.ClusterName},
		{flagAPIServerEndpoint, opts.APIServerEndpoint},
	}
	for _, s := range set {
		args = setArg(args, s.flag, s.value)
	}
	container["args"] = toAnySlice(args)
	return unstructured.SetNestedSlice(obj.Object, containers, "spec", "template", "spec", "containers")
}

// setArg returns args with every occurrence of flag (as "--flag=value" or "--flag
// value") removed and, when value is not empty, "--flag=value" put where the first
// occurrence was, or after the flags Render manages that precede it (after the
// subcommand and the flags before them when there are none).
func setArg(args []string, flag, value string) []string {
	out := make([]string, 0, len(args)+1)
	at := -1
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == flag:
			if at < 0 {
				at = len(out)
			}
			i++ // the value is the next argument
			continue
		case strings.HasPrefix(a, flag+"="):
			if at < 0 {
				at = len(out)
			}
			continue
		}
		out = append(out, a)
	}
	if value == "" {
		return out
	}
	if at < 0 {
		at = insertionPoint(out)
	}
	arg := flag + "=" + value
	return append(out[:at], append([]string{arg}, out[at:]...)...)
}

// insertionPoint returns where a new managed flag goes: after the last managed flag, else
// after the leading non-flag arguments (the subcommand) and --leader-elect.
func insertionPoint(args []string) int {
	at := -1
	for i, a := range args {
		for _, f := range []string{flagNamespace, flagClusterName, flagAPIServerEndpoint} {
			if strings.HasPrefix(a, f+"=") {
				at = i + 1
			}
		}
	}
	if at >= 0 {
		return at
	}
	at = 0
	for at < len(args) && (!strings.HasPrefix(args[at], "-") || strings.HasPrefix(args[at], "--leader-elect")) {
		at++
	}
	return at
}

func toAnySlice(ss []string) []any {
	out := make([]any, len(ss))
	for i, s := range ss {
		out[i] = s
	}
	return out
}

// mustDefaultImage reads the controller image from the embedded Deployment.
func mustDefaultImage() string {
	image, err := embeddedImage()
	if err != nil {
		panic(fmt.Sprintf("manifests: reading the controller image from deployment.yaml: %v", err))
	}
	return image
}

func embeddedImage() (string, error) {
	data, err := files.ReadFile("deployment.yaml")
	if err != nil {
		return "", err
	}
	objs, err := Decode(data)
	if err != nil {
		return "", err
	}
	for _, obj := range objs {
		if obj.GetKind() != "Deployment" || obj.GetName() != v1alpha1.ControllerName {
			continue
		}
		containers, _, err := unstructured.NestedSlice(obj.Object, "spec", "template", "spec", "containers")
		if err != nil {
			return "", err
		}
		for _, c := range containers {
			if m, ok := c.(map[string]any); ok && m["name"] == controllerContainer {
				if image, ok := m["image"].(string); ok && image != "" {
					return image, nil
				}
			}
		}
	}
	return "", fmt.Errorf("no container %s with an image in Deployment %s", controllerContainer, v1alpha1.ControllerName)
}
