package buildinfo

import (
	"fmt"

	"k8s.io/apimachinery/pkg/util/version"
)

// The version skew the project supports between the members of a group, and between the
// plugin and the controllers: the same major version and minor versions at most
// MaxMinorSkew apart, both ways (docs/upgrade.md). A version that is not a release (a
// development build, v0.0.0-dev, or one that does not parse) is not compared.

// MaxMinorSkew is how many minor versions two members may be apart.
const MaxMinorSkew = 1

// Skew returns why versions a and b are further apart than the supported skew, or nil
// when they are within it or either cannot be compared.
func Skew(a, b string) error {
	va, oka := release(a)
	vb, okb := release(b)
	if !oka || !okb {
		return nil
	}
	if va.Major() != vb.Major() {
		return fmt.Errorf("%s and %s differ in their major version: upgrade one minor version at a time (docs/upgrade.md)", a, b)
	}
	d := int(va.Minor()) - int(vb.Minor())
	if d < 0 {
		d = -d
	}
	if d > MaxMinorSkew {
		return fmt.Errorf("%s and %s are %d minor versions apart, more than the %d the project supports: upgrade one minor version at a time (docs/upgrade.md)", a, b, d, MaxMinorSkew)
	}
	return nil
}

// release parses v as a release version; ok is false for development builds and for
// what does not parse.
func release(v string) (*version.Version, bool) {
	if v == "" || v == DefaultVersion {
		return nil, false
	}
	pv, err := version.ParseSemantic(v)
	if err != nil {
		return nil, false
	}
	return pv, true
}
