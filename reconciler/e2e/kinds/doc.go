// Package kinds holds the kinds battery: the end-to-end acceptance test that every common
// kind syncs on clusters that differ the way real clusters do (the test bed's Realistic
// mode: a service CIDR and NodePort range per cluster, the workload controllers running).
// For each kind a ResourceSyncRule on c1 syncs an original on c1 to c2 and c3; the test
// checks that every copy arrives, that the controllers then stop writing, that updates
// at the origin arrive, that hand edits of copies are reverted and that the fields each
// cluster assigns itself (Service clusterIPs and nodePorts, Job selectors, a custom
// resource's status) are never copied nor touched. It has no non-test code.
package kinds
