// Package chaos holds the fault tests of the registry controller: three clusters (an
// origin and two peers that sync its ConfigMaps by a ResourceSyncRule), a `serve` process
// per cluster, and a burst of objects (-chaos.objects, 1,000 by default) written on the
// origin while a fault strikes: a peer's API server stops and starts again, the origin is
// cut off and healed, a controller is killed with SIGKILL and restarted, the leader of two
// replicas is killed. After each the peers must hold exactly the origin's objects, no copy
// that should exist may have been deleted on the way, no controller may have needed a
// restart, and the time to converge is measured and bounded (-chaos.bound). It has no
// non-test code.
package chaos
