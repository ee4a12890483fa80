package kubeconfig

import (
	"time"

	"k8s.io/client-go/rest"

	"github.com/kubectl-registry/kubectl-registry/reconciler/api/v1alpha1"
	"github.com/kubectl-registry/kubectl-registry/reconciler/kubeconfig/document"
)

// MaxSize is the largest kubeconfig Parse accepts, in bytes. A reader kubeconfig is a
// few kilobytes; the bound keeps a planted Secret from costing memory and CPU.
const MaxSize = document.MaxSize

// Client settings of the rest.Config that Parse returns.
const (
	// Timeout bounds each request to a peer, so a health check of a peer that black-holes
	// packets fails in reasonable time. Note that rest.Config.Timeout becomes the
	// http.Client timeout, which also covers reading a response body: clients that
	// watch (informers) must clear it on a copy, or every watch is cut after Timeout.
	Timeout = 15 * time.Second
	// QPS and Burst rate-limit the requests to one peer. Reads of a peer are mostly
	// watches, which are not rate-limited; the limit bounds the LISTs of informer
	// (re)starts and health checks, so a member restarting with many rules does not
	// flood its peers, while staying well above what the seed's 20 requests/s allowed.
	QPS   = 50
	Burst = 100
	// UserAgent is the User-Agent of requests to peers.
	UserAgent = "kubectl-registry"
)

// Reader is the content of a reader kubeconfig (document.Reader).
type Reader = document.Reader

// InvalidError reports a kubeconfig that Parse refuses (document.InvalidError). Callers
// map it to the Cluster state InvalidAuthInfo with errors.As. Its message never quotes
// credential data.
type InvalidError = document.InvalidError

// Render writes r as a kubeconfig with one cluster, one user and one context, all named
// r.ClusterName, and the context current (document.Render).
func Render(r Reader) ([]byte, error) { return document.Render(r) }

// Read returns what a reader kubeconfig holds (document.Read).
func Read(data []byte) (r Reader, ok bool) { return document.Read(data) }

// TokenTimes reads the expiry and issue times a bearer token states about itself,
// unverified (document.TokenTimes).
func TokenTimes(token string) (exp, iat time.Time, ok bool) { return document.TokenTimes(token) }

// Parse reads an untrusted kubeconfig and returns a rest.Config for its current
// context (or its only context when none is current) that uses inline data only. A
// kubeconfig that could make us run a program, read a local file, use a proxy, skip
// TLS verification, impersonate, or that lacks a usable credential is refused with an
// *InvalidError; see the package documentation.
//
// The config has Timeout, QPS, Burst and UserAgent set to this package's constants.
// Its Proxy is nil, so the proxy environment of our own process (HTTPS_PROXY,
// NO_PROXY) applies, as for any client-go client; the kubeconfig cannot change it.
func Parse(data []byte) (*rest.Config, error) {
	c, err := document.Load(data)
	if err != nil {
		return nil, err
	}
	return &rest.Config{
		Host:        c.Server,
		BearerToken: c.Token,
		TLSClientConfig: rest.TLSClientConfig{
			ServerName: c.TLSServerName,
			CAData:     c.CAData,
			CertData:   c.CertData,
			KeyData:    c.KeyData,
		},
		DisableCompression: c.DisableCompression,
		UserAgent:          UserAgent,
		QPS:                QPS,
		Burst:              Burst,
		Timeout:            Timeout,
	}, nil
}

// ErrNoEndpoint is returned (wrapped) by ServerFor when no endpoint serves the network
// (document.ErrNoEndpoint).
var ErrNoEndpoint = document.ErrNoEndpoint

// NormalizeServer turns an API server address into an https URL
// (document.NormalizeServer).
func NormalizeServer(addr string) (string, error) { return document.NormalizeServer(addr) }

// ServerFor picks the API server endpoint that clients on network should use
// (document.ServerFor).
func ServerFor(endpoints []v1alpha1.KubernetesAPIEndpoint, network string) (server string, caBundle []byte, err error) {
	return document.ServerFor(endpoints, network)
}

// IsLoopback reports whether server names this machine (document.IsLoopback).
func IsLoopback(server string) bool { return document.IsLoopback(server) }
