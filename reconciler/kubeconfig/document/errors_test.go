package document

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// testToken looks like a bearer token; no message may quote it.
const testToken = "tok-SECRET.eyJhbGciOiJSUzI1NiIsImtpZCI6IjEyMyJ9.c2lnbmF0dXJl"

func TestDecodeErrorWithholdsUnknownShapes(t *testing.T) {
	tests := []struct {
		in   string
		want string
	}{
		{"yaml: line 3: mapping values are not allowed in this context", "cannot parse: yaml: line 3: mapping values are not allowed in this context"},
		{"error converting YAML to JSON: yaml: invalid map key: map[interface {}]interface {}{\"tok\":\"" + testToken + "\"}",
			"cannot parse: yaml: (details withheld, they may quote the input)"},
		{"yaml: unknown anchor 'ABCDEF0123' referenced", "cannot parse: yaml: (details withheld, they may quote the input)"},
		{"something new: " + testToken, "cannot parse (details withheld, they may quote the input)"},
		{"illegal base64 data at input byte 12", "cannot parse: a *-data field is not valid base64 (illegal base64 data at input byte 12)"},
		{"invalid character 'x' looking for beginning of value", "cannot parse: invalid character 'x' looking for beginning of value"},
	}
	for _, tt := range tests {
		got := decodeError(errors.New(tt.in))
		if diff := cmp.Diff(tt.want, got.Reason); diff != "" {
			t.Errorf("decodeError(%q) mismatch (-want +got):\n%s", tt.in, diff)
		}
	}
}
