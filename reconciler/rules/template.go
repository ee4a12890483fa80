package rules

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"text/template"
	"text/template/parse"
	"unicode/utf8"
)

// Limits of override templates.
const (
	// MaxTemplateSize is the largest override value, in bytes.
	MaxTemplateSize = 16 << 10
	// MaxRenderedSize is the largest rendered override value, in bytes.
	MaxRenderedSize = 1 << 20
	// MaxCopyRendered is the most bytes the overrides of one copy render in all.
	MaxCopyRendered = 2 << 20
	// MaxOverrides is the most overrides of one entry of spec.rules.
	MaxOverrides = 64
	// MaxTemplateSteps bounds the size of a template with every {{template}} call
	// expanded, in parse nodes, so that templates calling templates cannot multiply.
	MaxTemplateSteps = 100_000
	// MaxRangeIterations bounds the work of the range actions of one rendering: every
	// iteration costs the size of the range's body in parse nodes (at least one).
	MaxRangeIterations = 1_000_000
	// MaxRenderWork bounds the bytes that the functions of one rendering (printf,
	// toJSON, replace, ...) may build.
	MaxRenderWork = 16 << 20
)

// Errors of rendering, matched with errors.Is.
var (
	// ErrRenderedTooLarge: the rendered value is larger than MaxRenderedSize.
	ErrRenderedTooLarge = fmt.Errorf("rendered value is larger than %d bytes", MaxRenderedSize)
	// ErrCopyRenderedTooLarge: the overrides of one copy render more than MaxCopyRendered.
	ErrCopyRenderedTooLarge = fmt.Errorf("the overrides of one copy render more than %d bytes", MaxCopyRendered)
	// ErrTemplateTooExpensive: the rendering exceeded MaxRangeIterations or MaxRenderWork.
	ErrTemplateTooExpensive = errors.New("template does too much work")
)

// TemplateContext is what override templates see.
type TemplateContext struct {
	// Object is the source object (unstructured content). When nil, Apply uses the
	// content of the object it copies.
	Object map[string]any
	// Cluster is the source peer's Cluster CR (unstructured content); may be nil.
	Cluster map[string]any
	// LocalCluster is the local Cluster CR (unstructured content); may be nil.
	LocalCluster map[string]any
}

// templateObject is an object as templates see it: its content, with the accessors of
// metav1.Object that the seed's templates used ({{ .Object.GetName }}).
type templateObject map[string]any

func (o templateObject) meta() map[string]any {
	m, _ := o["metadata"].(map[string]any)
	return m
}

func (o templateObject) metaString(key string) string {
	s, _ := o.meta()[key].(string)
	return s
}

func (o templateObject) metaMap(key string) map[string]string {
	m, _ := o.meta()[key].(map[string]any)
	if m == nil {
		return nil
	}
	out := make(map[string]string, len(m))
	for k, v := range m {
		if s, ok := v.(string); ok {
			out[k] = s
		}
	}
	return out
}

// GetName returns metadata.name.
func (o templateObject) GetName() string { return o.metaString("name") }

// GetNamespace returns metadata.namespace.
func (o templateObject) GetNamespace() string { return o.metaString("namespace") }

// GetUID returns metadata.uid.
func (o templateObject) GetUID() string { return o.metaString("uid") }

// GetLabels returns metadata.labels.
func (o templateObject) GetLabels() map[string]string { return o.metaMap("labels") }

// GetAnnotations returns metadata.annotations.
func (o templateObject) GetAnnotations() map[string]string { return o.metaMap("annotations") }

// GetAPIVersion returns apiVersion.
func (o templateObject) GetAPIVersion() string { s, _ := o["apiVersion"].(string); return s }

// GetKind returns kind.
func (o templateObject) GetKind() string { s, _ := o["kind"].(string); return s }

// templateData is the dot of override templates.
type templateData struct {
	Object       templateObject
	Cluster      templateObject
	LocalCluster templateObject
}

// rangeGuard is the function added at the end of every range pipeline; it charges the
// iterations to the rendering's budget.
const rangeGuard = "__rangeGuard"

// budget is the work left to one rendering.
type budget struct {
	steps int
	work  int
}

func (b *budget) chargeBytes(n int) error {
	b.work += n
	if b.work > MaxRenderWork || n < 0 {
		return fmt.Errorf("%w: functions built more than %d bytes", ErrTemplateTooExpensive, MaxRenderWork)
	}
	return nil
}

func (b *budget) chargeRange(cost int, v any) (any, error) {
	n := 0
	rv := reflect.ValueOf(v)
	switch rv.Kind() {
	case reflect.Slice, reflect.Array, reflect.Map, reflect.String:
		n = rv.Len()
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		n = int(min(max(rv.Int(), 0), MaxRangeIterations+1))
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		n = int(min(rv.Uint(), MaxRangeIterations+1))
	}
	cost = max(cost, 1)
	if n > (MaxRangeIterations-b.steps)/cost {
		return nil, fmt.Errorf("%w: range actions exceed %d steps", ErrTemplateTooExpensive, MaxRangeIterations)
	}
	b.steps += n * cost
	return v, nil
}

// funcs returns the functions of override templates, charging b.
func funcs(b *budget) template.FuncMap {
	str := func(s string) (string, error) {
		if err := b.chargeBytes(len(s)); err != nil {
			return "", err
		}
		return s, nil
	}
	return template.FuncMap{
		rangeGuard: b.chargeRange,
		"default": func(def any, given ...any) any {
			if len(given) == 0 || isEmpty(given[0]) {
				return def
			}
			return given[0]
		},
		"lower":      func(s any) (string, error) { return str(strings.ToLower(toString(s))) },
		"upper":      func(s any) (string, error) { return str(strings.ToUpper(toString(s))) },
		"trimPrefix": func(p, s any) string { return strings.TrimPrefix(toString(s), toString(p)) },
		"trimSuffix": func(p, s any) string { return strings.TrimSuffix(toString(s), toString(p)) },
		"replace": func(old, new, s any) (string, error) {
			o, n, in := toString(old), toString(new), toString(s)
			// Charge the size of the result before building it.
			var count int
			if o == "" {
				count = utf8.RuneCountInString(in) + 1
			} else {
				count = strings.Count(in, o)
			}
			if count > 0 && len(n) > len(o) && count > (MaxRenderWork+1)/(len(n)-len(o)) {
				return "", b.chargeBytes(MaxRenderWork + 1)
			}
			if err := b.chargeBytes(len(in) + count*(len(n)-len(o))); err != nil {
				return "", err
			}
			return strings.ReplaceAll(in, o, n), nil
		},
		"quote": func(args ...any) (string, error) {
			out := make([]string, 0, len(args))
			for _, a := range args {
				if a != nil {
					out = append(out, strconv.Quote(toString(a)))
				}
			}
			return str(strings.Join(out, " "))
		},
		"toJSON": func(v any) (string, error) { return toJSON(b, v) },
		"toJson": func(v any) (string, error) { return toJSON(b, v) },
		// The built-ins that build strings, charged.
		"printf":   func(f string, args ...any) (string, error) { return str(fmt.Sprintf(f, args...)) },
		"print":    func(args ...any) (string, error) { return str(fmt.Sprint(args...)) },
		"println":  func(args ...any) (string, error) { return str(fmt.Sprintln(args...)) },
		"html":     func(args ...any) (string, error) { return str(template.HTMLEscaper(args...)) },
		"js":       func(args ...any) (string, error) { return str(template.JSEscaper(args...)) },
		"urlquery": func(args ...any) (string, error) { return str(template.URLQueryEscaper(args...)) },
	}
}

func toJSON(b *budget, v any) (string, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return "", err
	}
	if err := b.chargeBytes(buf.Len()); err != nil {
		return "", err
	}
	return strings.TrimSuffix(buf.String(), "\n"), nil
}

// toString renders a value the way templates print it; nil is "".
func toString(v any) string {
	switch s := v.(type) {
	case nil:
		return ""
	case string:
		return s
	case []byte:
		return string(s)
	case fmt.Stringer:
		return s.String()
	}
	return fmt.Sprint(v)
}

// isEmpty is Sprig's notion of an empty value, used by default.
func isEmpty(v any) bool {
	rv := reflect.ValueOf(v)
	switch rv.Kind() {
	case reflect.Invalid:
		return true
	case reflect.Array, reflect.Map, reflect.Slice, reflect.String:
		return rv.Len() == 0
	case reflect.Bool:
		return !rv.Bool()
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return rv.Int() == 0
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return rv.Uint() == 0
	case reflect.Float32, reflect.Float64:
		return rv.Float() == 0
	case reflect.Interface, reflect.Pointer:
		return rv.IsNil()
	}
	return false
}

// valueTemplate is a compiled override value.
type valueTemplate struct {
	// text is the value; tmpl is nil when it holds no "{{" and is used as it is.
	text string
	tmpl *template.Template
}

// compileValue parses an override value, rejecting templates that could stall the
// engine, and instruments its range actions.
func compileValue(text string) (*valueTemplate, error) {
	if len(text) > MaxTemplateSize {
		return nil, fmt.Errorf("value is %d bytes long, more than %d", len(text), MaxTemplateSize)
	}
	if !strings.Contains(text, "{{") {
		return &valueTemplate{text: text}, nil
	}
	t, err := template.New("value").Option("missingkey=error").Funcs(funcs(&budget{})).Parse(text)
	if err != nil {
		return nil, err
	}
	a := analyzer{set: t, sizes: map[string]int{}, visiting: map[string]bool{}}
	size, err := a.templateSize(t.Name())
	if err != nil {
		return nil, err
	}
	if size > MaxTemplateSteps {
		return nil, fmt.Errorf("template expands to more than %d nodes", MaxTemplateSteps)
	}
	// Check the templates that are defined but not called too, then instrument.
	for _, d := range t.Templates() {
		if _, err := a.templateSize(d.Name()); err != nil {
			return nil, err
		}
	}
	for _, d := range t.Templates() {
		if d.Tree != nil {
			a.instrument(d.Tree, d.Tree.Root)
		}
	}
	return &valueTemplate{text: text, tmpl: t}, nil
}

// analyzer computes the size of templates with their {{template}} calls expanded, and
// finds recursive and undefined templates.
type analyzer struct {
	set      *template.Template
	sizes    map[string]int
	visiting map[string]bool
}

func (a *analyzer) templateSize(name string) (int, error) {
	if n, ok := a.sizes[name]; ok {
		return n, nil
	}
	if a.visiting[name] {
		return 0, fmt.Errorf("template %q calls itself: recursive templates are not allowed", name)
	}
	t := a.set.Lookup(name)
	if t == nil || t.Tree == nil {
		return 0, fmt.Errorf("template %q is not defined", name)
	}
	a.visiting[name] = true
	n, err := a.size(t.Tree.Root)
	a.visiting[name] = false
	if err != nil {
		return 0, err
	}
	a.sizes[name] = n
	return n, nil
}

// size is the number of nodes under n, with template calls expanded; it saturates just
// above MaxTemplateSteps.
func (a *analyzer) size(n parse.Node) (int, error) {
	total := 1
	add := func(children ...parse.Node) error {
		for _, c := range children {
			if c == nil || reflect.ValueOf(c).IsNil() {
				continue
			}
			s, err := a.size(c)
			if err != nil {
				return err
			}
			total = min(total+s, MaxTemplateSteps+1)
		}
		return nil
	}
	var err error
	switch n := n.(type) {
	case *parse.ListNode:
		for _, c := range n.Nodes {
			if err = add(c); err != nil {
				break
			}
		}
	case *parse.ActionNode:
		err = add(n.Pipe)
	case *parse.IfNode:
		err = add(n.Pipe, n.List, n.ElseList)
	case *parse.RangeNode:
		err = add(n.Pipe, n.List, n.ElseList)
	case *parse.WithNode:
		err = add(n.Pipe, n.List, n.ElseList)
	case *parse.PipeNode:
		for _, c := range n.Cmds {
			if err = add(c); err != nil {
				break
			}
		}
	case *parse.CommandNode:
		for _, c := range n.Args {
			if err = add(c); err != nil {
				break
			}
		}
	case *parse.ChainNode:
		err = add(n.Node)
	case *parse.TemplateNode:
		if err = add(n.Pipe); err == nil {
			var s int
			if s, err = a.templateSize(n.Name); err == nil {
				total = min(total+s, MaxTemplateSteps+1)
			}
		}
	}
	return total, err
}

// instrument appends "| __rangeGuard <cost>" to the pipeline of every range action under
// n, where cost is the size of the range's body.
func (a *analyzer) instrument(tree *parse.Tree, n parse.Node) {
	switch n := n.(type) {
	case *parse.ListNode:
		if n == nil {
			return
		}
		for _, c := range n.Nodes {
			a.instrument(tree, c)
		}
	case *parse.IfNode:
		a.instrument(tree, n.List)
		a.instrument(tree, n.ElseList)
	case *parse.WithNode:
		a.instrument(tree, n.List)
		a.instrument(tree, n.ElseList)
	case *parse.RangeNode:
		a.instrument(tree, n.List)
		a.instrument(tree, n.ElseList)
		cost, _ := a.size(n.List) // Analyzed without error before.
		last := n.Pipe.Cmds[len(n.Pipe.Cmds)-1]
		cmd := last.Copy().(*parse.CommandNode)
		cmd.Args = []parse.Node{
			parse.NewIdentifier(rangeGuard).SetTree(tree).SetPos(last.Pos),
			&parse.NumberNode{
				NodeType: parse.NodeNumber, Pos: last.Pos, IsInt: true, Int64: int64(cost),
				Text: strconv.Itoa(cost),
			},
		}
		n.Pipe.Cmds = append(n.Pipe.Cmds, cmd)
	}
}

// render renders the value over tc.
func (v *valueTemplate) render(tc TemplateContext) (string, error) {
	if v.tmpl == nil {
		return v.text, nil
	}
	t, err := v.tmpl.Clone()
	if err != nil {
		return "", err
	}
	t.Funcs(funcs(&budget{}))
	w := &limitedWriter{}
	data := templateData{
		Object:       templateObject(tc.Object),
		Cluster:      templateObject(tc.Cluster),
		LocalCluster: templateObject(tc.LocalCluster),
	}
	if err := t.Execute(w, data); err != nil {
		return "", explainExecError(err, tc)
	}
	return w.buf.String(), nil
}

// explainExecError adds a hint to a failed rendering that read a context object that is
// not known.
func explainExecError(err error, tc TemplateContext) error {
	msg := err.Error()
	switch {
	case tc.Cluster == nil && strings.Contains(msg, "<.Cluster"):
		return fmt.Errorf("%w (the source cluster's Cluster is not known)", err)
	case tc.LocalCluster == nil && strings.Contains(msg, "<.LocalCluster"):
		return fmt.Errorf("%w (the local Cluster is not known)", err)
	}
	return err
}

// limitedWriter collects at most MaxRenderedSize bytes.
type limitedWriter struct {
	buf bytes.Buffer
}

func (w *limitedWriter) Write(p []byte) (int, error) {
	if w.buf.Len()+len(p) > MaxRenderedSize {
		return 0, ErrRenderedTooLarge
	}
	return w.buf.Write(p)
}
