package kubeconfig

import (
	"errors"
	"net/url"
	"os"
	"path/filepath"
	"testing"
)

// FuzzParse feeds Parse mutations of the kubeconfigs in testdata/kubeconfig/fuzz. Parse
// must never panic, must fail only with an *InvalidError, and what it accepts must use
// inline data only and an https server.
func FuzzParse(f *testing.F) {
	dir := filepath.Join(testdataDir, "fuzz")
	entries, err := os.ReadDir(dir)
	if err != nil {
		f.Fatal(err)
	}
	for _, e := range entries {
		if e.IsDir() {
			continue
		}
		seed, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(seed)
	}
	f.Add([]byte{})

	f.Fuzz(func(t *testing.T, data []byte) {
		cfg, err := Parse(data)
		if err != nil {
			var invalidErr *InvalidError
			if !errors.As(err, &invalidErr) {
				t.Fatalf("error %q (%T) is not an *InvalidError", err, err)
			}
			if cfg != nil {
				t.Fatalf("Parse returned a config with error %v", err)
			}
			return
		}
		switch {
		case cfg.ExecProvider != nil:
			t.Fatal("accepted an exec provider")
		case cfg.AuthProvider != nil:
			t.Fatal("accepted an auth provider")
		case cfg.BearerTokenFile != "":
			t.Fatal("accepted a token file")
		case cfg.CAFile != "" || cfg.CertFile != "" || cfg.KeyFile != "":
			t.Fatal("accepted a file path")
		case cfg.Proxy != nil:
			t.Fatal("set a proxy")
		case cfg.Insecure:
			t.Fatal("turned TLS verification off")
		case cfg.Username != "" || cfg.Password != "":
			t.Fatal("accepted basic auth")
		case cfg.Impersonate.UserName != "" || cfg.Impersonate.UID != "" ||
			len(cfg.Impersonate.Groups) > 0 || len(cfg.Impersonate.Extra) > 0:
			t.Fatal("accepted impersonation")
		case cfg.Transport != nil || cfg.WrapTransport != nil || cfg.Dial != nil:
			t.Fatal("set a transport")
		case cfg.BearerToken == "" && (len(cfg.CertData) == 0 || len(cfg.KeyData) == 0):
			t.Fatal("accepted a config without a credential")
		}
		u, err := url.Parse(cfg.Host)
		if err != nil || u.Scheme != "https" || u.Hostname() == "" {
			t.Fatalf("accepted server %q: not an https URL with a host (%v)", cfg.Host, err)
		}
	})
}
