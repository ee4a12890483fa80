// Package document reads, checks and writes the reader kubeconfigs that members of a
// cluster group publish for each other, as documents: Load checks an untrusted
// kubeconfig (the threat model is package kubeconfig's) and returns the server, CA and
// credential of its current context; Render writes one; Read and TokenTimes read what
// one holds. It builds no client and links none of client-go's (only the kubeconfig
// types and codec), so the pure planners (reconciler/planner/members) can use it;
// package kubeconfig turns a Load result into a rest.Config and guards the addresses
// dialled.
package document
