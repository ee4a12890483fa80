// Package seedmix holds the end-to-end test of a mixed group: one cluster running the
// seed's controller (cisco-open/cluster-registry-controller, built from a local checkout
// of its source: `make seed-controller SEED_SRC=...`), installed with its CRDs and RBAC
// as its Helm chart installs them, and two running kubectl-registry, joined with the
// seed's manual swap. It skips when the seed's checkout or binary is absent (CI's
// clean clone has neither). It has no non-test code.
package seedmix
