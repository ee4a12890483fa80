package main

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/kubectl-registry/kubectl-registry/cmd/registry-leakscan/canary"
)

// The secrets below are made at run time and never logged: this package's own test
// output is scanned with the rest of the suite's. Failure messages show findings (which
// are redacted) and case names, never inputs.

// fixtures are the secrets and the public material the tests hide in text.
type fixtures struct {
	token    string // a ServiceAccount-like JWT
	keyPEM   string // an EC private key, SEC 1
	pkcs8PEM string // the same key, PKCS #8
	certPEM  string // a self-signed certificate: public
	pubPEM   string // the public key: public
}

func newFixtures(t *testing.T) fixtures {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	sec1, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	pkcs8, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	pub, err := x509.MarshalPKIXPublicKey(&key.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "kubernetes-ca"},
		NotBefore: time.Now(), NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true,
	}
	cert, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	sig := make([]byte, 256)
	if _, err := rand.Read(sig); err != nil {
		t.Fatal(err)
	}
	b64 := base64.RawURLEncoding.EncodeToString
	token := b64([]byte(`{"alg":"RS256","kid":"k1"}`)) + "." +
		b64([]byte(`{"aud":["https://kubernetes.default.svc"],"exp":1790000000,"iss":"https://kubernetes.default.svc","sub":"system:serviceaccount:cluster-registry:reader"}`)) + "." +
		b64(sig)
	return fixtures{
		token:    token,
		keyPEM:   string(pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: sec1})),
		pkcs8PEM: string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: pkcs8})),
		certPEM:  string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: cert})),
		pubPEM:   string(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pub})),
	}
}

func b64(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }

func kubeconfig(user string) string {
	return "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: https://10.0.0.1:6443\n" +
		"    certificate-authority-data: CA\nusers:\n- name: u\n  user:\n" + user + "contexts:\n- name: c\n  context: {cluster: c, user: u}\n"
}

func TestFind(t *testing.T) {
	f := newFixtures(t)
	caKubeconfig := strings.Replace(kubeconfig("    token: REDACTED\n"), "CA", b64(f.certPEM), 1)
	tokenKubeconfig := kubeconfig("    token: " + f.token + "\n")
	keyKubeconfig := strings.Replace(kubeconfig("    client-certificate-data: "+b64(f.certPEM)+"\n    client-key-data: "+b64(f.keyPEM)+"\n"), "CA", b64(f.certPEM), 1)

	tests := []struct {
		name string
		text string
		want []string // kinds, in order
	}{
		// Leaks.
		{"token", "I1121 04:50:00 request.go:1] Authorization: Bearer " + f.token, []string{"JWT-like token"}},
		{"token in JSON", `{"level":"info","msg":"renewed","token":"` + f.token + `"}`, []string{"JWT-like token"}},
		{"base64 token", "  token: " + b64(f.token), []string{"base64 of JWT-like token"}},
		{"URL-safe base64 token", "token=" + base64.RawURLEncoding.EncodeToString([]byte(f.token)), []string{"base64 of JWT-like token"}},
		{"PEM private key", f.keyPEM, []string{"PEM private key"}},
		{"PKCS8 private key", f.pkcs8PEM, []string{"PEM private key"}},
		{"escaped PEM private key", fmt.Sprintf("key: %q", f.keyPEM), []string{"PEM private key"}},
		{"base64 PEM private key", "tls.key: " + b64(f.keyPEM), []string{"base64 of PEM private key"}},
		{"Secret with a kubeconfig holding a token", "data:\n  kubeconfig: " + b64(tokenKubeconfig), []string{"base64 of JWT-like token"}},
		{"Secret with a kubeconfig holding a key", `{"data":{"kubeconfig":"` + b64(keyKubeconfig) + `"}}`, []string{"base64 of base64 of PEM private key"}},
		{"canary", "password: " + canary.Value, []string{"Secret canary"}},
		{"canary with suffix", "got " + canary.Value + "-db, want masked", []string{"Secret canary"}},
		{"base64 canary", "password: " + b64(canary.Value), []string{"base64 of Secret canary"}},
		{"base64 canary, offset 1", "blob: " + b64("x"+canary.Value+"yz"), []string{"base64 of Secret canary"}},
		{"base64 canary, offset 2", "blob: " + b64("xy"+canary.Value+"z"), []string{"base64 of Secret canary"}},
		{"canary in a YAML in base64", "data: " + b64("a: 1\npassword: "+canary.Value+"\n"), []string{"base64 of Secret canary"}},
		{"canary as a Go byte slice", fmt.Sprintf("Data:map[password:%v]", []byte(canary.Value)), []string{"byte slice of Secret canary"}},
		{"two leaks", "a " + f.token + " b " + canary.Value, []string{"JWT-like token", "Secret canary"}},

		// Not leaks.
		{"certificate", f.certPEM, nil},
		{"public key", f.pubPEM, nil},
		{"CA data", "certificate-authority-data: " + b64(f.certPEM), nil},
		{"kubeconfig with CA data", "data:\n  kubeconfig: " + b64(caKubeconfig), nil},
		{"masked Secret", "password: ***  (5 bytes)", nil},
		{"JWT header only", "header eyJhbGciOiJSUzI1NiIsImtpZCI6ImsxIn0 was fine", nil},
		{"short JWT", "eyJhbGciOiJub25lIn0.eyJzdWIiOiJ4In0.c2ln", nil},
		{"UIDs and hashes", "uid 3f2a6c1e-8a7b-4c2d-9e1f-0a1b2c3d4e5f sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08", nil},
		{"paths", "/tmp/TestSyncSecrets1234567890/001/kubeconfig-alpha-beta-gamma/abcdefghijklmnop", nil},
		{"private key word", "the reader kubeconfig holds no PRIVATE KEY and -----BEGIN CERTIFICATE-----", nil},
	}
	s := newScanner()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []string
			spans := s.find(tt.text, 0, "")
			for _, sp := range spans {
				got = append(got, sp.kind)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("kinds found (-want +got):\n%s", diff)
			}
			if len(spans) > 0 {
				checkRedacted(t, redact(tt.text, spans), f)
			}
		})
	}
}

// checkRedacted fails when out shows any part of a secret.
func checkRedacted(t *testing.T, out string, f fixtures) {
	t.Helper()
	secrets := map[string]string{
		"token":                f.token,
		"token's signature":    f.token[strings.LastIndex(f.token, ".")+1:],
		"base64 token":         b64(f.token),
		"private key body":     strings.Split(f.keyPEM, "\n")[1],
		"base64 private key":   b64(f.keyPEM)[8:60],
		"canary":               canary.Value,
		"canary without affix": canary.Value[4 : len(canary.Value)-4],
		"base64 canary":        b64(canary.Value)[:40],
	}
	for name, secret := range secrets {
		if strings.Contains(out, secret) {
			t.Errorf("the report shows the %s: %s", name, strings.ReplaceAll(out, secret, "<"+name+">"))
		}
	}
	if !strings.Contains(out, "[REDACTED ") && !strings.Contains(out, "controller-runtime logger never set") {
		t.Errorf("the report has no redaction note: %s", out)
	}
}

// testEvents returns go test -json events of test in pkg printing output, split into
// fragments of at most size bytes like test2json does.
func testEvents(pkg, test, output string, size int) string {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	for len(output) > 0 {
		n := min(size, len(output))
		if i := strings.Index(output[:n], "\n"); i >= 0 {
			n = i + 1
		}
		_ = enc.Encode(map[string]string{"Action": "output", "Package": pkg, "Test": test, "Output": output[:n]})
		output = output[n:]
	}
	return b.String()
}

func TestRun(t *testing.T) {
	f := newFixtures(t)
	dir := t.TempDir()
	clean := testEvents("example.com/a", "TestA", "=== RUN   TestA\n    a_test.go:10: CA "+b64(f.certPEM)+"\n--- PASS: TestA (0.00s)\n", 1024)
	// test2json splits lines longer than 1024 bytes: the token straddles two events,
	// interleaved with another package's.
	leaky := testEvents("example.com/a", "TestA", "=== RUN   TestA\n", 1024) +
		interleave(
			testEvents("example.com/b", "TestB/sub", "    b_test.go:20: header "+strings.Repeat("x", 960)+" token "+f.token+" trailer\n", 1024),
			testEvents("example.com/a", "TestA", "    a_test.go:11: nothing to see\n", 1024),
		) +
		"plain line with " + canary.Value + "\n"
	for _, line := range strings.Split(leaky, "\n") {
		if strings.Contains(line, f.token) {
			t.Fatalf("the token is not split between two events")
		}
	}
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	cleanFile, leakyFile := write("clean.json", clean), write("leaky.json", leaky)

	tests := []struct {
		name      string
		args      []string
		stdin     string
		wantCode  int
		wantLines []string // prefixes of the lines of stdout
	}{
		{"clean file", []string{cleanFile}, "", 0, nil},
		{"clean stdin", nil, clean, 0, nil},
		{"leaky file", []string{cleanFile, leakyFile}, "", 1, []string{
			leakyFile + ":2: example.com/b TestB/sub: JWT-like token: …",
			leakyFile + ":5: Secret canary: plain line with [REDACTED ",
		}},
		{"leaky stdin", []string{"-"}, leaky, 1, []string{
			"<stdin>:2: example.com/b TestB/sub: JWT-like token: …",
			"<stdin>:5: Secret canary: ",
		}},
		{"controller-runtime logger never set", nil, testEvents("example.com/c", "", "[controller-runtime] log.SetLogger(...) was never called; logs will not be displayed.\nDetected at:\n", 1024), 1, []string{
			"<stdin>:1: example.com/c: controller-runtime logger never set: [controller-runtime] log.SetLogger(...) was never called",
		}},
		{"missing file", []string{filepath.Join(dir, "nope.json")}, "", 2, nil},
		{"bad flag", []string{"-nope"}, "", 2, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := run(tt.args, strings.NewReader(tt.stdin), &stdout, &stderr)
			if code != tt.wantCode {
				t.Errorf("exit code %d, want %d; stdout:\n%s\nstderr:\n%s", code, tt.wantCode, stdout.String(), stderr.String())
			}
			lines := strings.Split(strings.TrimSuffix(stdout.String(), "\n"), "\n")
			if stdout.Len() == 0 {
				lines = nil
			}
			if len(lines) != len(tt.wantLines) {
				t.Fatalf("%d findings, want %d:\n%s", len(lines), len(tt.wantLines), stdout.String())
			}
			for i, want := range tt.wantLines {
				if !strings.HasPrefix(lines[i], want) {
					t.Errorf("finding %d is\n%s\nwant it to start with\n%s", i, lines[i], want)
				}
				checkRedacted(t, lines[i], f)
			}
			if strings.Contains(stderr.String(), f.token) || strings.Contains(stderr.String(), canary.Value) {
				t.Errorf("stderr shows a secret")
			}
		})
	}
}

// interleave alternates the lines of a and b.
func interleave(a, b string) string {
	al, bl := strings.SplitAfter(a, "\n"), strings.SplitAfter(b, "\n")
	var out strings.Builder
	for i := range max(len(al), len(bl)) {
		if i < len(al) {
			out.WriteString(al[i])
		}
		if i < len(bl) {
			out.WriteString(bl[i])
		}
	}
	return out.String()
}

func TestProgress(t *testing.T) {
	var in bytes.Buffer
	enc := json.NewEncoder(&in)
	for _, ev := range []map[string]string{
		{"Action": "start", "Package": "p"},
		{"Action": "run", "Package": "p", "Test": "TestOK"},
		{"Action": "output", "Package": "p", "Test": "TestOK", "Output": "=== RUN   TestOK\n"},
		{"Action": "output", "Package": "p", "Test": "TestOK", "Output": "--- PASS: TestOK (0.00s)\n"},
		{"Action": "pass", "Package": "p", "Test": "TestOK"},
		{"Action": "run", "Package": "p", "Test": "TestBad"},
		{"Action": "output", "Package": "p", "Test": "TestBad", "Output": "=== RUN   TestBad\n"},
		{"Action": "output", "Package": "p", "Test": "TestBad", "Output": "    bad_test.go:3: boom\n"},
		{"Action": "output", "Package": "p", "Test": "TestBad", "Output": "--- FAIL: TestBad (0.00s)\n"},
		{"Action": "fail", "Package": "p", "Test": "TestBad"},
		{"Action": "output", "Package": "p", "Output": "FAIL\n"},
		{"Action": "output", "Package": "p", "Output": "FAIL\tp\t0.01s\n"},
		{"Action": "fail", "Package": "p"},
		{"Action": "output", "Package": "q", "Output": "ok  \tq\t0.01s\n"},
		{"Action": "pass", "Package": "q"},
	} {
		_ = enc.Encode(ev)
	}
	in.WriteString("go: some error of go test itself\n")
	var out, errOut bytes.Buffer
	if code := run([]string{"-progress"}, &in, &out, &errOut); code != 0 {
		t.Fatalf("exit code %d, stderr:\n%s", code, errOut.String())
	}
	want := "=== RUN   TestBad\n    bad_test.go:3: boom\n--- FAIL: TestBad (0.00s)\nFAIL\nFAIL\tp\t0.01s\nok  \tq\t0.01s\ngo: some error of go test itself\n"
	if diff := cmp.Diff(want, out.String()); diff != "" {
		t.Errorf("progress output (-want +got):\n%s", diff)
	}
}
