// Package credentials holds the end-to-end tests of the per-peer reader identities:
// three clusters, a controller process each, and what a departed cluster can still do
// with the tokens it held. It has no non-test code.
package credentials
