package rules

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// stepKind is the kind of one step of a path.
type stepKind uint8

const (
	// stepKey looks up a key of an object; a key made of digits also indexes a list.
	stepKey stepKind = iota
	// stepIndex indexes a list: [N].
	stepIndex
	// stepSelect selects the first list element whose field equals a value: [key=value].
	stepSelect
	// stepAll stands for every element of a list: [*]. Only field paths (ParseFieldPath)
	// take it.
	stepAll
)

// step is one step of a parsed path.
type step struct {
	kind stepKind
	// key is the key of stepKey and the element's field of stepSelect.
	key string
	// index is the index of stepIndex, and of stepKey when key is a list index (else -1).
	index int
	// value is the value of stepSelect.
	value string
}

// parsePath parses a path of the syntax described in the package documentation. It
// returns at least one step.
func parsePath(s string) ([]step, error) {
	return parsePathWith(s, false)
}

// parsePathWith is parsePath, with [*] allowed when wildcard is true.
func parsePathWith(s string, wildcard bool) ([]step, error) {
	if s == "" {
		return nil, errors.New("path is empty")
	}
	if s[0] == '/' {
		return parsePointer(s)
	}
	start := 0
	if s[0] == '{' {
		if !strings.HasSuffix(s, "}") || len(s) < 2 {
			return nil, errors.New(`path starts with "{" but does not end with "}"`)
		}
		// Keep offsets in messages relative to the whole path.
		s, start = s[:len(s)-1], 1
	}
	if strings.HasPrefix(s[start:], ".") {
		start++
	}
	if start == len(s) {
		return nil, errors.New("path has no keys")
	}
	var steps []step
	i := start
	afterDot := false
	for i < len(s) {
		switch {
		case s[i] == '[':
			if afterDot {
				return nil, fmt.Errorf("empty key before %q at offset %d", "[", i)
			}
			st, n, err := parseBracket(s, i, wildcard)
			if err != nil {
				return nil, err
			}
			steps = append(steps, st)
			i = n
		case s[i] == '.':
			if i == start || afterDot || i == len(s)-1 {
				return nil, fmt.Errorf("empty key at offset %d", i)
			}
			afterDot = true
			i++
			continue
		default:
			if len(steps) > 0 && !afterDot {
				return nil, fmt.Errorf(`expected "." or "[" at offset %d`, i)
			}
			key, n, err := parseKey(s, i)
			if err != nil {
				return nil, err
			}
			steps = append(steps, keyStep(key))
			i = n
		}
		afterDot = false
	}
	return steps, nil
}

// keyStep returns the step looking up key.
func keyStep(key string) step {
	return step{kind: stepKey, key: key, index: listIndex(key)}
}

// listIndex returns key as a list index when it is a decimal number without leading
// zeros, else -1.
func listIndex(key string) int {
	if key == "" || (len(key) > 1 && key[0] == '0') {
		return -1
	}
	for i := 0; i < len(key); i++ {
		if key[i] < '0' || key[i] > '9' {
			return -1
		}
	}
	n, err := strconv.Atoi(key)
	if err != nil {
		return -1
	}
	return n
}

// parseKey reads a key of a dotted path starting at s[i]: up to an unescaped "." or "[".
func parseKey(s string, i int) (string, int, error) {
	var b strings.Builder
	for i < len(s) {
		c := s[i]
		switch c {
		case '\\':
			if i+1 == len(s) {
				return "", 0, errors.New("path ends with a lone backslash")
			}
			b.WriteByte(s[i+1])
			i += 2
			continue
		case '.', '[':
			return b.String(), i, nil
		}
		b.WriteByte(c)
		i++
	}
	return b.String(), i, nil
}

// parseBracket reads the bracket starting at s[i] == '[' and returns its step and the
// offset after the closing "]".
func parseBracket(s string, i int, wildcard bool) (step, int, error) {
	j := i + 1
	var quote byte
	for ; j < len(s); j++ {
		c := s[j]
		switch {
		case c == '\\':
			j++
		case quote != 0:
			if c == quote {
				quote = 0
			}
		case c == '\'' || c == '"':
			quote = c
		case c == ']':
			st, err := bracketStep(s[i+1:j], wildcard)
			if err != nil {
				return step{}, 0, fmt.Errorf("[%s] at offset %d: %w", s[i+1:j], i, err)
			}
			return st, j + 1, nil
		}
	}
	return step{}, 0, fmt.Errorf(`"[" at offset %d is not closed`, i)
}

// bracketStep interprets the text between "[" and "]".
func bracketStep(c string, wildcard bool) (step, error) {
	switch {
	case c == "":
		return step{}, errors.New("empty brackets")
	case c == "*" && wildcard:
		return step{kind: stepAll, index: -1}, nil
	case c == "*":
		return step{}, errors.New("wildcards are not supported")
	case isDigits(c):
		n, err := strconv.Atoi(c)
		if err != nil {
			return step{}, fmt.Errorf("bad index: %w", err)
		}
		return step{kind: stepIndex, index: n}, nil
	case c[0] == '-' && isDigits(c[1:]):
		return step{}, errors.New("negative indexes are not supported")
	case (c[0] == '\'' || c[0] == '"') && len(c) >= 2 && c[len(c)-1] == c[0]:
		key, err := unquote(c)
		if err != nil {
			return step{}, err
		}
		return keyStep(key), nil
	case strings.HasPrefix(c, "?("):
		inner, ok := strings.CutSuffix(c[2:], ")")
		if !ok {
			return step{}, errors.New(`filter does not end with ")"`)
		}
		inner, ok = strings.CutPrefix(strings.TrimSpace(inner), "@.")
		if !ok {
			return step{}, errors.New(`only filters of the form ?(@.key=="value") are supported`)
		}
		k, v, ok := cutUnescaped(inner, "==")
		if !ok {
			return step{}, errors.New(`only filters of the form ?(@.key=="value") are supported`)
		}
		return selectStep(strings.TrimSpace(k), strings.TrimSpace(v))
	}
	k, v, ok := cutUnescaped(c, "=")
	if !ok {
		return step{}, errors.New(`expected an index [N], a selector [key=value] or a quoted key ['key']`)
	}
	return selectStep(k, v)
}

// selectStep returns the selector step of the raw key and value texts.
func selectStep(k, v string) (step, error) {
	key := unescape(k)
	if key == "" {
		return step{}, errors.New("selector has an empty key")
	}
	if strings.ContainsAny(key, ".[]") && !strings.Contains(k, `\`) {
		return step{}, fmt.Errorf("selector key %q must be a single key", key)
	}
	var value string
	if len(v) >= 2 && (v[0] == '\'' || v[0] == '"') && v[len(v)-1] == v[0] {
		var err error
		if value, err = unquote(v); err != nil {
			return step{}, err
		}
	} else {
		value = unescape(v)
	}
	return step{kind: stepSelect, key: key, value: value}, nil
}

// cutUnescaped cuts s around the first sep that is neither escaped nor quoted.
func cutUnescaped(s, sep string) (before, after string, found bool) {
	var quote byte
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '\\':
			i++
		case quote != 0:
			if c == quote {
				quote = 0
			}
		case c == '\'' || c == '"':
			quote = c
		case strings.HasPrefix(s[i:], sep):
			return s[:i], s[i+len(sep):], true
		}
	}
	return s, "", false
}

// unquote strips the quotes around s and its backslash escapes.
func unquote(s string) (string, error) {
	inner := s[1 : len(s)-1]
	var b strings.Builder
	for i := 0; i < len(inner); i++ {
		c := inner[i]
		if c == '\\' {
			if i+1 == len(inner) {
				return "", errors.New("quoted key ends with a lone backslash")
			}
			i++
			c = inner[i]
		} else if c == s[0] {
			return "", fmt.Errorf("unescaped %c inside a quoted key", c)
		}
		b.WriteByte(c)
	}
	return b.String(), nil
}

// unescape drops the backslashes of s, keeping the characters they escape.
func unescape(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+1 < len(s) {
			i++
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

func isDigits(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// parsePointer parses a JSON Pointer (RFC 6901).
func parsePointer(s string) ([]step, error) {
	tokens := strings.Split(s[1:], "/")
	steps := make([]step, 0, len(tokens))
	for _, tok := range tokens {
		if tok == "-" {
			return nil, errors.New(`the JSON Pointer token "-" (append) is not supported`)
		}
		var b strings.Builder
		for i := 0; i < len(tok); i++ {
			c := tok[i]
			if c == '~' {
				if i+1 == len(tok) || (tok[i+1] != '0' && tok[i+1] != '1') {
					return nil, fmt.Errorf(`JSON Pointer token %q: "~" must be followed by 0 or 1`, tok)
				}
				if tok[i+1] == '0' {
					c = '~'
				} else {
					c = '/'
				}
				i++
			}
			b.WriteByte(c)
		}
		steps = append(steps, keyStep(b.String()))
	}
	return steps, nil
}

// formatPath spells steps in the dotted syntax, for messages; parsePath reads it back.
func formatPath(steps []step) string {
	var b strings.Builder
	for i, st := range steps {
		switch st.kind {
		case stepKey:
			switch {
			case st.key == "":
				b.WriteString("['']")
				continue
			case i > 0:
				b.WriteByte('.')
			case strings.ContainsAny(st.key[:1], "/{"):
				b.WriteByte('\\')
			}
			writeEscaped(&b, st.key, `\.[`)
		case stepIndex:
			fmt.Fprintf(&b, "[%d]", st.index)
		case stepAll:
			b.WriteString("[*]")
		case stepSelect:
			b.WriteByte('[')
			writeEscaped(&b, st.key, `\.[]='"?`)
			b.WriteByte('=')
			writeEscaped(&b, st.value, `\]'"`)
			b.WriteByte(']')
		}
	}
	if b.Len() == 0 {
		return "the object"
	}
	return b.String()
}

// writeEscaped writes s with a backslash before every character of special.
func writeEscaped(b *strings.Builder, s, special string) {
	for i := 0; i < len(s); i++ {
		if strings.IndexByte(special, s[i]) >= 0 {
			b.WriteByte('\\')
		}
		b.WriteByte(s[i])
	}
}

// elementIndex returns the index of the element of list that st selects, or -1.
func elementIndex(list []any, st step) int {
	switch st.kind {
	case stepIndex, stepKey:
		if st.index >= 0 && st.index < len(list) {
			return st.index
		}
	case stepSelect:
		for i, e := range list {
			if m, ok := e.(map[string]any); ok {
				if v, ok := m[st.key]; ok && stringMatches(v, st.value) {
					return i
				}
			}
		}
	}
	return -1
}

// getPath returns the value at steps in root and whether it exists.
func getPath(root any, steps []step) (any, bool) {
	cur := root
	for _, st := range steps {
		switch c := cur.(type) {
		case map[string]any:
			if st.kind != stepKey {
				return nil, false
			}
			v, ok := c[st.key]
			if !ok {
				return nil, false
			}
			cur = v
		case []any:
			i := elementIndex(c, st)
			if i < 0 {
				return nil, false
			}
			cur = c[i]
		default:
			return nil, false
		}
	}
	return cur, true
}

// setPath sets the value at steps in root, creating missing intermediate objects.
func setPath(root map[string]any, steps []step, val any) error {
	_, err := setAt(root, steps, 0, val)
	return err
}

func setAt(cur any, steps []step, i int, val any) (any, error) {
	st := steps[i]
	last := i == len(steps)-1
	if cur == nil {
		if st.kind != stepKey {
			return nil, fmt.Errorf("%s does not exist (a list is not created)", formatPath(steps[:i]))
		}
		cur = map[string]any{}
	}
	switch c := cur.(type) {
	case map[string]any:
		if st.kind != stepKey {
			return nil, fmt.Errorf("%s is an object, not a list", formatPath(steps[:i]))
		}
		if last {
			c[st.key] = val
			return c, nil
		}
		v, err := setAt(c[st.key], steps, i+1, val)
		if err != nil {
			return nil, err
		}
		c[st.key] = v
		return c, nil
	case []any:
		idx := elementIndex(c, st)
		if idx < 0 {
			switch {
			case st.kind == stepSelect:
				return nil, fmt.Errorf("no element of %s has %s=%s", formatPath(steps[:i]), st.key, st.value)
			case st.index >= 0:
				return nil, fmt.Errorf("index %d is out of range: %s has %d elements", st.index, formatPath(steps[:i]), len(c))
			default:
				return nil, fmt.Errorf("%s is a list, not an object", formatPath(steps[:i]))
			}
		}
		if last {
			c[idx] = val
			return c, nil
		}
		v, err := setAt(c[idx], steps, i+1, val)
		if err != nil {
			return nil, err
		}
		c[idx] = v
		return c, nil
	default:
		return nil, fmt.Errorf("%s is %s, not an object or a list", formatPath(steps[:i]), describe(cur))
	}
}

// removePath removes the value at steps in root; a missing path is not an error.
func removePath(root map[string]any, steps []step) {
	removeAt(root, steps, 0)
}

func removeAt(cur any, steps []step, i int) any {
	st := steps[i]
	last := i == len(steps)-1
	switch c := cur.(type) {
	case map[string]any:
		if st.kind != stepKey {
			return c
		}
		v, ok := c[st.key]
		if !ok {
			return c
		}
		if last {
			delete(c, st.key)
		} else {
			c[st.key] = removeAt(v, steps, i+1)
		}
		return c
	case []any:
		idx := elementIndex(c, st)
		if idx < 0 {
			return c
		}
		if last {
			return slices.Delete(c, idx, idx+1)
		}
		c[idx] = removeAt(c[idx], steps, i+1)
		return c
	default:
		return cur
	}
}

// describe names the JSON type of v for messages.
func describe(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case string:
		return "a string"
	case bool:
		return "a boolean"
	case map[string]any:
		return "an object"
	case []any:
		return "a list"
	}
	if _, ok := toNumber(v); ok {
		return "a number"
	}
	return fmt.Sprintf("a %T", v)
}
