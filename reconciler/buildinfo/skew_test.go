package buildinfo

import "testing"

func TestSkew(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		want bool // a skew error
	}{
		{"v0.3.0", "v0.3.2", false},
		{"v0.3.0", "v0.4.1", false},
		{"v0.4.1", "v0.3.0", false},
		{"v0.2.0", "v0.4.0", true},
		{"v0.5.0", "v0.3.9", true},
		{"v1.0.0", "v0.9.0", true},
		{"v0.3.0-rc.1", "v0.5.0", true},
		{"v0.0.0-dev", "v0.9.0", false}, // a development build is not compared
		{"", "v0.9.0", false},           // a controller that reports no version
		{"garbage", "v0.1.0", false},
	} {
		if err := Skew(tc.a, tc.b); (err != nil) != tc.want {
			t.Errorf("Skew(%q, %q) = %v, want an error: %v", tc.a, tc.b, err, tc.want)
		}
	}
}
