// Package upgrade holds the end-to-end test of an upgrade: a group formed with the
// previous release's binary (built from this repository's git history: the latest v* tag
// reachable from HEAD, or REGISTRY_PREVIOUS_REF), upgraded cluster by cluster with this
// tree's `install` and controller while objects are created, checked to lose no copy and
// to keep syncing both ways while its members run different versions, then one member
// rolled back as docs/upgrade.md says. It skips when the
// checkout holds no previous release (CI's clone may have no tags). It has no non-test
// code.
package upgrade
