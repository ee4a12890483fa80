// Package e2e holds the end-to-end tests of the registry controller: the built
// kubectl-registry binary runs `serve` as one process per cluster, out of cluster,
// against real API servers of the test bed (package testbed), and the tests act as a
// user would. It has no non-test code.
package e2e
