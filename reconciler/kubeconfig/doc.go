// Package kubeconfig writes and reads the reader kubeconfigs that members of a cluster
// group publish for each other, and picks the API server address a peer is reached at.
//
// Every member publishes a reader kubeconfig in a Secret of type
// k8s.cisco.com/cluster-registry-secret (key "kubeconfig"); peers copy those Secrets and
// use them to read that member. Render writes such a kubeconfig; Parse turns one back
// into a *rest.Config.
//
// # Threat model
//
// A kubeconfig read from a Secret is untrusted input. Anyone who can write a Secret in
// the registry namespace of any member can plant one, and the core sync spreads it to
// every member. A kubeconfig is far more than an address and a credential: it can name
// a program to run (exec, auth-provider), local files to read (certificate-authority,
// client-certificate, client-key, tokenFile), a proxy to send every request through
// (proxy-url), switch TLS verification off (insecure-skip-tls-verify) or make us act as
// somebody else (as, as-groups, ...). Loading it with clientcmd's usual machinery
// would do all of that inside the controller, with the controller's identity and files.
//
// Parse therefore accepts only inline data: an https server, inline CA data, and a
// bearer token or an inline client certificate and key. Anything else is rejected with
// an *InvalidError, which callers map to the Cluster state InvalidAuthInfo. Dangerous
// fields are rejected in every cluster and user of the document, not only in those the
// current context uses, so an accepted kubeconfig is harmless wherever it is used later.
// Parse builds the rest.Config itself from the decoded fields; it never calls
// clientcmd's ClientConfig, which would resolve files, run plugins and merge in the
// environment.
//
// Error messages name the offending field and the cluster, user or context, but never
// quote credential data (tokens, keys, certificates), since they end up in Cluster
// status and logs.
//
// # Where a peer may be
//
// A kubeconfig is also an address the controller will dial, chosen by a member.
// AddressPolicy refuses loopback (unless allowed), link-local, unspecified and
// multicast addresses and in-cluster service names, checking the address actually
// dialled after name resolution; HTTPClients builds clients that refuse redirects. The
// rest of the package is pure: no network and no file I/O.
package kubeconfig
