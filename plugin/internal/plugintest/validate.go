package plugintest

import (
	"strings"
	"testing"
)

// ValidateCase is a case of a verb's Validate: Modify changes the default Options; Want
// are substrings of the error, none when the Options are valid.
type ValidateCase[O any] struct {
	Name   string
	Modify func(O)
	Want   []string
}

// Validator is the Validate of a verb's Options.
type Validator interface{ Validate() error }

// RunValidate runs every case on the Options newOptions returns, without I/O.
func RunValidate[O Validator](t *testing.T, newOptions func() O, cases []ValidateCase[O]) {
	t.Helper()
	for _, tt := range cases {
		t.Run(tt.Name, func(t *testing.T) {
			o := newOptions()
			tt.Modify(o)
			err := o.Validate()
			if len(tt.Want) == 0 {
				if err != nil {
					t.Fatalf("Validate() = %v, want nil", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("Validate() = nil, want %q", tt.Want)
			}
			for _, w := range tt.Want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("Validate() = %q, want it to contain %q", err, w)
				}
			}
		})
	}
}

// WantErr checks err against want, a substring of the error, or no error when want is
// empty; it stops the test when they differ. It reports whether the case goes on: false
// when an error was wanted (and got), so that the case returns.
func WantErr(t testing.TB, err error, want string) bool {
	t.Helper()
	if want != "" {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Fatalf("err = %v, want %q", err, want)
		}
		return false
	}
	if err != nil {
		t.Fatal(err)
	}
	return true
}
