package rules

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParsePath(t *testing.T) {
	tests := []struct {
		path    string
		want    []step
		wantErr string
	}{
		{path: "data.mode", want: []step{keyStep("data"), keyStep("mode")}},
		{path: ".data.mode", want: []step{keyStep("data"), keyStep("mode")}},
		{path: "{.data.mode}", want: []step{keyStep("data"), keyStep("mode")}},
		{path: "{data}", want: []step{keyStep("data")}},
		{path: `metadata.annotations.example\.com/x`, want: []step{keyStep("metadata"), keyStep("annotations"), keyStep("example.com/x")}},
		{path: `a\[0\]\\`, want: []step{keyStep(`a[0]\`)}},
		{path: "metadata.annotations['example.com/x']", want: []step{keyStep("metadata"), keyStep("annotations"), keyStep("example.com/x")}},
		{path: `a["it's \"q\""]`, want: []step{keyStep("a"), keyStep(`it's "q"`)}},
		{path: "spec.containers[0].image", want: []step{keyStep("spec"), keyStep("containers"), {kind: stepIndex, index: 0}, keyStep("image")}},
		{path: "a[1][2]", want: []step{keyStep("a"), {kind: stepIndex, index: 1}, {kind: stepIndex, index: 2}}},
		{path: "[3]", want: []step{{kind: stepIndex, index: 3}}},
		{path: "spec.containers.0.image", want: []step{keyStep("spec"), keyStep("containers"), {kind: stepKey, key: "0", index: 0}, keyStep("image")}},
		{path: "a.01", want: []step{keyStep("a"), {kind: stepKey, key: "01", index: -1}}},
		{path: "spec.containers[name=app].image", want: []step{keyStep("spec"), keyStep("containers"), {kind: stepSelect, key: "name", value: "app"}, keyStep("image")}},
		{path: `a[name="x=y]"]`, want: []step{keyStep("a"), {kind: stepSelect, key: "name", value: "x=y]"}}},
		{path: `a[name=x\]y]`, want: []step{keyStep("a"), {kind: stepSelect, key: "name", value: "x]y"}}},
		{path: `a[name=]`, want: []step{keyStep("a"), {kind: stepSelect, key: "name", value: ""}}},
		{path: `{.spec.containers[?(@.name=="app")].image}`, want: []step{keyStep("spec"), keyStep("containers"), {kind: stepSelect, key: "name", value: "app"}, keyStep("image")}},
		{path: `a[?(@.port == 80)]`, want: []step{keyStep("a"), {kind: stepSelect, key: "port", value: "80"}}},
		{path: "/spec/ports/0/name", want: []step{keyStep("spec"), keyStep("ports"), {kind: stepKey, key: "0", index: 0}, keyStep("name")}},
		{path: "/metadata/annotations/example.com~1x~0y", want: []step{keyStep("metadata"), keyStep("annotations"), keyStep("example.com/x~y")}},
		{path: "/", want: []step{keyStep("")}},

		{path: "", wantErr: "path is empty"},
		{path: ".", wantErr: "path has no keys"},
		{path: "{}", wantErr: "path has no keys"},
		{path: "{.a", wantErr: `path starts with "{" but does not end with "}"`},
		{path: "a..b", wantErr: "empty key at offset 2"},
		{path: "a.", wantErr: "empty key at offset 1"},
		{path: "a.[0]", wantErr: `empty key before "[" at offset 2`},
		{path: "a[0]b", wantErr: `expected "." or "[" at offset 4`},
		{path: `a\`, wantErr: "path ends with a lone backslash"},
		{path: "a[0", wantErr: `"[" at offset 1 is not closed`},
		{path: "{.a[0}", wantErr: `"[" at offset 3 is not closed`},
		{path: "a[]", wantErr: "[] at offset 1: empty brackets"},
		{path: "a[*]", wantErr: "wildcards are not supported"},
		{path: "a[-1]", wantErr: "negative indexes are not supported"},
		{path: "a[99999999999999999999]", wantErr: "bad index"},
		{path: "a[x]", wantErr: "expected an index [N], a selector [key=value] or a quoted key ['key']"},
		{path: "a[=x]", wantErr: "selector has an empty key"},
		{path: "a[b.c=x]", wantErr: `selector key "b.c" must be a single key`},
		{path: "a[?(@.name)]", wantErr: `only filters of the form ?(@.key=="value") are supported`},
		{path: "a[?(@.name=='x']", wantErr: `filter does not end with ")"`},
		{path: `a['x'y']`, wantErr: `"[" at offset 1 is not closed`},
		{path: `a['x'y]`, wantErr: "expected an index"},
		{path: "/a/-", wantErr: `the JSON Pointer token "-" (append) is not supported`},
		{path: "/a~2", wantErr: `"~" must be followed by 0 or 1`},
	}
	for _, tc := range tests {
		t.Run(tc.path, func(t *testing.T) {
			got, err := parsePath(tc.path)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("parsePath(%q) error = %v, want %q", tc.path, err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("parsePath(%q): %v", tc.path, err)
			}
			if diff := cmp.Diff(tc.want, got, cmp.AllowUnexported(step{})); diff != "" {
				t.Errorf("parsePath(%q) (-want +got):\n%s", tc.path, diff)
			}
		})
	}
}

const pathDoc = `
data: {mode: fast, "a.b": dotted}
spec:
  containers:
  - {name: app, image: nginx, ports: [{containerPort: 80}]}
  - {name: sidecar, image: envoy}
  scalar: text
  nothing: null
`

func TestSetPath(t *testing.T) {
	tests := []struct {
		path    string
		value   any
		want    string // the whole document after setting
		wantErr string
	}{
		{path: "data.mode", value: "slow", want: `
data: {mode: slow, "a.b": dotted}
spec:
  containers:
  - {name: app, image: nginx, ports: [{containerPort: 80}]}
  - {name: sidecar, image: envoy}
  scalar: text
  nothing: null
`},
		{path: "metadata.labels.app", value: "web", want: `
metadata: {labels: {app: web}}
data: {mode: fast, "a.b": dotted}
spec:
  containers:
  - {name: app, image: nginx, ports: [{containerPort: 80}]}
  - {name: sidecar, image: envoy}
  scalar: text
  nothing: null
`},
		{path: "spec.nothing.x", value: int64(1), want: `
data: {mode: fast, "a.b": dotted}
spec:
  containers:
  - {name: app, image: nginx, ports: [{containerPort: 80}]}
  - {name: sidecar, image: envoy}
  scalar: text
  nothing: {x: 1}
`},
		{path: "spec.containers[name=sidecar].image", value: "envoy:2", want: `
data: {mode: fast, "a.b": dotted}
spec:
  containers:
  - {name: app, image: nginx, ports: [{containerPort: 80}]}
  - {name: sidecar, image: "envoy:2"}
  scalar: text
  nothing: null
`},
		{path: "spec.containers[0].ports[containerPort=80].name", value: "http", want: `
data: {mode: fast, "a.b": dotted}
spec:
  containers:
  - {name: app, image: nginx, ports: [{containerPort: 80, name: http}]}
  - {name: sidecar, image: envoy}
  scalar: text
  nothing: null
`},
		{path: "spec.containers.1", value: map[string]any{"name": "other"}, want: `
data: {mode: fast, "a.b": dotted}
spec:
  containers:
  - {name: app, image: nginx, ports: [{containerPort: 80}]}
  - {name: other}
  scalar: text
  nothing: null
`},
		{path: `data.a\.b`, value: "x", want: `
data: {mode: fast, "a.b": x}
spec:
  containers:
  - {name: app, image: nginx, ports: [{containerPort: 80}]}
  - {name: sidecar, image: envoy}
  scalar: text
  nothing: null
`},
		{path: "spec.containers[2].image", value: "x", wantErr: "index 2 is out of range: spec.containers has 2 elements"},
		{path: "spec.containers[name=db].image", value: "x", wantErr: "no element of spec.containers has name=db"},
		{path: "spec.containers.image", value: "x", wantErr: "spec.containers is a list, not an object"},
		{path: "spec.scalar.x", value: "x", wantErr: "spec.scalar is a string, not an object or a list"},
		{path: "data[0]", value: "x", wantErr: "data is an object, not a list"},
		{path: "spec.missing[0]", value: "x", wantErr: "spec.missing does not exist (a list is not created)"},
		{path: "[0]", value: "x", wantErr: "the object is an object, not a list"},
	}
	for _, tc := range tests {
		t.Run(tc.path, func(t *testing.T) {
			doc := objectContent(t, pathDoc)
			steps, err := parsePath(tc.path)
			if err != nil {
				t.Fatal(err)
			}
			err = setPath(doc, steps, tc.value)
			if tc.wantErr != "" {
				if err == nil || err.Error() != tc.wantErr {
					t.Fatalf("setPath error = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(objectContent(t, tc.want), doc); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestRemovePath(t *testing.T) {
	tests := []struct {
		path string
		want string
	}{
		{path: "data.mode", want: `
data: {"a.b": dotted}
spec:
  containers:
  - {name: app, image: nginx, ports: [{containerPort: 80}]}
  - {name: sidecar, image: envoy}
  scalar: text
  nothing: null
`},
		{path: "spec.containers[name=app]", want: `
data: {mode: fast, "a.b": dotted}
spec:
  containers:
  - {name: sidecar, image: envoy}
  scalar: text
  nothing: null
`},
		{path: "spec.containers[1]", want: `
data: {mode: fast, "a.b": dotted}
spec:
  containers:
  - {name: app, image: nginx, ports: [{containerPort: 80}]}
  scalar: text
  nothing: null
`},
		{path: "spec.containers[0].ports[containerPort=80]", want: `
data: {mode: fast, "a.b": dotted}
spec:
  containers:
  - {name: app, image: nginx, ports: []}
  - {name: sidecar, image: envoy}
  scalar: text
  nothing: null
`},
		{path: "/spec/containers/0/image", want: `
data: {mode: fast, "a.b": dotted}
spec:
  containers:
  - {name: app, ports: [{containerPort: 80}]}
  - {name: sidecar, image: envoy}
  scalar: text
  nothing: null
`},
		// Paths that do not exist change nothing.
		{path: "data.missing", want: pathDoc},
		{path: "missing.deeper.still", want: pathDoc},
		{path: "spec.containers[5]", want: pathDoc},
		{path: "spec.containers[name=db].image", want: pathDoc},
		{path: "spec.scalar.x", want: pathDoc},
		{path: "spec.nothing.x", want: pathDoc},
		{path: "data[0]", want: pathDoc},
		{path: "spec.containers.image", want: pathDoc},
	}
	for _, tc := range tests {
		t.Run(tc.path, func(t *testing.T) {
			doc := objectContent(t, pathDoc)
			steps, err := parsePath(tc.path)
			if err != nil {
				t.Fatal(err)
			}
			removePath(doc, steps)
			if diff := cmp.Diff(objectContent(t, tc.want), doc); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestGetPath(t *testing.T) {
	doc := objectContent(t, pathDoc)
	tests := []struct {
		path string
		want any
		ok   bool
	}{
		{"data.mode", "fast", true},
		{"spec.containers[1].name", "sidecar", true},
		{"spec.containers[name=app].ports[0].containerPort", int64(80), true},
		{"spec.nothing", nil, true},
		{"spec.nothing.x", nil, false},
		{"spec.containers[2]", nil, false},
		{"spec.scalar.x", nil, false},
		{"data[0]", nil, false},
	}
	for _, tc := range tests {
		steps, err := parsePath(tc.path)
		if err != nil {
			t.Fatal(err)
		}
		got, ok := getPath(doc, steps)
		if ok != tc.ok || !cmp.Equal(got, tc.want) {
			t.Errorf("getPath(%q) = %v, %v; want %v, %v", tc.path, got, ok, tc.want, tc.ok)
		}
	}
}

func TestFormatPath(t *testing.T) {
	steps, err := parsePath(`a\.b.c[0][name=x\]y]`)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := formatPath(steps), `a\.b.c[0][name=x\]y]`; got != want {
		t.Errorf("formatPath = %s, want %s", got, want)
	}
	again, err := parsePath(formatPath(steps))
	if err != nil || !cmp.Equal(again, steps, cmp.AllowUnexported(step{})) {
		t.Errorf("formatPath does not round-trip: %v %v", again, err)
	}
}
