// Package collusion holds the end-to-end test of a group of five in which two members'
// admins collude to evict a third (see collusion_test.go); it needs five API servers of
// its own.
package collusion
