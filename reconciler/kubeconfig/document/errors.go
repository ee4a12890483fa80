package document

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// InvalidError reports a kubeconfig that Load (and kubeconfig.Parse) refuses. Callers map it to the Cluster
// state InvalidAuthInfo with errors.As. Its message never quotes credential data.
type InvalidError struct {
	// Field locates the problem, e.g. `user "reader": exec`. It is empty when the
	// problem is the document as a whole (empty, too large, not parseable).
	Field string
	// Reason says what is wrong.
	Reason string
}

// Error implements error.
func (e *InvalidError) Error() string {
	if e.Field == "" {
		return "invalid kubeconfig: " + e.Reason
	}
	return "invalid kubeconfig: " + e.Field + ": " + e.Reason
}

func invalid(field, format string, args ...any) *InvalidError {
	return &InvalidError{Field: field, Reason: fmt.Sprintf(format, args...)}
}

// maxNameLen bounds how much of an (untrusted) name is quoted in a message.
const maxNameLen = 64

// quote quotes an untrusted name for a message: escaped and bounded in length.
func quote(name string) string {
	if len(name) > maxNameLen {
		// Cut on a rune boundary so %q does not show a broken rune.
		cut := maxNameLen
		for cut > 0 && !isRuneStart(name[cut]) {
			cut--
		}
		return strconv.Quote(name[:cut]) + "..."
	}
	return strconv.Quote(name)
}

// Quote is quote for the other parts of package kubeconfig (its address checks).
func Quote(name string) string { return quote(name) }

func isRuneStart(b byte) bool { return b&0xC0 != 0x80 }

func clusterField(name string) string { return "cluster " + quote(name) }
func userField(name string) string    { return "user " + quote(name) }
func contextField(name string) string { return "context " + quote(name) }

// Patterns of the decode errors clientcmd.Load returns. Only errors of a shape known to
// carry no input data are passed on; the rest are summarised, because some (the
// duplicate-name conversion error, for one) print whole users with their tokens and
// keys.
var (
	duplicateNameRE = regexp.MustCompile(`^error converting \*\[\]Named(\w+) into .*?: duplicate name "(.*?)" in list: `)
	jsonTypeRE      = regexp.MustCompile(`^json: cannot unmarshal [a-z]+ into Go struct field [A-Za-z0-9_.\-]+ of type [A-Za-z0-9_.\[\]*]+$`)
	base64RE        = regexp.MustCompile(`^illegal base64 data at input byte [0-9]+$`)
	noKindRE        = regexp.MustCompile(`^no kind ".*" is registered for version ".*"`)
	yamlRE          = regexp.MustCompile(`^(?:error converting YAML to JSON: )?yaml: (line [0-9]+: )?(.*)$`)
	// yamlSafeRE accepts the fixed problem texts of the YAML scanner and parser
	// ("mapping values are not allowed in this context", "did not find expected ','
	// or '}'", ...): lower-case words and punctuation, no digits, no upper case, nothing
	// that could be a token or base64 data.
	yamlSafeRE = regexp.MustCompile(`^[a-z][a-z ,'"(){}\[\]:-]*$`)
	jsonSafeRE = regexp.MustCompile(`^(invalid character '.' [a-z ]+|unexpected end of JSON input)$`)
)

var namedLists = map[string]string{
	"Cluster":   "clusters",
	"AuthInfo":  "users",
	"Context":   "contexts",
	"Extension": "extensions",
}

// decodeError turns an error of clientcmd.Load into an *InvalidError that quotes no
// input data.
func decodeError(err error) *InvalidError {
	msg := err.Error()
	if m := duplicateNameRE.FindStringSubmatch(msg); m != nil {
		list := namedLists[m[1]]
		if list == "" {
			list = "a list"
		}
		return invalid("", "cannot parse: duplicate name %s in %s", quote(m[2]), list)
	}
	switch {
	case jsonTypeRE.MatchString(msg):
		return invalid("", "cannot parse: %s", msg)
	case base64RE.MatchString(msg):
		return invalid("", "cannot parse: a *-data field is not valid base64 (%s)", msg)
	case noKindRE.MatchString(msg):
		return invalid("", "cannot parse: not a kubeconfig (want apiVersion v1, kind Config)")
	case jsonSafeRE.MatchString(msg):
		return invalid("", "cannot parse: %s", msg)
	}
	if m := yamlRE.FindStringSubmatch(msg); m != nil {
		if yamlSafeRE.MatchString(m[2]) && len(m[2]) <= 120 {
			return invalid("", "cannot parse: yaml: %s%s", m[1], m[2])
		}
		return invalid("", "cannot parse: yaml: %s(details withheld, they may quote the input)", m[1])
	}
	return invalid("", "cannot parse (details withheld, they may quote the input)")
}

// safeCryptoError returns the text of an error from crypto/tls or crypto/x509 if it is
// a fixed message of those packages, and a summary otherwise.
func safeCryptoError(err error) string {
	msg := err.Error()
	if len(msg) <= 200 && (strings.HasPrefix(msg, "tls: ") || strings.HasPrefix(msg, "x509: ")) &&
		!hasLongWord(msg) {
		return msg
	}
	return "not a valid PEM certificate and private key pair"
}

// hasLongWord reports whether s holds a run of 20 or more characters that could be part
// of a token or base64 data.
func hasLongWord(s string) bool {
	run := 0
	for _, r := range s {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9',
			r == '+', r == '/', r == '=', r == '_', r == '-', r == '.':
			run++
			if run >= 20 {
				return true
			}
		default:
			run = 0
		}
	}
	return false
}
