package rules

import (
	"maps"
	"slices"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/util/sets"
)

// LabelAlternatives returns the label selectors of the rule's match entries as
// alternatives: an object can match the rule only if it matches one of them. An entry of
// spec.rules without a match list, or a match entry without labels, is labels.Everything.
// A rule without entries in spec.rules matches nothing and has none.
func (r *Rule) LabelAlternatives() []labels.Selector {
	var out []labels.Selector
	for _, sr := range r.syncRules {
		if len(sr.matches) == 0 {
			out = append(out, labels.Everything())
			continue
		}
		for _, m := range sr.matches {
			if len(m.labels) == 0 {
				out = append(out, labels.Everything())
				continue
			}
			out = append(out, m.labels...)
		}
	}
	return out
}

// CommonSelector returns a label selector that every object matching one of the
// alternatives matches (it may match more): the requirements every alternative implies,
// as far as one selector can say them. For each key that every alternative constrains:
//   - key in (the union of the values) when each alternative allows only some values;
//   - key (exists) when each alternative requires the key;
//   - !key when each alternative requires its absence.
//
// It is labels.Everything when the alternatives share nothing (or there are none), so a
// server-side watch with it is never narrower than what the rules select.
func CommonSelector(alts []labels.Selector) labels.Selector {
	if len(alts) == 0 {
		return labels.Everything()
	}
	perAlt := make([]map[string][]labels.Requirement, len(alts))
	for i, s := range alts {
		reqs, selectable := s.Requirements()
		if !selectable || s.Empty() {
			return labels.Everything() // labels.Nothing() or Everything(): no common constraint
		}
		m := map[string][]labels.Requirement{}
		for _, r := range reqs {
			m[r.Key()] = append(m[r.Key()], r)
		}
		perAlt[i] = m
	}
	out := labels.NewSelector()
	for _, key := range slices.Sorted(maps.Keys(perAlt[0])) {
		var values sets.Set[string]
		allValues, allExist, allAbsent := true, true, true
		for _, m := range perAlt {
			reqs, ok := m[key]
			if !ok {
				allValues, allExist, allAbsent = false, false, false
				break
			}
			vs, exists, absent := constraint(reqs)
			if vs == nil {
				allValues = false
			} else {
				if values == nil {
					values = sets.New[string]()
				}
				values = values.Union(vs)
			}
			allExist = allExist && exists
			allAbsent = allAbsent && absent
		}
		var req *labels.Requirement
		var err error
		switch {
		case allValues && values.Len() > 0:
			req, err = labels.NewRequirement(key, selection.In, sets.List(values))
		case allExist:
			req, err = labels.NewRequirement(key, selection.Exists, nil)
		case allAbsent:
			req, err = labels.NewRequirement(key, selection.DoesNotExist, nil)
		default:
			continue
		}
		if err != nil {
			continue // a requirement that cannot be said: not narrowed by this key
		}
		out = out.Add(*req)
	}
	return out
}

// constraint summarises the requirements of one alternative on one key: the values it
// allows (nil when any value may do), whether it requires the key, whether it requires
// its absence.
func constraint(reqs []labels.Requirement) (values sets.Set[string], exists, absent bool) {
	for _, r := range reqs {
		switch r.Operator() {
		case selection.Equals, selection.DoubleEquals, selection.In:
			vs := sets.New(r.ValuesUnsorted()...)
			if values == nil {
				values = vs
			} else {
				values = values.Intersection(vs)
			}
			exists = true
		case selection.Exists, selection.GreaterThan, selection.LessThan:
			exists = true
		case selection.DoesNotExist:
			absent = true
		}
	}
	return values, exists, absent
}
