//go:build tools

// Package testbin pins the upstream commands the test bed builds: kube-apiserver,
// kube-controller-manager, kubectl and etcd, all from the Go module proxy.
package testbin

import (
	_ "go.etcd.io/etcd/server/v3"
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kubectl"
)
