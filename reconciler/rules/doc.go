// Package rules is the pure decision code of the sync engine: it compiles a
// ResourceSyncRule, decides which peers are sources and which objects match, and computes
// the copy written locally. It does no I/O. The controller and the CLI's sync-diff preview
// call the same functions, so the preview is exact.
//
// A compiled *Rule is immutable and safe for concurrent use. Match, TargetKey, SourceKeys
// and Apply are deterministic: the same inputs always give the same output, and they never
// modify their inputs.
//
// # Sources
//
// A peer is a source of a rule when, for every entry of spec.clusterFeatureMatch, at least
// one of the peer's ClusterFeatures satisfies it: spec.featureName equals featureName (when
// set), and the ClusterFeature's labels satisfy matchLabels and matchExpressions (label
// selector semantics). An entry with none of these set needs just one ClusterFeature. A rule
// without entries takes every peer as a source.
//
// # Matching
//
// An object matches a rule when at least one entry of spec.rules matches it; the mutations
// of every matching entry are merged (see below). A rule whose spec.rules is empty matches
// nothing, as in the seed. An object whose apiVersion or kind is set and differs from
// spec.groupVersionKind never matches.
//
// An entry of spec.rules matches when any entry of its match list matches; an empty match
// list matches every object. An entry of match ANDs its non-empty parts:
//
//   - objectKey.name, objectKey.namespace: each, when set, equals the object's name or
//     namespace exactly.
//   - namespaces: the object's namespace equals one of them. A cluster-scoped object has no
//     namespace, so it never matches an entry that lists namespaces.
//   - labels: at least one of the label selectors matches the object's labels (Kubernetes
//     label selector semantics; an empty selector {} matches every object).
//   - annotations: at least one annotation selector matches. A selector matches when every
//     matchAnnotations entry is present with an equal value and every matchExpressions
//     requirement holds: In (the annotation is present with one of the values), NotIn (it
//     is absent or its value is none of the values), Exists, DoesNotExist. Values are
//     compared as exact strings.
//   - content: for every entry, the value found at key (a path, see below) equals value. A
//     missing path, a null, an object and a list never match. An integer value matches a
//     JSON number equal to it (3 matches 3 and 3.0) and a string holding exactly its decimal
//     form ("3"). A string value matches an equal string, a boolean whose text it is
//     ("true", "false"), and a number it spells as a JSON number literal ("3" and "3.0"
//     match 3; "03" and " 3" do not). A key in braces that is not in the path syntax below
//     (for example "{.spec.containers[*].image}") is evaluated as a kubectl JSONPath; the
//     entry holds when any value it finds equals value.
//
// # Mutations
//
// The mutations of the matching entries of spec.rules are merged in order:
// labels.add and annotations.add are combined (a later entry wins on the same key),
// labels.remove and annotations.remove are united, overrides are concatenated, syncStatus
// holds if any entry sets it, and groupVersionKind, name and namespace come from the first
// matching entry that sets them (a name or namespace rewrite with every field empty counts
// as not set).
//
// The copy of an object (Apply) is built in this order:
//
//  1. A deep copy of the source whose metadata keeps only name, namespace, labels and
//     annotations (so uid, resourceVersion, generation, creationTimestamp,
//     deletionTimestamp, deletionGracePeriodSeconds, managedFields, selfLink,
//     ownerReferences, finalizers and generateName are dropped), without the
//     kubectl.kubernetes.io/last-applied-configuration annotation (it describes the
//     origin's last apply, not the copy), and without status unless syncStatus is set.
//  2. groupVersionKind: apiVersion and kind of the copy are set; the group is empty for the
//     core group. When they differ from the source's, the annotation
//     cluster-registry.k8s.cisco.com/original-group-version-kind records the source's as
//     "<group>/<version>/<kind>", with an empty group for the core group: "/v1/Secret",
//     "apps/v1/Deployment".
//  3. labels.add, then labels.remove (a key both added and removed is removed).
//  4. annotations.add, then annotations.remove.
//  5. name and namespace rewrites (see below).
//  6. overrides, in order.
//
// Empty labels and annotations maps are left out of the copy.
//
// # Name and namespace rewrites
//
// mutations.name and mutations.namespace rewrite the copy's name and namespace in this
// order: strip stripPrefix, strip stripSuffix, add addPrefix, add addSuffix. When
// stripPrefix or stripSuffix is set and the source's name (namespace) does not carry it, or
// nothing would be left after stripping, the object is not synced: this is how each shard
// of a sharded layout picks its own objects ("app-eu1" with stripSuffix "-eu1" becomes
// "app"; "app-us1" is not synced). A namespace rewrite of a cluster-scoped object is
// ignored. A rewritten name must be a DNS-1123 subdomain (when the source's name is not
// one, as some kinds allow, a valid path segment name of at most 253 characters) and a
// rewritten namespace a DNS-1123 label; otherwise Apply fails.
//
// # Overrides
//
// An override replaces (type replace, the default) or removes (type remove) the value at
// path in the copy. Replace creates missing (or null) intermediate objects; it fails when the path
// crosses a value that is not an object or list, when a list index is out of range (a list
// cannot be appended to) or when no list element matches a selector. Remove of a path that
// does not exist does nothing; a path ending in a list index or selector removes that
// element from the list. Overrides cannot change apiVersion, kind, metadata, metadata.name
// or metadata.namespace: use groupVersionKind, name and namespace mutations.
//
// Path syntax, shared by override paths and content keys:
//
//   - Keys are separated by dots: data.mode, metadata.labels.app. A leading dot is
//     allowed (.data.mode), and so is the JSONPath-like form in braces ({.data.mode}).
//   - A backslash escapes the next character, so a key may hold a dot or a bracket:
//     metadata.annotations.example\.com/owner. A key may also be quoted in brackets:
//     metadata.annotations['example.com/owner'] (or with double quotes).
//   - [N] indexes a list: spec.containers[0].image. A key made of digits also indexes a
//     list when the value is a list (spec.containers.0.image, as in gjson).
//   - [key=value] selects the first list element (an object) whose field key equals value,
//     compared like a string content value (so [containerPort=80] matches the number 80):
//     spec.containers[name=app].image. [?(@.key=="value")] is the same in JSONPath
//     spelling. The value may be quoted; a backslash escapes "]".
//   - A path starting with "/" is a JSON Pointer (RFC 6901), as the seed's overrides used:
//     /spec/ports/0/name, with ~1 for "/" and ~0 for "~" in keys; a token of digits
//     indexes a list.
//
// The value of an override is a Go text/template (https://pkg.go.dev/text/template)
// rendered with missingkey=error over:
//
//   - .Object: the source object, e.g. {{ .Object.metadata.name }};
//   - .Cluster: the source peer's Cluster, e.g. {{ .Cluster.metadata.name }};
//   - .LocalCluster: this cluster's Cluster, e.g. {{ .LocalCluster.spec.clusterID }}.
//
// They are the objects' JSON content (lower-case field names); the accessors GetName,
// GetNamespace, GetLabels, GetAnnotations, GetUID, GetAPIVersion and GetKind of the seed's
// templates also work ({{ .Object.GetName }}). A missing key is an error; to read an
// optional map entry use index, which gives an empty value instead:
// {{ index .Object.metadata.labels "tier" | default "none" }}.
//
// Besides text/template's built-in functions, these are available (Sprig's argument
// order): default DEFAULT VALUE, lower, upper, trimPrefix PREFIX S, trimSuffix SUFFIX S,
// replace OLD NEW S, quote (double-quoted Go string), toJSON (also spelled toJson).
//
// A value without "{{" is used as it is. With parseValue the rendered text is parsed as
// YAML (or JSON) and the resulting structure is set (integers stay integers); without it
// the text is set as a string.
//
// YAML is read as kubectl reads it (YAML 1.1: yes, no, on and off are booleans).
//
// Limits keep a rule from stalling the engine: a value is at most MaxTemplateSize bytes;
// recursive templates are rejected when the rule is compiled, and so are templates that,
// with their {{template}} calls expanded, exceed MaxTemplateSteps parse nodes; one
// rendering produces at most MaxRenderedSize bytes, spends at most MaxRangeIterations
// steps in range actions (each iteration costs the size of the range's body) and builds at
// most MaxRenderWork bytes in functions such as printf, replace and toJSON.
package rules
