package seal

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/types"
)

func mustKey(t *testing.T) *Key {
	t.Helper()
	k, err := GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// TestOpenOnlyForTheRecipientAndPair: a sealed credential opens with the recipient's
// key for the issuer and recipient it was sealed for, and for nothing else.
func TestOpenOnlyForTheRecipientAndPair(t *testing.T) {
	p, q := mustKey(t), mustKey(t)
	const x, pID, qID = types.UID("x"), types.UID("p"), types.UID("q")
	plain := []byte("apiVersion: v1\nkind: Config\n")
	sealed, err := Seal(p.PublicKey(), x, pID, plain)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(sealed, plain) {
		t.Fatal("the sealed credential holds the plaintext")
	}
	got, err := p.Open(x, pID, sealed)
	if err != nil || !bytes.Equal(got, plain) {
		t.Fatalf("Open = %q, %v", got, err)
	}
	tampered := bytes.Clone(sealed)
	tampered[len(tampered)-1] ^= 1
	for _, tt := range []struct {
		name              string
		key               *Key
		issuer, recipient types.UID
		sealed            []byte
	}{
		{"another member's key", q, x, pID, sealed},
		{"another recipient", p, x, qID, sealed},
		{"another issuer", p, "y", pID, sealed},
		{"changed on the way", p, x, pID, tampered},
		{"truncated", p, x, pID, sealed[:10]},
		{"empty", p, x, pID, nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if out, err := tt.key.Open(tt.issuer, tt.recipient, tt.sealed); !errors.Is(err, ErrOpen) {
				t.Errorf("Open = %q, %v; want ErrOpen", out, err)
			}
		})
	}
}

func TestSealRefusesBadPublicKeys(t *testing.T) {
	k := mustKey(t)
	for _, tt := range []struct{ name, key, want string }{
		{"no prefix", strings.TrimPrefix(k.PublicKey(), PublicKeyPrefix), "does not start with"},
		{"another KEM", "p256:" + strings.TrimPrefix(k.PublicKey(), PublicKeyPrefix), "does not start with"},
		{"not base64", PublicKeyPrefix + "!!!", "not base64"},
		{"short", PublicKeyPrefix + "AAAA", "X25519 public key"},
		{"empty", "", "does not start with"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Seal(tt.key, "x", "p", []byte("secret"))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Seal = %v, want an error containing %q", err, tt.want)
			}
		})
	}
}

func TestPrivateKeyRoundTrip(t *testing.T) {
	k := mustKey(t)
	back, err := ParsePrivateKey(k.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	if back.PublicKey() != k.PublicKey() {
		t.Errorf("public key %q after a round trip, want %q", back.PublicKey(), k.PublicKey())
	}
	sealed, err := Seal(k.PublicKey(), "x", "p", []byte("token"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := back.Open("x", "p", sealed); err != nil {
		t.Errorf("the stored key does not open: %v", err)
	}
	if _, err := ParsePrivateKey([]byte("short")); err == nil {
		t.Error("a short private key was accepted")
	}
}

func TestFingerprint(t *testing.T) {
	a, b := mustKey(t), mustKey(t)
	fp, again := Fingerprint(a.PublicKey()), Fingerprint(a.PublicKey())
	if fp != again || len(fp) != 16 {
		t.Errorf("fingerprint %q (then %q) is not stable or not 16 digits", fp, again)
	}
	if Fingerprint(a.PublicKey()) == Fingerprint(b.PublicKey()) {
		t.Error("two keys share a fingerprint")
	}
}
