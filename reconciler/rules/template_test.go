package rules

import (
	"errors"
	"strconv"
	"strings"
	"testing"
	"text/template"
)

func templateContext(t *testing.T) TemplateContext {
	return TemplateContext{
		Object: objectContent(t, `
apiVersion: v1
kind: Secret
metadata:
  name: web
  namespace: apps
  uid: "1234"
  labels: {app: web, tier: Frontend}
  annotations: {note: "a <b> & c"}
data: {mode: ZmFzdA==}
spec: {replicas: 3, enabled: true, list: [a, b, c], empty: ""}
`),
		Cluster:      objectContent(t, "metadata: {name: peer-1}\nspec: {clusterID: peer-uid}\n"),
		LocalCluster: objectContent(t, "metadata: {name: local}\nspec: {clusterID: local-uid}\n"),
	}
}

func render(t *testing.T, text string, tc TemplateContext) (string, error) {
	t.Helper()
	v, err := compileValue(text)
	if err != nil {
		return "", err
	}
	return v.render(tc)
}

func TestTemplates(t *testing.T) {
	tests := []struct{ value, want string }{
		{"plain text, used as is", "plain text, used as is"},
		{"{not a template}", "{not a template}"},
		{"{{ .Object.metadata.name }}", "web"},
		{"{{ .Cluster.metadata.name }}-{{ .LocalCluster.spec.clusterID }}", "peer-1-local-uid"},
		{"{{ .Object.spec.replicas }}", "3"},
		{"{{ .Object.GetName }}/{{ .Object.GetNamespace }}/{{ .Object.GetUID }}", "web/apps/1234"},
		{"{{ .Object.GetAPIVersion }} {{ .Object.GetKind }} {{ .Cluster.GetName }}", "v1 Secret peer-1"},
		{`{{ index .Object.GetLabels "app" }} {{ index .Object.GetAnnotations "note" }}`, "web a <b> & c"},
		{`{{ index .Object.metadata.labels "missing" | default "none" }}`, "none"},
		{`{{ .Object.spec.empty | default "empty" }}`, "empty"},
		{`{{ .Object.metadata.name | default "unused" }}`, "web"},
		{"{{ .Object.metadata.labels.tier | lower }} {{ upper .Object.metadata.name }}", "frontend WEB"},
		{`{{ .Object.metadata.name | trimPrefix "w" }} {{ trimSuffix "eb" .Object.metadata.name }}`, "eb w"},
		{`{{ .Object.metadata.namespace | replace "p" "P" }}`, "aPPs"},
		{`{{ quote .Object.metadata.name "x\"y" }}`, `"web" "x\"y"`},
		{"{{ toJSON .Object.spec }}", `{"empty":"","enabled":true,"list":["a","b","c"],"replicas":3}`},
		{"{{ toJson .Object.metadata.annotations }}", `{"note":"a <b> & c"}`},
		{`{{ range $i, $e := .Object.spec.list }}{{ if $i }},{{ end }}{{ $e }}{{ end }}`, "a,b,c"},
		{`{{ range index .Object.spec "missingList" }}x{{ else }}none{{ end }}`, "none"},
		{`{{ if .Object.spec.enabled }}on{{ else }}off{{ end }}`, "on"},
		{`{{ printf "%s-%d" .Object.metadata.name .Object.spec.replicas }}`, "web-3"},
		{`{{ define "n" }}[{{ . }}]{{ end }}{{ template "n" .Object.metadata.name }}{{ template "n" "x" }}`, "[web][x]"},
		{`{{ block "b" . }}{{ .Object.metadata.name }}{{ end }}`, "web"},
		{`{{ range 3 }}{{ . }}{{ end }}`, "012"},
	}
	tc := templateContext(t)
	for _, tt := range tests {
		t.Run(tt.value, func(t *testing.T) {
			got, err := render(t, tt.value, tc)
			if err != nil {
				t.Fatalf("render: %v", err)
			}
			if got != tt.want {
				t.Errorf("render = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestTemplateErrors(t *testing.T) {
	tests := []struct {
		name    string
		value   string
		tc      *TemplateContext // defaults to templateContext
		wantErr string
		wantIs  error
	}{
		{name: "missing key", value: "{{ .Object.metadata.labels.missing }}",
			wantErr: `template: value:1:10: executing "value" at <.Object.metadata.labels.missing>: map has no entry for key "missing"`},
		{name: "missing cluster", value: "{{ .Cluster.metadata.name }}", tc: &TemplateContext{},
			wantErr: `map has no entry for key "metadata" (the source cluster's Cluster is not known)`},
		{name: "missing local cluster", value: "{{ .LocalCluster.spec.clusterID }}", tc: &TemplateContext{},
			wantErr: `(the local Cluster is not known)`},
		{name: "wrong field of the context", value: "{{ .Peer }}", wantErr: "can't evaluate field Peer"},
		{name: "huge output", value: `{{ printf "%0999999d" 1 }}{{ printf "%0999999d" 1 }}`, wantIs: ErrRenderedTooLarge},
		{name: "huge output from a range", value: `{{ range 2000 }}{{ printf "%0999d" 1 }}{{ end }}`, wantIs: ErrRenderedTooLarge},
		{name: "a long range", value: `{{ range 100000000 }}{{ end }}`, wantIs: ErrTemplateTooExpensive},
		{name: "a range over a variable", value: `{{ $n := 100000000 }}{{ range $n }}{{ end }}`, wantIs: ErrTemplateTooExpensive},
		{name: "nested ranges", value: `{{ range 1000 }}{{ range 1000 }}{{ end }}{{ end }}`, wantIs: ErrTemplateTooExpensive},
		{name: "ranges in templates", value: `{{ define "a" }}{{ range 1000 }}{{ end }}{{ end }}{{ range 2000 }}{{ template "a" }}{{ end }}`, wantIs: ErrTemplateTooExpensive},
		{name: "strings built without output", value: `{{ range 20 }}{{ $x := printf "%0999999d" 1 }}{{ end }}`, wantIs: ErrTemplateTooExpensive},
		{name: "replace blows up", value: `{{ $x := printf "%0999999d" 1 }}{{ $y := replace "0" "0123456789012345678901234567890" $x }}`, wantIs: ErrTemplateTooExpensive},
		{name: "toJSON in a loop", value: `{{ $big := printf "%0999999d" 1 }}{{ range 20 }}{{ $x := toJSON $big }}{{ end }}`, wantIs: ErrTemplateTooExpensive},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tc := templateContext(t)
			if tt.tc != nil {
				tc = *tt.tc
			}
			_, err := render(t, tt.value, tc)
			if err == nil {
				t.Fatal("no error")
			}
			if tt.wantIs != nil && !errors.Is(err, tt.wantIs) {
				t.Errorf("error = %v, want %v", err, tt.wantIs)
			}
			if !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("error = %v, want %q", err, tt.wantErr)
			}
		})
	}
}

func TestTemplateCompileErrors(t *testing.T) {
	fanOut := `{{ define "t0" }}x{{ end }}`
	for i := 1; i < 30; i++ {
		fanOut += `{{ define "t` + strconv.Itoa(i) + `" }}{{ template "t` + strconv.Itoa(i-1) + `" }}{{ template "t` + strconv.Itoa(i-1) + `" }}{{ end }}`
	}
	fanOut += `{{ template "t29" }}`
	tests := []struct{ name, value, wantErr string }{
		{"self-recursive define", `{{ define "r" }}{{ template "r" . }}{{ end }}{{ template "r" . }}`, `template "r" calls itself: recursive templates are not allowed`},
		{"mutual recursion", `{{ define "a" }}{{ template "b" }}{{ end }}{{ define "b" }}{{ template "a" }}{{ end }}{{ template "a" }}`, "calls itself"},
		{"recursion that is never called", `{{ define "r" }}{{ template "r" }}{{ end }}x`, `template "r" calls itself`},
		{"recursive block", `{{ block "b" . }}{{ template "b" . }}{{ end }}`, `template "b" calls itself`},
		{"undefined template", `{{ template "nope" }}`, `template "nope" is not defined`},
		{"templates calling templates", fanOut, "template expands to more than 100000 nodes"},
		{"too large", "{{ . }}" + strings.Repeat("x", MaxTemplateSize), "more than 16384"},
		{"unknown function", "{{ sprigOnly 1 }}", `function "sprigOnly" not defined`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := compileValue(tt.value)
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("compileValue error = %v, want %q", err, tt.wantErr)
			}
		})
	}
}

// TestRecursionDepthLimit checks the safety net behind the compile-time check: a
// recursive template that reached rendering fails with text/template's depth limit
// instead of crashing.
func TestRecursionDepthLimit(t *testing.T) {
	tmpl := template.Must(template.New("value").Option("missingkey=error").Funcs(funcs(&budget{})).
		Parse(`{{ define "r" }}{{ template "r" . }}{{ end }}{{ template "r" . }}`))
	_, err := (&valueTemplate{text: "", tmpl: tmpl}).render(templateContext(t))
	if err == nil || !strings.Contains(err.Error(), "exceeded maximum template depth") {
		t.Errorf("render = %v, want the depth limit", err)
	}
}

// TestTemplatesAreReusable renders one compiled template several times, in parallel:
// the budget of one rendering does not leak into the next (two renderings' work would
// exceed MaxRenderWork).
func TestTemplatesAreReusable(t *testing.T) {
	v, err := compileValue(`{{ $a := printf "%0999999d" 1 }}{{ replace "0" "012345678" $a | len }}`)
	if err != nil {
		t.Fatal(err)
	}
	tc := templateContext(t)
	done := make(chan error)
	for range 2 {
		go func() {
			var err error
			for range 2 {
				var got string
				if got, err = v.render(tc); err == nil && got != "8999983" {
					err = errors.New("got " + got)
				}
				if err != nil {
					break
				}
			}
			done <- err
		}()
	}
	for range 2 {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
}
