package document

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"slices"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	clientcmdlatest "k8s.io/client-go/tools/clientcmd/api/latest"
)

// MaxSize is the largest kubeconfig Load accepts, in bytes. A reader kubeconfig is a
// few kilobytes; the bound keeps a planted Secret from costing memory and CPU.
const MaxSize = 64 << 10

// Reader is the content of a reader kubeconfig.
type Reader struct {
	// ClusterName names the cluster, the user and the context of the kubeconfig.
	ClusterName string
	// Server is the https URL of the API server.
	Server string
	// CAData holds the PEM certificate authorities that verify the server; empty means
	// the system roots.
	CAData []byte
	// Token is the bearer token of the reader ServiceAccount.
	Token string
}

// Render writes r as a kubeconfig with one cluster, one user and one context, all named
// r.ClusterName, and the context current. Everything is inline. Equal input gives
// byte-identical output, so a caller can compare before it writes a Secret.
func Render(r Reader) ([]byte, error) {
	if r.ClusterName == "" {
		return nil, errors.New("render kubeconfig: cluster name is empty")
	}
	if _, reason := checkServerURL(r.Server); reason != "" {
		return nil, fmt.Errorf("render kubeconfig: server: %s", reason)
	}
	if reason := checkCA(r.CAData); reason != "" {
		return nil, fmt.Errorf("render kubeconfig: CA data: %s", reason)
	}
	if r.Token == "" {
		return nil, errors.New("render kubeconfig: token is empty")
	}
	if reason := checkToken(r.Token); reason != "" {
		return nil, fmt.Errorf("render kubeconfig: token: %s", reason)
	}
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters[r.ClusterName] = &clientcmdapi.Cluster{
		Server:                   r.Server,
		CertificateAuthorityData: slices.Clone(r.CAData),
	}
	cfg.AuthInfos[r.ClusterName] = &clientcmdapi.AuthInfo{Token: r.Token}
	cfg.Contexts[r.ClusterName] = &clientcmdapi.Context{Cluster: r.ClusterName, AuthInfo: r.ClusterName}
	cfg.CurrentContext = r.ClusterName
	out, err := runtime.Encode(clientcmdlatest.Codec, cfg)
	if err != nil {
		return nil, fmt.Errorf("render kubeconfig: %w", err)
	}
	return out, nil
}

// Config is what Load keeps of an accepted kubeconfig: the cluster and the user of its
// current context, inline data only.
type Config struct {
	// Server is the https URL of the API server.
	Server string
	// TLSServerName is the server name TLS verifies, when it is not the host of Server.
	TLSServerName string
	// CAData holds the PEM certificate authorities that verify the server; empty means
	// the system roots.
	CAData []byte
	// Token is the bearer token; CertData and KeyData the client certificate and key.
	Token             string
	CertData, KeyData []byte
	// DisableCompression turns off response compression.
	DisableCompression bool
}

// Load reads an untrusted kubeconfig and returns the cluster and user of its current
// context (or its only context when none is current), which use inline data only. A
// kubeconfig that could make a client run a program, read a local file, use a proxy,
// skip TLS verification, impersonate, or that lacks a usable credential is refused with
// an *InvalidError; see the package documentation.
func Load(data []byte) (*Config, error) {
	if len(data) == 0 {
		return nil, invalid("", "empty")
	}
	if len(data) > MaxSize {
		return nil, invalid("", "%d bytes, more than the limit of %d", len(data), MaxSize)
	}
	cfg, err := decode(data)
	if err != nil {
		return nil, decodeError(err)
	}

	ctxName, err := currentContext(cfg)
	if err != nil {
		return nil, err
	}
	kctx := cfg.Contexts[ctxName]
	if kctx == nil {
		return nil, invalid(contextField(ctxName), "empty")
	}
	if kctx.Cluster == "" {
		return nil, invalid(contextField(ctxName), "names no cluster")
	}
	cluster := cfg.Clusters[kctx.Cluster]
	if cluster == nil {
		return nil, invalid(contextField(ctxName), "cluster %s not found", quote(kctx.Cluster))
	}
	if kctx.AuthInfo == "" {
		return nil, invalid(contextField(ctxName), "names no user")
	}
	user := cfg.AuthInfos[kctx.AuthInfo]
	if user == nil {
		return nil, invalid(contextField(ctxName), "user %s not found", quote(kctx.AuthInfo))
	}

	// The entries in use first, so their problems are the ones reported.
	if err := checkCluster(kctx.Cluster, cluster); err != nil {
		return nil, err
	}
	if err := checkUser(kctx.AuthInfo, user); err != nil {
		return nil, err
	}
	if _, reason := checkServerURL(cluster.Server); reason != "" {
		return nil, invalid(clusterField(kctx.Cluster)+": server", "%s", reason)
	}
	if err := checkCredential(kctx.AuthInfo, user); err != nil {
		return nil, err
	}
	// Then every other entry: nothing dangerous may hide in an unused cluster or user.
	for _, name := range sortedKeys(cfg.Clusters) {
		if c := cfg.Clusters[name]; c != nil && name != kctx.Cluster {
			if err := checkCluster(name, c); err != nil {
				return nil, err
			}
		}
	}
	for _, name := range sortedKeys(cfg.AuthInfos) {
		if a := cfg.AuthInfos[name]; a != nil && name != kctx.AuthInfo {
			if err := checkUser(name, a); err != nil {
				return nil, err
			}
		}
	}

	return &Config{
		Server:             cluster.Server,
		TLSServerName:      cluster.TLSServerName,
		CAData:             cluster.CertificateAuthorityData,
		Token:              user.Token,
		CertData:           user.ClientCertificateData,
		KeyData:            user.ClientKeyData,
		DisableCompression: cluster.DisableCompression,
	}, nil
}

// decode is clientcmd.Load for non-empty data, without linking clientcmd (and with it
// client-go's rest client): the kubeconfig codec only.
func decode(data []byte) (*clientcmdapi.Config, error) {
	decoded, _, err := clientcmdlatest.Codec.Decode(data, &schema.GroupVersionKind{Version: clientcmdlatest.Version, Kind: "Config"}, clientcmdapi.NewConfig())
	if err != nil {
		return nil, err
	}
	cfg, ok := decoded.(*clientcmdapi.Config)
	if !ok {
		return nil, fmt.Errorf("decoded a %T, not a kubeconfig", decoded)
	}
	return cfg, nil
}

// currentContext returns the name of the context to use.
func currentContext(cfg *clientcmdapi.Config) (string, error) {
	if cfg.CurrentContext != "" {
		if _, ok := cfg.Contexts[cfg.CurrentContext]; !ok {
			return "", invalid("current-context", "context %s not found", quote(cfg.CurrentContext))
		}
		return cfg.CurrentContext, nil
	}
	switch len(cfg.Contexts) {
	case 1:
		for name := range cfg.Contexts {
			return name, nil
		}
	case 0:
		return "", invalid("current-context", "not set, and there are no contexts")
	}
	return "", invalid("current-context", "not set, and there are %d contexts (need exactly one)", len(cfg.Contexts))
}

// checkCluster rejects the cluster fields that read files, use a proxy or turn TLS
// verification off.
func checkCluster(name string, c *clientcmdapi.Cluster) error {
	f := clusterField(name)
	switch {
	case c.CertificateAuthority != "":
		return invalid(f+": certificate-authority", "file paths are not allowed, use certificate-authority-data")
	case c.InsecureSkipTLSVerify:
		return invalid(f+": insecure-skip-tls-verify", "TLS verification must not be turned off")
	case c.ProxyURL != "":
		return invalid(f+": proxy-url", "proxies are not allowed")
	}
	if reason := checkCA(c.CertificateAuthorityData); reason != "" {
		return invalid(f+": certificate-authority-data", "%s", reason)
	}
	return nil
}

// checkUser rejects the user fields that run programs, read files, use basic auth or
// impersonate.
func checkUser(name string, a *clientcmdapi.AuthInfo) error {
	f := userField(name)
	switch {
	case a.Exec != nil:
		return invalid(f+": exec", "exec credential plugins are not allowed (they run a program)")
	case a.AuthProvider != nil:
		return invalid(f+": auth-provider", "auth provider plugins are not allowed")
	case a.TokenFile != "":
		return invalid(f+": tokenFile", "file paths are not allowed, use token")
	case a.ClientCertificate != "":
		return invalid(f+": client-certificate", "file paths are not allowed, use client-certificate-data")
	case a.ClientKey != "":
		return invalid(f+": client-key", "file paths are not allowed, use client-key-data")
	case a.Username != "" || a.Password != "":
		return invalid(f+": username/password", "basic authentication is not allowed")
	case a.Impersonate != "":
		return invalid(f+": as", "impersonation is not allowed")
	case a.ImpersonateUID != "":
		return invalid(f+": as-uid", "impersonation is not allowed")
	case len(a.ImpersonateGroups) > 0:
		return invalid(f+": as-groups", "impersonation is not allowed")
	case len(a.ImpersonateUserExtra) > 0:
		return invalid(f+": as-user-extra", "impersonation is not allowed")
	}
	return nil
}

// checkCredential requires a usable inline credential: a token, or a client
// certificate and its key.
func checkCredential(name string, a *clientcmdapi.AuthInfo) error {
	f := userField(name)
	hasCert, hasKey := len(a.ClientCertificateData) > 0, len(a.ClientKeyData) > 0
	switch {
	case hasCert && !hasKey:
		return invalid(f+": client-key-data", "missing (client-certificate-data is set)")
	case hasKey && !hasCert:
		return invalid(f+": client-certificate-data", "missing (client-key-data is set)")
	case !hasCert && a.Token == "":
		return invalid(f, "no credential: need token, or client-certificate-data and client-key-data")
	}
	if a.Token != "" {
		if reason := checkToken(a.Token); reason != "" {
			return invalid(f+": token", "%s", reason)
		}
	}
	if hasCert {
		if _, err := tls.X509KeyPair(a.ClientCertificateData, a.ClientKeyData); err != nil {
			return invalid(f+": client-certificate-data/client-key-data", "%s", safeCryptoError(err))
		}
	}
	return nil
}

// checkToken accepts what can be sent in an Authorization header: visible ASCII.
func checkToken(token string) string {
	for i := 0; i < len(token); i++ {
		if c := token[i]; c < 0x21 || c > 0x7e {
			return "contains white space or characters other than printable ASCII"
		}
	}
	return ""
}

// checkCA accepts empty data (system roots) or PEM data with at least one certificate.
func checkCA(data []byte) string {
	if len(data) == 0 {
		return ""
	}
	if !x509.NewCertPool().AppendCertsFromPEM(data) {
		return "holds no PEM certificate"
	}
	return ""
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
