// Package syncrules holds the end-to-end tests of ResourceSyncRules: three clusters, a
// controller process each, the seed's scenarios step by step and the engine's safety
// rules. It has no non-test code.
package syncrules
