// Package seal encrypts the per-peer reader credentials to the peer they are for.
//
// Every member holds a key pair of its own (HPKE, RFC 9180: DHKEM(X25519, HKDF-SHA256),
// HKDF-SHA256, AES-256-GCM, base mode). It advertises the public key on its own Cluster
// CR; an issuer seals the kubeconfig of the reader it issued to peer P to P's public key,
// bound to the issuer's and P's cluster IDs. Any peer may read the sealed Secret (the
// readers read the registry namespace), but only P can open it: another member cannot
// use P's credential, and a stolen reader token does not reveal the next one.
//
// The package is pure: no API server, no clock. The private key lives in a Secret of
// the readers namespace, which peers cannot read (see package credentials).
package seal

import (
	"crypto/ecdh"
	"crypto/hpke"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/types"
)

// PublicKeyPrefix starts every advertised public key: the KEM it is for. A key of
// another KEM is refused, so a later suite can be told apart.
const PublicKeyPrefix = "x25519:"

// info is the HPKE info string of a sealed reader credential: what it is, who issued it
// and to whom. A credential sealed by one issuer for one peer opens for that pair only.
func info(issuer, recipient types.UID) []byte {
	return []byte("kubectl-registry reader credential v1\x00" + string(issuer) + "\x00" + string(recipient))
}

func suite() (hpke.KEM, hpke.KDF, hpke.AEAD) {
	return hpke.DHKEM(ecdh.X25519()), hpke.HKDFSHA256(), hpke.AES256GCM()
}

// Key is a member's key pair.
type Key struct {
	priv *ecdh.PrivateKey
}

// GenerateKey returns a new random key pair.
func GenerateKey() (*Key, error) {
	priv, err := ecdh.X25519().GenerateKey(nil)
	if err != nil {
		return nil, fmt.Errorf("generating an X25519 key: %w", err)
	}
	return &Key{priv: priv}, nil
}

// ParsePrivateKey reads a private key written by Key.Bytes.
func ParsePrivateKey(b []byte) (*Key, error) {
	priv, err := ecdh.X25519().NewPrivateKey(b)
	if err != nil {
		return nil, fmt.Errorf("reading the X25519 private key: %w", err)
	}
	return &Key{priv: priv}, nil
}

// Bytes returns the private key, to be stored.
func (k *Key) Bytes() []byte { return k.priv.Bytes() }

// PublicKey returns the public key as advertised: PublicKeyPrefix and the key in
// standard base64.
func (k *Key) PublicKey() string {
	return PublicKeyPrefix + base64.StdEncoding.EncodeToString(k.priv.PublicKey().Bytes())
}

// ParsePublicKey reads an advertised public key.
func ParsePublicKey(s string) (*ecdh.PublicKey, error) {
	rest, ok := strings.CutPrefix(s, PublicKeyPrefix)
	if !ok {
		return nil, fmt.Errorf("the public key does not start with %q", PublicKeyPrefix)
	}
	raw, err := base64.StdEncoding.DecodeString(rest)
	if err != nil {
		return nil, fmt.Errorf("the public key is not base64: %w", err)
	}
	pub, err := ecdh.X25519().NewPublicKey(raw)
	if err != nil {
		return nil, fmt.Errorf("reading the X25519 public key: %w", err)
	}
	return pub, nil
}

// Fingerprint names an advertised public key in a few characters: the first 16 hex
// digits of the SHA-256 of its text. An issued Secret records the fingerprint of the key
// it is sealed to, so that a new key of the peer gets a new credential.
func Fingerprint(publicKey string) string {
	h := sha256.Sum256([]byte(publicKey))
	return hex.EncodeToString(h[:8])
}

// Seal encrypts plaintext to the advertised public key of recipient, as issued by
// issuer.
func Seal(publicKey string, issuer, recipient types.UID, plaintext []byte) ([]byte, error) {
	pub, err := ParsePublicKey(publicKey)
	if err != nil {
		return nil, err
	}
	pk, err := hpke.NewDHKEMPublicKey(pub)
	if err != nil {
		return nil, fmt.Errorf("using the public key: %w", err)
	}
	_, kdf, aead := suite()
	out, err := hpke.Seal(pk, kdf, aead, info(issuer, recipient), plaintext)
	if err != nil {
		return nil, fmt.Errorf("sealing: %w", err)
	}
	return out, nil
}

// ErrOpen is returned when a sealed credential does not open with the key: sealed to
// another key, for another pair of clusters, or changed on the way.
var ErrOpen = errors.New("the sealed credential does not open with this cluster's key")

// Open decrypts what issuer sealed to k for recipient.
func (k *Key) Open(issuer, recipient types.UID, sealed []byte) ([]byte, error) {
	priv, err := hpke.NewDHKEMPrivateKey(k.priv)
	if err != nil {
		return nil, fmt.Errorf("using the private key: %w", err)
	}
	_, kdf, aead := suite()
	out, err := hpke.Open(priv, kdf, aead, info(issuer, recipient), sealed)
	if err != nil {
		return nil, fmt.Errorf("%w (%w)", ErrOpen, err)
	}
	return out, nil
}
