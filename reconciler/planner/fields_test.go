package planner

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/yaml"

	"github.com/kubectl-registry/kubectl-registry/reconciler/api/v1alpha1"
	"github.com/kubectl-registry/kubectl-registry/reconciler/rules"
)

func fieldsObj(t *testing.T, y string) *unstructured.Unstructured {
	t.Helper()
	if y == "" {
		return nil
	}
	var m map[string]any
	if err := yaml.Unmarshal([]byte(y), &m); err != nil {
		t.Fatalf("test object: %v", err)
	}
	u := &unstructured.Unstructured{Object: m}
	// JSON numbers as unstructured holds them.
	b, _ := u.MarshalJSON()
	out := &unstructured.Unstructured{}
	if err := out.UnmarshalJSON(b); err != nil {
		t.Fatalf("test object: %v", err)
	}
	return out
}

// TestLocalize: the fields each destination assigns are not copied to a new copy, keep the
// destination's values afterwards, and everything else stays the source's.
func TestLocalize(t *testing.T) {
	for _, tc := range []struct {
		name                    string
		gk                      schema.GroupKind
		ignore                  []string
		desired, observed, want string
	}{{
		name: "Service ClusterIP, new copy: no addresses or families",
		gk:   gkService,
		desired: `{apiVersion: v1, kind: Service, metadata: {name: s}, spec: {type: ClusterIP, clusterIP: 10.1.0.5, clusterIPs: [10.1.0.5],
			ipFamilies: [IPv4], ipFamilyPolicy: SingleStack, ports: [{port: 80, protocol: TCP, targetPort: 8080}], selector: {app: a}}}`,
		want: `{apiVersion: v1, kind: Service, metadata: {name: s}, spec: {type: ClusterIP, ports: [{port: 80, protocol: TCP, targetPort: 8080}], selector: {app: a}}}`,
	}, {
		name: "Service ClusterIP, existing copy: the destination's addresses, the source's ports",
		gk:   gkService,
		desired: `{apiVersion: v1, kind: Service, metadata: {name: s}, spec: {type: ClusterIP, clusterIP: 10.1.0.5, clusterIPs: [10.1.0.5],
			ipFamilies: [IPv4], ipFamilyPolicy: SingleStack, ports: [{port: 81, protocol: TCP}]}}`,
		observed: `{apiVersion: v1, kind: Service, metadata: {name: s}, spec: {type: ClusterIP, clusterIP: 10.2.0.9, clusterIPs: [10.2.0.9],
			ipFamilies: [IPv6], ipFamilyPolicy: SingleStack, ports: [{port: 80, protocol: TCP}]}}`,
		want: `{apiVersion: v1, kind: Service, metadata: {name: s}, spec: {type: ClusterIP, clusterIP: 10.2.0.9, clusterIPs: [10.2.0.9],
			ipFamilies: [IPv6], ipFamilyPolicy: SingleStack, ports: [{port: 81, protocol: TCP}]}}`,
	}, {
		name:     "headless Service: None is the source's choice",
		gk:       gkService,
		desired:  `{kind: Service, spec: {clusterIP: None, clusterIPs: [None]}}`,
		observed: `{kind: Service, spec: {clusterIP: None, clusterIPs: [None]}}`,
		want:     `{kind: Service, spec: {clusterIP: None, clusterIPs: [None]}}`,
	}, {
		name:     "the source switched to headless: None is written (the cluster reports it immutable)",
		gk:       gkService,
		desired:  `{kind: Service, spec: {clusterIP: None, clusterIPs: [None]}}`,
		observed: `{kind: Service, spec: {clusterIP: 10.2.0.9, clusterIPs: [10.2.0.9]}}`,
		want:     `{kind: Service, spec: {clusterIP: None, clusterIPs: [None]}}`,
	}, {
		name:     "the source left headless: the copy asks for no address",
		gk:       gkService,
		desired:  `{kind: Service, spec: {clusterIP: 10.1.0.5, clusterIPs: [10.1.0.5]}}`,
		observed: `{kind: Service, spec: {clusterIP: None, clusterIPs: [None]}}`,
		want:     `{kind: Service, spec: {}}`,
	}, {
		name:     "PreferDualStack chosen at the source is copied",
		gk:       gkService,
		desired:  `{kind: Service, spec: {ipFamilyPolicy: PreferDualStack}}`,
		observed: `{kind: Service, spec: {ipFamilyPolicy: SingleStack}}`,
		want:     `{kind: Service, spec: {ipFamilyPolicy: PreferDualStack}}`,
	}, {
		name: "NodePort: node ports matched by port and protocol; a new port gets one allocated",
		gk:   gkService,
		desired: `{kind: Service, spec: {type: NodePort, ports: [{port: 53, protocol: UDP, nodePort: 30001}, {port: 53, nodePort: 30002},
			{port: 90, nodePort: 30003}]}}`,
		observed: `{kind: Service, spec: {type: NodePort, ports: [{port: 53, protocol: TCP, nodePort: 31002}, {port: 53, protocol: UDP, nodePort: 31001}]}}`,
		want:     `{kind: Service, spec: {type: NodePort, ports: [{port: 53, protocol: UDP, nodePort: 31001}, {port: 53, nodePort: 31002}, {port: 90}]}}`,
	}, {
		name:     "the source went from NodePort to ClusterIP: no node ports",
		gk:       gkService,
		desired:  `{kind: Service, spec: {type: ClusterIP, ports: [{port: 80}]}}`,
		observed: `{kind: Service, spec: {type: NodePort, ports: [{port: 80, nodePort: 31000}]}}`,
		want:     `{kind: Service, spec: {type: ClusterIP, ports: [{port: 80}]}}`,
	}, {
		name:     "LoadBalancer: the health check node port is the destination's",
		gk:       gkService,
		desired:  `{kind: Service, spec: {type: LoadBalancer, externalTrafficPolicy: Local, healthCheckNodePort: 30100}}`,
		observed: `{kind: Service, spec: {type: LoadBalancer, externalTrafficPolicy: Local, healthCheckNodePort: 32100}}`,
		want:     `{kind: Service, spec: {type: LoadBalancer, externalTrafficPolicy: Local, healthCheckNodePort: 32100}}`,
	}, {
		name:     "ExternalName: nothing is assigned",
		gk:       gkService,
		desired:  `{kind: Service, spec: {type: ExternalName, externalName: db.example.com}}`,
		observed: `{kind: Service, spec: {type: ClusterIP, clusterIP: 10.2.0.1, ipFamilies: [IPv4]}}`,
		want:     `{kind: Service, spec: {type: ExternalName, externalName: db.example.com}}`,
	}, {
		name: "Job, new copy: no generated selector or labels, the user's labels stay",
		gk:   gkJob,
		desired: `{kind: Job, spec: {selector: {matchLabels: {batch.kubernetes.io/controller-uid: u1}}, manualSelector: false,
			template: {metadata: {labels: {app: m, controller-uid: u1, batch.kubernetes.io/controller-uid: u1, job-name: j, batch.kubernetes.io/job-name: j}}}}}`,
		want: `{kind: Job, spec: {manualSelector: false, template: {metadata: {labels: {app: m}}}}}`,
	}, {
		name: "Job, existing copy: the destination's selector and labels",
		gk:   gkJob,
		desired: `{kind: Job, spec: {selector: {matchLabels: {batch.kubernetes.io/controller-uid: u1}},
			template: {metadata: {labels: {app: m, controller-uid: u1, batch.kubernetes.io/controller-uid: u1, job-name: j, batch.kubernetes.io/job-name: j}}}}}`,
		observed: `{kind: Job, spec: {selector: {matchLabels: {batch.kubernetes.io/controller-uid: u2}},
			template: {metadata: {labels: {app: old, controller-uid: u2, batch.kubernetes.io/controller-uid: u2, job-name: j, batch.kubernetes.io/job-name: j}}}}}`,
		want: `{kind: Job, spec: {selector: {matchLabels: {batch.kubernetes.io/controller-uid: u2}},
			template: {metadata: {labels: {app: m, controller-uid: u2, batch.kubernetes.io/controller-uid: u2, job-name: j, batch.kubernetes.io/job-name: j}}}}}`,
	}, {
		name:    "Job with manualSelector: the source's selector is copied",
		gk:      gkJob,
		desired: `{kind: Job, spec: {manualSelector: true, selector: {matchLabels: {run: x}}, template: {metadata: {labels: {run: x}}}}}`,
		want:    `{kind: Job, spec: {manualSelector: true, selector: {matchLabels: {run: x}}, template: {metadata: {labels: {run: x}}}}}`,
	}, {
		name: "PVC: volume and binding annotations are the destination's",
		gk:   gkPVC,
		desired: `{kind: PersistentVolumeClaim, metadata: {annotations: {pv.kubernetes.io/bind-completed: "yes", team: a}},
			spec: {volumeName: pv-1, resources: {requests: {storage: 1Gi}}}}`,
		observed: `{kind: PersistentVolumeClaim, metadata: {annotations: {volume.kubernetes.io/selected-node: n2}}, spec: {volumeName: pv-9}}`,
		want: `{kind: PersistentVolumeClaim, metadata: {annotations: {team: a, volume.kubernetes.io/selected-node: n2}},
			spec: {volumeName: pv-9, resources: {requests: {storage: 1Gi}}}}`,
	}, {
		name:    "PVC, new copy: unbound",
		gk:      gkPVC,
		desired: `{kind: PersistentVolumeClaim, metadata: {annotations: {pv.kubernetes.io/bind-completed: "yes"}}, spec: {volumeName: pv-1}}`,
		want:    `{kind: PersistentVolumeClaim, metadata: {}, spec: {}}`,
	}, {
		name:     "ServiceAccount: token secrets are the destination's",
		gk:       gkSA,
		desired:  `{kind: ServiceAccount, secrets: [{name: t1}], imagePullSecrets: [{name: reg}]}`,
		observed: `{kind: ServiceAccount, secrets: [{name: t2}]}`,
		want:     `{kind: ServiceAccount, secrets: [{name: t2}], imagePullSecrets: [{name: reg}]}`,
	}, {
		name:     "Deployment: the revision annotation is the destination's",
		gk:       gkDeployment,
		desired:  `{kind: Deployment, metadata: {annotations: {deployment.kubernetes.io/revision: "4"}}, spec: {replicas: 3}}`,
		observed: `{kind: Deployment, metadata: {annotations: {deployment.kubernetes.io/revision: "1"}}, spec: {replicas: 2}}`,
		want:     `{kind: Deployment, metadata: {annotations: {deployment.kubernetes.io/revision: "1"}}, spec: {replicas: 3}}`,
	}, {
		name:     "ignoreFields: an HPA's replicas are kept",
		gk:       gkDeployment,
		ignore:   []string{"spec.replicas"},
		desired:  `{kind: Deployment, spec: {replicas: 3, template: {spec: {containers: [{name: app, image: v2}]}}}}`,
		observed: `{kind: Deployment, spec: {replicas: 7, template: {spec: {containers: [{name: app, image: v1}]}}}}`,
		want:     `{kind: Deployment, spec: {replicas: 7, template: {spec: {containers: [{name: app, image: v2}]}}}}`,
	}, {
		name:    "ignoreFields on a new copy: the source's value",
		gk:      gkDeployment,
		ignore:  []string{"spec.replicas"},
		desired: `{kind: Deployment, spec: {replicas: 3}}`,
		want:    `{kind: Deployment, spec: {replicas: 3}}`,
	}, {
		name:     "ignoreFields: an injected sidecar is kept, the source's containers follow the source",
		gk:       schema.GroupKind{Group: "apps", Kind: "StatefulSet"},
		ignore:   []string{"spec.template.spec.containers[name=istio-proxy]", "metadata.annotations.sidecar\\.istio\\.io/status"},
		desired:  `{kind: StatefulSet, spec: {template: {spec: {containers: [{name: app, image: v2}]}}}}`,
		observed: `{kind: StatefulSet, metadata: {annotations: {sidecar.istio.io/status: injected}}, spec: {template: {spec: {containers: [{name: app, image: v1}, {name: istio-proxy, image: proxy}]}}}}`,
		want:     `{kind: StatefulSet, metadata: {annotations: {sidecar.istio.io/status: injected}}, spec: {template: {spec: {containers: [{name: app, image: v2}, {name: istio-proxy, image: proxy}]}}}}`,
	}, {
		name:     "ignoreFields with [*]: every container's resources are the cluster's",
		gk:       schema.GroupKind{Group: "apps", Kind: "StatefulSet"},
		ignore:   []string{"spec.template.spec.containers[*].resources"},
		desired:  `{kind: StatefulSet, spec: {template: {spec: {containers: [{name: a, image: v2, resources: {limits: {cpu: "1"}}}, {name: b}]}}}}`,
		observed: `{kind: StatefulSet, spec: {template: {spec: {containers: [{name: a, image: v1, resources: {limits: {cpu: "2"}}}, {name: b, resources: {requests: {cpu: "1"}}}]}}}}`,
		want:     `{kind: StatefulSet, spec: {template: {spec: {containers: [{name: a, image: v2, resources: {limits: {cpu: "2"}}}, {name: b, resources: {requests: {cpu: "1"}}}]}}}}`,
	}, {
		name:    "a kind with nothing assigned is copied as it is",
		gk:      schema.GroupKind{Kind: "ConfigMap"},
		desired: `{kind: ConfigMap, data: {a: b}}`,
		want:    `{kind: ConfigMap, data: {a: b}}`,
	}} {
		t.Run(tc.name, func(t *testing.T) {
			var ignore []rules.FieldPath
			for _, p := range tc.ignore {
				ignore = append(ignore, rules.MustParseFieldPath(p))
			}
			desired, observed := fieldsObj(t, tc.desired), fieldsObj(t, tc.observed)
			before := desired.DeepCopy()
			got := KeptFor(tc.gk, ignore).Localize(desired, observed)
			if diff := cmp.Diff(fieldsObj(t, tc.want).Object, got.Object); diff != "" {
				t.Errorf("Localize (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(before.Object, desired.Object); diff != "" {
				t.Errorf("Localize modified desired (-before +after):\n%s", diff)
			}
		})
	}
}

// TestDecideKeepsAssignedFields: the planner creates a Service copy without the source's
// address, never counts the destination's address as drift, and still restores the rest.
func TestDecideKeepsAssignedFields(t *testing.T) {
	const origin types.UID = "uid-origin"
	src := fieldsObj(t, `{apiVersion: v1, kind: Service, metadata: {name: s, namespace: n}, spec: {clusterIP: 10.1.0.5, clusterIPs: [10.1.0.5], ports: [{port: 80}]}}`)
	Mark(src, origin, "svc")
	cand := Candidate{Rule: "svc", Peer: "c1", PeerID: origin, Origin: origin, Object: src, Kept: KeptFor(gkService, nil)}

	create := Decide(Input{LocalID: "uid-local", Candidates: []Candidate{cand}})
	if create.Type != ActionCreate {
		t.Fatalf("no copy: %s, want create", create.Type)
	}
	if _, found, _ := unstructured.NestedString(create.Object.Object, "spec", "clusterIP"); found {
		t.Errorf("the created copy carries the source's clusterIP: %v", create.Object.Object["spec"])
	}

	observed := src.DeepCopy()
	_ = unstructured.SetNestedField(observed.Object, "10.2.0.9", "spec", "clusterIP")
	_ = unstructured.SetNestedStringSlice(observed.Object, []string{"10.2.0.9"}, "spec", "clusterIPs")
	if act := Decide(Input{LocalID: "uid-local", Observed: observed, Candidates: []Candidate{cand}}); act.Type != ActionNone {
		t.Errorf("copy with the destination's address: %s, want none", act.Type)
	}
	if d := cand.Drift(observed, false); len(d) != 0 {
		t.Errorf("Drift = %v, want none", d)
	}

	edited := observed.DeepCopy()
	_ = unstructured.SetNestedSlice(edited.Object, []any{map[string]any{"port": int64(81)}}, "spec", "ports")
	act := Decide(Input{LocalID: "uid-local", Observed: edited, Candidates: []Candidate{cand}})
	if act.Type != ActionUpdate {
		t.Fatalf("hand-edited port: %s, want update", act.Type)
	}
	if ip, _, _ := unstructured.NestedString(act.Object.Object, "spec", "clusterIP"); ip != "10.2.0.9" {
		t.Errorf("the update's clusterIP = %q, want the destination's 10.2.0.9", ip)
	}
	ports, _, _ := unstructured.NestedSlice(act.Object.Object, "spec", "ports")
	if diff := cmp.Diff([]any{map[string]any{"port": int64(80)}}, ports); diff != "" {
		t.Errorf("the update does not restore the source's ports (-want +got):\n%s", diff)
	}
}

// TestWithhold: ReportOnly writes nothing and CreateOnly only creates; both say what they
// hold back.
func TestWithhold(t *testing.T) {
	obj := fieldsObj(t, `{kind: ConfigMap, metadata: {name: c, labels: {cluster-registry.k8s.cisco.com/synced-by-rule: r}}}`)
	src := &Candidate{Rule: "r", Object: obj}
	for _, tc := range []struct {
		mode         v1alpha1.SyncMode
		act          Action
		wantType     ActionType
		wantWithheld ActionType
	}{
		{"", Action{Type: ActionCreate, Source: src, Object: obj}, ActionCreate, ""},
		{v1alpha1.SyncModeEnforce, Action{Type: ActionUpdate, Source: src, Object: obj}, ActionUpdate, ""},
		{v1alpha1.SyncModeCreateOnly, Action{Type: ActionCreate, Source: src, Object: obj}, ActionCreate, ""},
		{v1alpha1.SyncModeCreateOnly, Action{Type: ActionUpdate, Source: src, Object: obj}, ActionNone, ActionUpdate},
		{v1alpha1.SyncModeCreateOnly, Action{Type: ActionDelete, Object: obj}, ActionNone, ActionDelete},
		{v1alpha1.SyncModeReportOnly, Action{Type: ActionCreate, Source: src, Object: obj}, ActionNone, ActionCreate},
		{v1alpha1.SyncModeReportOnly, Action{Type: ActionUpdate, Source: src, Object: obj}, ActionNone, ActionUpdate},
		{v1alpha1.SyncModeReportOnly, Action{Type: ActionDelete, Object: obj}, ActionNone, ActionDelete},
		{v1alpha1.SyncModeReportOnly, Action{Type: ActionConflict, Source: src, Object: obj}, ActionConflict, ""},
		{v1alpha1.SyncModeReportOnly, Action{Type: ActionNone, Source: src}, ActionNone, ""},
	} {
		t.Run(string(tc.mode)+"/"+string(tc.act.Type), func(t *testing.T) {
			got := Withhold(tc.act, map[string]v1alpha1.SyncMode{"r": tc.mode})
			if got.Type != tc.wantType || got.Withheld != tc.wantWithheld {
				t.Errorf("Withhold = %s (withheld %q), want %s (withheld %q)", got.Type, got.Withheld, tc.wantType, tc.wantWithheld)
			}
			if got.Withheld != "" && got.Object == nil {
				t.Error("a withheld action must keep the object it would write")
			}
		})
	}
}

// TestClassifyWriteError: the API server's answers, as it gives them, are classified.
func TestClassifyWriteError(t *testing.T) {
	jobGK := schema.GroupKind{Group: "batch", Kind: "Job"}
	for _, tc := range []struct {
		name        string
		err         error
		wantReason  string
		wantFields  []string
		wantLasting bool
	}{
		{"Job template", apierrors.NewInvalid(jobGK, "j", field.ErrorList{field.Invalid(field.NewPath("spec", "template"), "x", "field is immutable")}),
			v1alpha1.ReasonImmutableField, []string{"spec.template"}, true},
		{"Service clusterIP", apierrors.NewInvalid(schema.GroupKind{Kind: "Service"}, "s", field.ErrorList{
			field.Invalid(field.NewPath("spec", "clusterIPs").Index(0), []string{"None"}, "may not change once set")}),
			v1alpha1.ReasonImmutableField, []string{"spec.clusterIPs[0]"}, true},
		{"StatefulSet spec", apierrors.NewInvalid(schema.GroupKind{Group: "apps", Kind: "StatefulSet"}, "s", field.ErrorList{
			field.Forbidden(field.NewPath("spec"), "updates to statefulset spec for fields other than 'replicas' are forbidden")}),
			v1alpha1.ReasonImmutableField, []string{"spec"}, true},
		{"invalid", apierrors.NewInvalid(schema.GroupKind{Kind: "Service"}, "s", field.ErrorList{field.Invalid(field.NewPath("spec", "clusterIP"), "10.1.0.5", "provided IP is not in the valid range")}),
			v1alpha1.ReasonInvalidCopy, []string{"spec.clusterIP"}, false},
		{"forbidden", apierrors.NewForbidden(schema.GroupResource{Resource: "secrets"}, "s", nil), v1alpha1.ReasonWriteForbidden, nil, false},
		{"member not granted", apierrors.NewForbidden(schema.GroupResource{Resource: "configmaps"}, "c",
			errors.New(`User "system:serviceaccount:cluster-registry:member-b" cannot create resource "configmaps" in API group "" in the namespace "x"`)),
			v1alpha1.ReasonNotGranted, nil, false},
		{"controller forbidden", apierrors.NewForbidden(schema.GroupResource{Resource: "configmaps"}, "c",
			errors.New(`User "system:serviceaccount:cluster-registry:cluster-registry-controller" cannot create resource "configmaps" in API group "" in the namespace "x"`)),
			v1alpha1.ReasonWriteForbidden, nil, false},
		{"pod security", apierrors.NewForbidden(schema.GroupResource{Resource: "pods"}, "p",
			errors.New(`violates PodSecurity "baseline:latest": privileged (container "c" must not set securityContext.privileged=true)`)),
			v1alpha1.ReasonWriteForbidden, nil, false},
		{"too large", apierrors.NewRequestEntityTooLargeError("limit is 3145728"), v1alpha1.ReasonCopyTooLarge, nil, false},
		{"namespace", ErrNamespaceMissing, v1alpha1.ReasonNamespaceMissing, nil, false},
		{"server", apierrors.NewInternalError(errTest), v1alpha1.ReasonWriteFailed, nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := ClassifyWriteError(tc.err)
			if got.Reason != tc.wantReason || got.Lasting != tc.wantLasting {
				t.Errorf("ClassifyWriteError = %s (lasting %v), want %s (lasting %v)", got.Reason, got.Lasting, tc.wantReason, tc.wantLasting)
			}
			if diff := cmp.Diff(tc.wantFields, got.Fields); diff != "" {
				t.Errorf("fields (-want +got):\n%s", diff)
			}
		})
	}
}

type testError string

func (e testError) Error() string { return string(e) }

const errTest = testError("etcdserver: leader changed")
