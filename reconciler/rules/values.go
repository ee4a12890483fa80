package rules

import (
	"encoding/json"
	"fmt"
	"math"
	"regexp"
	"strconv"
)

// number is a JSON number: an integer when isInt, else a float.
type number struct {
	isInt bool
	i     int64
	f     float64
}

// toNumber returns v as a number when it is one.
func toNumber(v any) (number, bool) {
	switch n := v.(type) {
	case int64:
		return number{isInt: true, i: n}, true
	case float64:
		return number{f: n}, true
	case int:
		return number{isInt: true, i: int64(n)}, true
	case int32:
		return number{isInt: true, i: int64(n)}, true
	case int16:
		return number{isInt: true, i: int64(n)}, true
	case int8:
		return number{isInt: true, i: int64(n)}, true
	case uint:
		return uintNumber(uint64(n)), true
	case uint64:
		return uintNumber(n), true
	case uint32:
		return number{isInt: true, i: int64(n)}, true
	case uint16:
		return number{isInt: true, i: int64(n)}, true
	case uint8:
		return number{isInt: true, i: int64(n)}, true
	case float32:
		return number{f: float64(n)}, true
	case json.Number:
		return parseNumber(string(n))
	}
	return number{}, false
}

func uintNumber(u uint64) number {
	if u > math.MaxInt64 {
		return number{f: float64(u)}
	}
	return number{isInt: true, i: int64(u)}
}

// jsonNumber is the grammar of a JSON number literal.
var jsonNumber = regexp.MustCompile(`^-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][-+]?[0-9]+)?$`)

// parseNumber parses s when it is a JSON number literal.
func parseNumber(s string) (number, bool) {
	if !jsonNumber.MatchString(s) {
		return number{}, false
	}
	if i, err := strconv.ParseInt(s, 10, 64); err == nil {
		return number{isInt: true, i: i}, true
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return number{}, false
	}
	return number{f: f}, true
}

// equal reports whether two numbers have the same value.
func (a number) equal(b number) bool {
	switch {
	case a.isInt && b.isInt:
		return a.i == b.i
	case a.isInt:
		return floatEqualsInt(b.f, a.i)
	case b.isInt:
		return floatEqualsInt(a.f, b.i)
	default:
		return a.f == b.f
	}
}

func floatEqualsInt(f float64, i int64) bool {
	// float64(math.MaxInt64) rounds up to 2^63, which is out of range.
	if f != math.Trunc(f) || f < math.MinInt64 || f >= math.MaxInt64 {
		return false
	}
	return int64(f) == i
}

// stringMatches reports whether the value v found in an object matches the string s of a
// selector: an equal string, a boolean spelled s, or a number equal to the JSON number
// literal s.
func stringMatches(v any, s string) bool {
	switch x := v.(type) {
	case string:
		return x == s
	case bool:
		return strconv.FormatBool(x) == s
	}
	n, ok := toNumber(v)
	if !ok {
		return false
	}
	m, ok := parseNumber(s)
	return ok && n.equal(m)
}

// intMatches reports whether the value v found in an object matches the integer i of a
// selector: a number equal to i, or a string holding exactly its decimal form.
func intMatches(v any, i int64) bool {
	if s, ok := v.(string); ok {
		return s == strconv.FormatInt(i, 10)
	}
	n, ok := toNumber(v)
	return ok && n.equal(number{isInt: true, i: i})
}

// deepCopyJSON copies a JSON-like value. It normalizes Go integer types to int64 and
// float32 to float64 (the types of unstructured content), and fails on types JSON cannot
// hold instead of panicking.
func deepCopyJSON(v any) (any, error) {
	switch x := v.(type) {
	case nil, string, bool, int64, float64:
		return x, nil
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			c, err := deepCopyJSON(e)
			if err != nil {
				return nil, err
			}
			out[k] = c
		}
		return out, nil
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			c, err := deepCopyJSON(e)
			if err != nil {
				return nil, err
			}
			out[i] = c
		}
		return out, nil
	case map[string]string:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[k] = e
		}
		return out, nil
	case []string:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = e
		}
		return out, nil
	}
	if n, ok := toNumber(v); ok {
		if n.isInt {
			return n.i, nil
		}
		if math.IsInf(n.f, 0) || math.IsNaN(n.f) {
			return nil, fmt.Errorf("%v is not a JSON number", n.f)
		}
		return n.f, nil
	}
	return nil, fmt.Errorf("unsupported value of type %T", v)
}
