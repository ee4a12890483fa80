package rules

import (
	"fmt"

	"k8s.io/apimachinery/pkg/runtime"
)

// FieldPath is a parsed path of a field that the destination cluster keeps (a rule's
// spec.ignoreFields, or the planner's per-kind table of fields clusters assign). It has
// the override syntax, plus [*] for every element of a list.
type FieldPath struct {
	text  string
	steps []step
}

// ParseFieldPath parses a field path.
func ParseFieldPath(s string) (FieldPath, error) {
	steps, err := parsePathWith(s, true)
	if err != nil {
		return FieldPath{}, err
	}
	return FieldPath{text: formatPath(steps), steps: steps}, nil
}

// MustParseFieldPath is ParseFieldPath for paths written in code; it panics on an
// invalid path.
func MustParseFieldPath(s string) FieldPath {
	p, err := ParseFieldPath(s)
	if err != nil {
		panic(fmt.Sprintf("field path %q: %v", s, err))
	}
	return p
}

// String returns the path in its canonical form.
func (p FieldPath) String() string { return p.text }

// Keep gives desired the values observed has at the path: where observed has a value,
// desired gets a copy of it (missing intermediate objects are created, and a list
// element a selector picks in observed but not in desired is appended); where observed
// has none, desired's is removed. [*] applies the rest of the path to the elements of
// the list at the same index in both. Keep never fails: a path whose shape does not fit
// desired (an object where a list is expected) leaves desired as it is there.
func (p FieldPath) Keep(desired, observed map[string]any) {
	if len(p.steps) == 0 || desired == nil {
		return
	}
	keepAt(desired, observed, p.steps)
}

// keepAt applies Keep below one level: d and o are the values at the same place in
// desired and observed (o may be nil); it returns d as changed.
func keepAt(d, o any, steps []step) any {
	st, rest := steps[0], steps[1:]
	switch dc := d.(type) {
	case map[string]any:
		if st.kind != stepKey {
			return d
		}
		return keepInObject(dc, o, st, rest)
	case []any:
		ol, _ := o.([]any)
		switch st.kind {
		case stepAll:
			return keepEveryElement(dc, ol, rest)
		case stepSelect:
			return keepSelectedElement(dc, ol, st, rest)
		default:
			return keepElement(dc, ol, st, rest)
		}
	}
	return d
}

// keepInObject is keepAt for a key st of object dc: the key's value in o (an object, or
// nil) replaces dc's, or, with steps left, what is kept below it. A key dc lacks is
// created only when something of o's fits in it.
func keepInObject(dc map[string]any, o any, st step, rest []step) any {
	om, _ := o.(map[string]any)
	ov, has := om[st.key]
	if len(rest) == 0 {
		if has {
			dc[st.key] = runtime.DeepCopyJSONValue(ov)
		} else {
			delete(dc, st.key)
		}
		return dc
	}
	dv, ok := dc[st.key]
	created := false
	if !ok || dv == nil {
		if !has {
			return dc
		}
		if dv, created = emptyLike(ov), true; dv == nil {
			return dc
		}
	}
	kept := keepAt(dv, ov, rest)
	if created && isEmptyContainer(kept) {
		return dc // nothing of observed's fitted: leave desired as it was
	}
	dc[st.key] = kept
	return dc
}

// keepEveryElement is keepAt for every element of list dc ([*]): each element that ol
// has at the same index replaces dc's, or, with steps left, what is kept below it.
func keepEveryElement(dc, ol []any, rest []step) any {
	for i := range dc {
		var oe any
		if i < len(ol) {
			oe = ol[i]
		}
		if len(rest) == 0 {
			if i < len(ol) {
				dc[i] = runtime.DeepCopyJSONValue(oe)
			}
			continue
		}
		dc[i] = keepAt(dc[i], oe, rest)
	}
	return dc
}

// keepSelectedElement is keepAt for the element of list dc that st selects
// ([key=value]): ol's replaces it (added, or removed, as a whole), or, with steps left,
// what is kept below it.
func keepSelectedElement(dc, ol []any, st step, rest []step) any {
	di, oi := elementIndex(dc, st), elementIndex(ol, st)
	switch {
	case oi < 0 && di < 0:
		return dc
	case oi < 0 && len(rest) == 0:
		return append(dc[:di:di], dc[di+1:]...)
	case oi < 0:
		dc[di] = keepAt(dc[di], nil, rest)
		return dc
	case di < 0 && len(rest) == 0:
		return append(dc, runtime.DeepCopyJSONValue(ol[oi]))
	case di < 0:
		return dc // the element is the source's to add; only a part of it is kept
	case len(rest) == 0:
		dc[di] = runtime.DeepCopyJSONValue(ol[oi])
		return dc
	}
	dc[di] = keepAt(dc[di], ol[oi], rest)
	return dc
}

// keepElement is keepAt for the element of list dc at st's index: ol's, when it has
// one, replaces it, or, with steps left, what is kept below it.
func keepElement(dc, ol []any, st step, rest []step) any {
	di := elementIndex(dc, st)
	if di < 0 {
		return dc
	}
	var oe any
	if oi := elementIndex(ol, st); oi >= 0 {
		oe = ol[oi]
	}
	if len(rest) == 0 {
		if oe != nil {
			dc[di] = runtime.DeepCopyJSONValue(oe)
		}
		return dc
	}
	dc[di] = keepAt(dc[di], oe, rest)
	return dc
}

// emptyLike returns an empty object or list of v's shape, or nil for other values.
func emptyLike(v any) any {
	switch v.(type) {
	case map[string]any:
		return map[string]any{}
	case []any:
		return []any{}
	}
	return nil
}

func isEmptyContainer(v any) bool {
	switch x := v.(type) {
	case map[string]any:
		return len(x) == 0
	case []any:
		return len(x) == 0
	}
	return false
}
