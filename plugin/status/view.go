package status

import (
	"fmt"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/duration"

	"github.com/kubectl-registry/kubectl-registry/reconciler/api/v1alpha1"
	"github.com/kubectl-registry/kubectl-registry/reconciler/conditions"
	"github.com/kubectl-registry/kubectl-registry/reconciler/kubeconfig"
)

// View is the group as the controller of one cluster reports it: the machine-readable
// document of "kubectl registry status -o json|yaml". Its field names are stable.
type View struct {
	// Context is the kubeconfig context the view was read through.
	Context string `json:"context,omitempty"`
	// Clusters are the Cluster CRs of that cluster, sorted by name.
	Clusters []ClusterInfo `json:"clusters"`
	// Rules are the ResourceSyncRules of that cluster, sorted by name.
	Rules []RuleInfo `json:"rules"`
	// Events are, with --events, the last warning events of the registry's objects on
	// that cluster, newest first.
	Events []EventInfo `json:"events,omitempty"`
}

// ClusterInfo is the status of one Cluster CR as its controller wrote it.
type ClusterInfo struct {
	Name string `json:"name"`
	// ID is spec.clusterID: the UID of the cluster's kube-system namespace.
	ID string `json:"id"`
	// Type is Local or Peer ("" until the controller has looked at it).
	Type string `json:"type"`
	// Legacy is set on a peer this cluster's admin named a legacy member (annotation
	// cluster-registry.k8s.cisco.com/legacy-peer: the seed's controller): it is issued
	// a reader credential in the clear and read with the Secret its Cluster names.
	Legacy bool `json:"legacy,omitempty"`
	// State is status.state: Ready, Failed, Disabled, MissingAuthInfo, InvalidAuthInfo.
	State string `json:"state"`
	// Ready and Synced are the statuses (True, False, Unknown) of the Ready and
	// ClustersSynced conditions; Unknown when the condition is missing.
	Ready  string `json:"ready"`
	Synced string `json:"synced"`
	// LastHeartbeatTime is the lastHeartbeatTime of the Ready condition.
	LastHeartbeatTime *metav1.Time `json:"lastHeartbeatTime,omitempty"`
	Version           string       `json:"version,omitempty"`
	// ControllerVersion is the version of the cluster's kubectl-registry controller, as
	// its Cluster's status reports it (empty when it reports none).
	ControllerVersion string `json:"controllerVersion,omitempty"`
	Provider          string `json:"provider,omitempty"`
	Distribution      string `json:"distribution,omitempty"`
	// Message is status.message, in full.
	Message string `json:"message,omitempty"`
	// Advertised is the API server address the cluster advertises (its Cluster's
	// kubernetesApiEndpoints, the one without a client network or else the first).
	Advertised string `json:"advertised,omitempty"`
	// ReachedAt is the address this cluster reaches the peer at: the server of its reader
	// kubeconfig, pinned at join (join --server may have chosen it); empty when the
	// Secret cannot be read.
	ReachedAt string `json:"reachedAt,omitempty"`
	// ReaderKey is the ReaderKeyReady condition: on the local Cluster, this cluster's key
	// pair; on a peer's, the key the peer advertises, as an issuer judges it.
	ReaderKey *CondInfo `json:"readerKey,omitempty"`
	// ReaderCredential is a peer's ReaderCredentialReady condition: read with the
	// credential the peer issued this cluster, or with its bootstrap credential.
	ReaderCredential *CondInfo `json:"readerCredential,omitempty"`
	// Relays is the local Cluster's RelaysAgree condition.
	Relays *CondInfo `json:"relays,omitempty"`
}

// CondInfo is one condition of a Cluster.
type CondInfo struct {
	Status  string `json:"status"`
	Reason  string `json:"reason,omitempty"`
	Message string `json:"message,omitempty"`
}

// condInfo returns condition t of c, or nil.
func condInfo(c v1alpha1.Cluster, t v1alpha1.ClusterConditionType) *CondInfo {
	cond, ok := conditions.Get(c.Status.Conditions, t)
	if !ok {
		return nil
	}
	return &CondInfo{Status: string(cond.Status), Reason: cond.Reason, Message: cond.Message}
}

// RuleInfo is the status of one ResourceSyncRule as the controller wrote it.
type RuleInfo struct {
	Name    string `json:"name"`
	Group   string `json:"group,omitempty"`
	Version string `json:"version"`
	Kind    string `json:"kind"`
	// Ready is the status of the Ready condition; Unknown when missing.
	Ready string `json:"ready"`
	// SourcesSyncing counts the sources in state Syncing; SourcesSelected those not in
	// state NotSelected.
	SourcesSyncing  int                   `json:"sourcesSyncing"`
	SourcesSelected int                   `json:"sourcesSelected"`
	Sources         []v1alpha1.RuleSource `json:"sources,omitempty"`
	SyncedObjects   int32                 `json:"syncedObjects"`
	Conflicts       int32                 `json:"conflicts"`
	LastSyncTime    *metav1.Time          `json:"lastSyncTime,omitempty"`
	// Message is the first of: the Ready condition's message when False, the Conflict
	// condition's when True, the Degraded condition's when True.
	Message string `json:"message,omitempty"`
}

// MultiView is the document of "kubectl registry status --contexts ... -o json|yaml":
// one View per context, in the order of --contexts.
type MultiView struct {
	Contexts []ContextView `json:"contexts"`
}

// ContextView is the view of one context, or why it could not be read.
type ContextView struct {
	View  `json:",inline"`
	Error string `json:"error,omitempty"`
}

// newView builds the view from the listed CRs. It is pure.
// reachedAt maps a Cluster's name to the server of its reader kubeconfig (nil for none).
func newView(context string, clusters []v1alpha1.Cluster, rules []v1alpha1.ResourceSyncRule, reachedAt map[string]string) View {
	v := View{Context: context, Clusters: []ClusterInfo{}, Rules: []RuleInfo{}}
	for _, c := range clusters {
		info := clusterInfo(c)
		info.ReachedAt = reachedAt[c.Name]
		v.Clusters = append(v.Clusters, info)
	}
	for _, r := range rules {
		v.Rules = append(v.Rules, ruleInfo(r))
	}
	sort.Slice(v.Clusters, func(i, j int) bool { return v.Clusters[i].Name < v.Clusters[j].Name })
	sort.Slice(v.Rules, func(i, j int) bool { return v.Rules[i].Name < v.Rules[j].Name })
	return v
}

func clusterInfo(c v1alpha1.Cluster) ClusterInfo {
	info := ClusterInfo{
		Name:              c.Name,
		ID:                string(c.Spec.ClusterID),
		Type:              string(c.Status.Type),
		State:             string(c.Status.State),
		Ready:             string(corev1.ConditionUnknown),
		Synced:            string(corev1.ConditionUnknown),
		Version:           c.Status.Version,
		ControllerVersion: c.Status.ControllerVersion,
		Provider:          c.Status.Provider,
		Distribution:      c.Status.Distribution,
		Message:           c.Status.Message,
		Legacy:            v1alpha1.IsLegacyPeer(&c),
		ReaderKey:         condInfo(c, v1alpha1.ClusterConditionReaderKeyReady),
		ReaderCredential:  condInfo(c, v1alpha1.ClusterConditionReaderCredentialReady),
		Relays:            condInfo(c, v1alpha1.ClusterConditionRelaysAgree),
	}
	for _, ep := range c.Spec.KubernetesAPIEndpoints {
		if info.Advertised == "" || ep.ClientNetwork == "" {
			info.Advertised = ep.ServerAddress
			if s, err := kubeconfig.NormalizeServer(ep.ServerAddress); err == nil {
				info.Advertised = s
			}
		}
		if ep.ClientNetwork == "" {
			break
		}
	}
	if cond, ok := conditions.Get(c.Status.Conditions, v1alpha1.ClusterConditionReady); ok {
		if cond.Status != "" {
			info.Ready = string(cond.Status)
		}
		if !cond.LastHeartbeatTime.IsZero() {
			t := cond.LastHeartbeatTime
			info.LastHeartbeatTime = &t
		}
	}
	if cond, ok := conditions.Get(c.Status.Conditions, v1alpha1.ClusterConditionClustersSynced); ok && cond.Status != "" {
		info.Synced = string(cond.Status)
	}
	return info
}

func ruleInfo(r v1alpha1.ResourceSyncRule) RuleInfo {
	info := RuleInfo{
		Name:          r.Name,
		Group:         r.Spec.GVK.Group,
		Version:       r.Spec.GVK.Version,
		Kind:          r.Spec.GVK.Kind,
		Ready:         string(metav1.ConditionUnknown),
		Sources:       r.Status.Sources,
		SyncedObjects: r.Status.SyncedObjects,
		Conflicts:     r.Status.Conflicts,
		LastSyncTime:  r.Status.LastSyncTime,
	}
	conds := r.Status.Conditions
	ready := meta.FindStatusCondition(conds, v1alpha1.RuleConditionReady)
	if ready != nil && ready.Status != "" {
		info.Ready = string(ready.Status)
	}
	for _, s := range r.Status.Sources {
		if s.State == v1alpha1.SourceNotSelected {
			continue
		}
		info.SourcesSelected++
		if s.State == v1alpha1.SourceSyncing {
			info.SourcesSyncing++
		}
	}
	switch {
	case ready != nil && ready.Status == metav1.ConditionFalse && ready.Message != "":
		info.Message = ready.Message
	case meta.IsStatusConditionTrue(conds, v1alpha1.RuleConditionConflict) && meta.FindStatusCondition(conds, v1alpha1.RuleConditionConflict).Message != "":
		info.Message = meta.FindStatusCondition(conds, v1alpha1.RuleConditionConflict).Message
	case meta.IsStatusConditionTrue(conds, v1alpha1.RuleConditionDegraded):
		info.Message = meta.FindStatusCondition(conds, v1alpha1.RuleConditionDegraded).Message
	}
	return info
}

// kindShort is the short form of a group/version/kind: Kind.version.group, or
// Kind.version for the core group (like kubectl's resource.version.group).
func kindShort(group, version, kind string) string {
	s := kind + "." + version
	if group != "" {
		s += "." + group
	}
	return s
}

// maxMessage is how many characters of a message the tables show.
const maxMessage = 60

// truncate shortens s to at most n runes, ending with "..." when cut, and makes it one
// line.
func truncate(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-3]) + "..."
}

// orNone shows an empty value as kubectl does.
func orNone(s string) string {
	if s == "" {
		return "<none>"
	}
	return s
}

// age is the kubectl-style age of t at now, or <unknown>.
func age(t *metav1.Time, now time.Time) string {
	if t == nil || t.IsZero() {
		return "<unknown>"
	}
	return duration.HumanDuration(now.Sub(t.Time))
}

// sources is the SOURCES column: "2/3 syncing".
func sources(r RuleInfo) string {
	return fmt.Sprintf("%d/%d syncing", r.SourcesSyncing, r.SourcesSelected)
}
